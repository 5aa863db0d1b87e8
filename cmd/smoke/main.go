// Command smoke proves a deployed stack works end to end (`make smoke`):
// it reads the CloudFormation stack's outputs, enqueues a welcome mail for a
// test user through the stack's API with the signed producer client, waits
// for the job to succeed, reads it back, checks that every alarm of the
// stack exists, is not in ALARM and notifies the alarm topic, that the
// alarm topic has a confirmed subscription, and that the account's
// unreserved concurrency covers the event sources' maximum concurrency
// together, and prints a report.
//
//	smoke --stack NAME --user ID [--timeout 2m] [--json]
//	smoke --api URL --user ID [--caller NAME]    (no stack: no outputs, no alarms)
//
// It signs with the standard AWS configuration chain; an API on this machine
// (the local stack) is signed as the local stack's test identity, or sent
// unsigned with --caller. Exit codes: 0 every check passed, 1 a check failed
// or AWS could not be read, 2 usage.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/cmdmain"
	"github.com/runstwice/runstwice/internal/dev/localapi"
)

func main() {
	cmdmain.Main(func(ctx context.Context) int { return run(ctx, os.Args[1:], os.Stdout, os.Stderr) })
}

// run is the command; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	var caller string
	var asJSON bool
	fs.StringVar(&cfg.StackName, "stack", "", "the deployed CloudFormation stack")
	fs.StringVar(&cfg.API, "api", "", "the API's base URL (default: the stack's ApiUrl output)")
	fs.StringVar(&cfg.User, "user", "", "the test user to send the welcome mail to (required)")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Minute, "how long to wait for the job to succeed")
	fs.DurationVar(&cfg.Poll, "poll", time.Second, "how often to read the job while waiting")
	fs.StringVar(&caller, "caller", "", "send unsigned, naming this caller in X-Caller (local stack only)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "smoke: unexpected arguments %q\n", fs.Args())
		return 2
	case cfg.User == "":
		fmt.Fprintln(stderr, "smoke: --user (a test user of the stack's users table) is required")
		return 2
	case cfg.StackName == "" && cfg.API == "":
		fmt.Fprintln(stderr, "smoke: give --stack NAME (a deployed stack) or --api URL")
		return 2
	case cfg.Timeout <= 0 || cfg.Poll <= 0:
		fmt.Fprintln(stderr, "smoke: --timeout and --poll must be positive")
		return 2
	}
	var awsCfg aws.Config
	if cfg.StackName != "" || (caller == "" && !localapi.IsLocal(cfg.API)) {
		var err error
		if awsCfg, err = awsx.Load(ctx); err != nil {
			fmt.Fprintf(stderr, "smoke: %v\n", err)
			return 1
		}
	}
	if cfg.StackName != "" {
		cfg.Stack = cfnStack{cloudformation.NewFromConfig(awsCfg)}
		cfg.Alarms = cwAlarms{cloudwatch.NewFromConfig(awsCfg)}
		cfg.Topics = snsTopics{sns.NewFromConfig(awsCfg)}
		cfg.Lambda = lambdaConcurrency{lambda.NewFromConfig(awsCfg)}
	}
	cfg.Client = func(api string) (*client.Client, error) {
		switch {
		case caller != "":
			return client.New(api, client.WithCaller(caller))
		case localapi.IsLocal(api):
			return client.New(api, client.WithCredentials(localapi.Credentials(), localapi.Region))
		}
		return client.New(api, client.WithAWSConfig(awsCfg))
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.Print(stdout)
	}
	if !rep.OK() {
		return 1
	}
	return 0
}
