package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// stateDirName is the local stack's state directory, in the checkout.
const stateDirName = ".devstack"

// credentialsTimeout bounds the first credentials lookup: jobctl says what
// is missing instead of hanging.
const credentialsTimeout = 5 * time.Second

// findStateDir returns the nearest .devstack directory from the working
// directory up, or "".
func findStateDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, stateDirName)); err == nil && fi.IsDir() {
			return filepath.Join(dir, stateDirName)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// localStack reads dir/stack.json, which a running local stack (`make run`)
// writes; ok is false when there is none (or no dir) or the stack that wrote
// it is no longer running.
func localStack(dir string) (info localapi.StackInfo, ok bool, err error) {
	if dir == "" {
		return info, false, nil
	}
	return localapi.ReadStackInfo(dir)
}

// connect loads the AWS configuration: the standard chain, with the EC2
// metadata service off unless AWS_EC2_METADATA_DISABLED=false asks for it
// (off EC2 it would hang), the endpoint from --endpoint, AWS_ENDPOINT_URL or
// the running local stack, and checks that credentials can be had.
func (a *app) connect(ctx context.Context) error {
	var opts []func(*config.LoadOptions) error
	if !strings.EqualFold(a.getenv("AWS_EC2_METADATA_DISABLED"), "false") {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	if a.stateDir == "" {
		a.stateDir = findStateDir()
	}
	endpoint := a.endpoint
	local := endpoint == "" && a.getenv("AWS_ENDPOINT_URL") == "" && a.stage == "local"
	if local {
		info, ok, err := localStack(a.stateDir)
		switch {
		case err != nil:
			return fmt.Errorf("the local stack's %s is unreadable: %w", filepath.Join(a.stateDir, localapi.StackFile), err)
		case !ok:
			return errors.New(`no endpoint: the stage is "local" but no local stack is running ` +
				`(no live .devstack/stack.json here or above) and AWS_ENDPOINT_URL is not set; ` +
				"start one with `make run`, or name a deployed stage with --stage dev")
		case info.Endpoint != "":
			endpoint = info.Endpoint
			fmt.Fprintf(a.stderr, "jobctl: using the local stack at %s (%s, pid %d)\n", endpoint, filepath.Join(a.stateDir, localapi.StackFile), info.PID)
			if a.getenv("AWS_ACCESS_KEY_ID") == "" && a.getenv("AWS_PROFILE") == "" {
				opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(moto.AccessKeyID, moto.SecretAccessKey, "")))
			}
		}
		if info.Stage != "" {
			a.stage = info.Stage
		}
		a.toggleTTL = info.ToggleTTL
		if info.Region != "" && a.getenv("AWS_REGION") == "" {
			opts = append(opts, config.WithRegion(info.Region))
		}
	}
	if endpoint != "" {
		opts = append(opts, config.WithBaseEndpoint(endpoint))
	}
	cfg, err := awsx.Load(ctx, opts...)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, credentialsTimeout)
	defer cancel()
	if cfg.Credentials == nil {
		return errors.New("no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	}
	if _, err := cfg.Credentials.Retrieve(cctx); err != nil {
		return fmt.Errorf("no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "+
			"(on EC2, AWS_EC2_METADATA_DISABLED=false uses the instance role); for the local stack run `make run` (%w)", err)
	}
	a.cfg = cfg
	a.res = resolveResources(a.stage, a.stateDir, a.getenv)
	return nil
}

// endpointName says where AWS calls go, for messages.
func (a *app) endpointName() string {
	if a.cfg.BaseEndpoint != nil {
		return aws.ToString(a.cfg.BaseEndpoint)
	}
	if v := a.getenv("AWS_ENDPOINT_URL"); v != "" {
		return v
	}
	return "AWS (" + a.cfg.Region + ")"
}
