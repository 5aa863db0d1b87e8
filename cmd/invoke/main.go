// Command invoke is the docker-free `sam local invoke`: it builds a
// function's bootstrap for the host, provisions template.yaml's tables,
// queues and parameters on the local AWS endpoint (idempotent), runs the
// bootstrap under aws-lambda-rie with the template's environment overlaid by
// the env file, invokes it with an event file and prints the response.
//
//	go run ./cmd/invoke -fn email -event events/email-sqs-batch.json
//
// The endpoint is $AWS_ENDPOINT_URL (default http://127.0.0.1:5000, the
// local stack's moto). `make invoke FN=… EVENT=…` runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/stack"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		var fe *lambdarie.FunctionError
		if errors.As(err, &fe) {
			os.Exit(1)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fn := fs.String("fn", "", "function directory under functions/ (enqueue, email, dlq)")
	eventPath := fs.String("event", "", "event file (events/<fn>-*.json)")
	envFile := fs.String("env-file", "events/env.json", "sam local invoke --env-vars file overlaid on the template's environment")
	tmplPath := fs.String("template", "template.yaml", "the SAM template")
	stackName := fs.String("stack-name", stack.DefaultStackName, "AWS::StackName the local resources are named after")
	noProvision := fs.Bool("no-provision", false, "do not create the template's resources on the endpoint first")
	quiet := fs.Bool("quiet", false, "do not show the function's logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fn == "" || *eventPath == "" {
		return errors.New("usage: invoke -fn enqueue|email|dlq -event events/<file>.json")
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	event, err := os.ReadFile(*eventPath)
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	tmpl, err := stack.Load(*tmplPath)
	if err != nil {
		return err
	}
	id, ok := tmpl.FunctionByCodeURI("functions/" + *fn)
	if !ok {
		return fmt.Errorf("no function with CodeUri functions/%s in %s", *fn, *tmplPath)
	}
	endpoint := awsx.Getenv("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
	region := awsx.Getenv("AWS_REGION", stack.DefaultRegion)
	var st *stack.Stack
	if *noProvision {
		st, err = stack.New(tmpl, stack.Options{StackName: *stackName, Region: region})
	} else {
		st, err = stack.Provision(ctx, stack.NewClients(moto.Config(endpoint, region)), tmpl, stack.Options{StackName: *stackName, Region: region})
	}
	if err != nil {
		return fmt.Errorf("against %s: %w", endpoint, err)
	}
	env := map[string]string{}
	if !*noProvision {
		if env, err = st.FunctionEnv(id); err != nil {
			return err
		}
	}
	if *envFile != "" {
		over, err := lambdarie.EnvFile(*envFile, id)
		if err != nil {
			return err
		}
		for k, v := range over {
			env[k] = v
		}
	}
	env["AWS_ENDPOINT_URL"] = endpoint
	env["AWS_REGION"] = region
	env["AWS_ACCESS_KEY_ID"] = awsx.Getenv("AWS_ACCESS_KEY_ID", "test")
	env["AWS_SECRET_ACCESS_KEY"] = awsx.Getenv("AWS_SECRET_ACCESS_KEY", "test")
	timeout, err := st.FunctionTimeout(id)
	if err != nil {
		return err
	}
	bin, err := lambdarie.Build(ctx, root, "functions/"+*fn, filepath.Join(root, "build", *fn, "bootstrap"))
	if err != nil {
		return err
	}
	rie, err := lambdarie.Binary(root)
	if err != nil {
		return err
	}
	logs := stderr
	if *quiet {
		logs = io.Discard
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{RIE: rie, Bootstrap: bin, FunctionName: *fn, Env: env, Timeout: time.Duration(timeout) * time.Second, Output: logs})
	if err != nil {
		return err
	}
	defer em.Stop()
	body, invokeErr := em.Invoke(ctx, event)
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		body = pretty.Bytes()
	}
	fmt.Fprintf(stdout, "%s\n", body)
	return invokeErr
}
