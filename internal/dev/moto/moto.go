package moto

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/runstwice/runstwice/internal/awsx"
)

// Credentials are the fixed credentials every emulated call signs with.
const (
	AccessKeyID     = "test"
	SecretAccessKey = "test"
)

// Config returns an SDK configuration for an emulator at endpoint with the
// fixed test credentials, independent of the environment, and no retries
// (tests see every failure). The local stack and the tests use it; no Lambda
// function links this package.
func Config(endpoint, region string) aws.Config {
	if region == "" {
		region = Region
	}
	return aws.Config{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, ""),
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
		// The functions' client: without it, a client that retries nothing
		// would fail on the transport race awsx.HTTPClient works around.
		HTTPClient: awsx.HTTPClient(),
	}
}
