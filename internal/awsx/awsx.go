// Package awsx is the one place that builds AWS SDK configuration from the
// environment. Every function and command calls Load, so they all honour the
// standard credential chain, AWS_REGION and AWS_ENDPOINT_URL (the local stack
// and the tests point it at moto).
package awsx

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
)

// DefaultRegion is used when neither AWS_REGION nor AWS_DEFAULT_REGION is set
// and the shared config names none.
const DefaultRegion = "us-east-1"

// Load returns the SDK configuration from the standard chain, its HTTP
// client wrapped by PlainBodies (the SDK's default client when the chain
// names none). The SDK itself applies AWS_ENDPOINT_URL (and
// AWS_ENDPOINT_URL_<SERVICE>) to every client.
func Load(ctx context.Context, optFns ...func(*config.LoadOptions) error) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx, optFns...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("awsx: load config: %w", err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = awshttp.NewBuildableClient()
	}
	cfg.HTTPClient = PlainBodies(cfg.HTTPClient)
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	return cfg, nil
}

// Getenv returns the environment variable name, or def when it is unset or
// empty.
func Getenv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
