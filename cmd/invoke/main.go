// Command invoke is the docker-free `sam local invoke`: it builds a
// function's bootstrap for the host, provisions template.yaml's tables,
// queues and parameters on the local AWS endpoint (idempotent), runs the
// bootstrap under aws-lambda-rie with the template's environment overlaid by
// the env file, invokes it with an event file and prints the response.
//
//	go run ./cmd/invoke [-v] -fn email -event events/email-sqs-batch.json
//
// The endpoint is -endpoint, else $AWS_ENDPOINT_URL, else the running local
// stack's (found through .devstack/stack.json); with none of them it says
// so. Against a running local stack it says which of its queues the
// function writes to: that stack's workers process what it sends. There the
// function's AWS calls go through the stack's proxy, so the mail it sends
// shows in `make run`'s output and the web view as the stack's does, and
// its output is handed to the stack, which sorts it into its
// functions.log (and prints its job outcomes) as its own. It shows
// the function's JSON log lines; -v shows the emulator's lines and the
// metric documents too. `make invoke FN=… EVENT=… [V=1]` runs it.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/cmdmain"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/stack"
)

func main() {
	cmdmain.Main(func(ctx context.Context) int {
		return cmdmain.Exit(os.Stderr, "invoke", run(ctx, os.Args[1:], os.Stdout, os.Stderr), func(err error) int {
			if errors.As(err, new(*lambdarie.FunctionError)) {
				return 1 // the function's own error
			}
			return 2
		})
	})
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	fn := fs.String("fn", "", "function directory under functions/ (e.g. email)")
	eventPath := fs.String("event", "", "event file (events/<fn>-*.json)")
	envFile := fs.String("env-file", "events/env.json", "sam local invoke --env-vars file overlaid on the template's environment")
	tmplPath := fs.String("template", "template.yaml", "the SAM template")
	stackName := fs.String("stack-name", stack.DefaultStackName, "AWS::StackName the local resources are named after")
	noProvision := fs.Bool("no-provision", false, "do not create the template's resources on the endpoint first")
	quiet := fs.Bool("quiet", false, "do not show the function's logs")
	verbose := fs.Bool("v", false, "show the emulator's lines and the metric documents too")
	endpointFlag := fs.String("endpoint", "", "the AWS endpoint (default $AWS_ENDPOINT_URL, else the running local stack's)")
	stateDir := fs.String("state-dir", ".devstack", "where a running local stack keeps stack.json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fn == "" || *eventPath == "" {
		return errors.New("usage: invoke -fn <dir under functions/> -event events/<file>.json")
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
	endpoint, running, err := findEndpoint(*endpointFlag, *stateDir)
	if err != nil {
		return err
	}
	if err := devstack.CheckEndpoint(ctx, endpoint); err != nil {
		return err
	}
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
	beside := running != nil && running.Endpoint == endpoint
	stackAt := localapi.StackInfo{APIURL: localapi.DefaultURL, WebhookURL: envFileWebhook}
	if beside {
		stackAt = *running
	}
	atAddresses(env, endpoint, stackAt)
	env["AWS_ENDPOINT_URL"] = endpoint
	if beside {
		fmt.Fprintf(stderr, "invoke: the local stack (pid %d) is running on %s: this invocation uses its resources (%s-*)%s; its lines go to the stack's functions.log and its mail shows in the stack's output and view\n",
			running.PID, endpoint, *stackName, queuesNote(env))
		if running.FunctionEndpoint != "" {
			env["AWS_ENDPOINT_URL"] = running.FunctionEndpoint // the stack's proxy sees the mail
		}
		if _, set := env["OTEL_EXPORTER_OTLP_ENDPOINT"]; !set && running.OTLPURL != "" {
			env["OTEL_EXPORTER_OTLP_ENDPOINT"] = running.OTLPURL // its spans join the stack's traces
		}
	}
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
	sinks := lambdarie.Sinks{App: stderr}
	switch {
	case *quiet:
		sinks = lambdarie.Sinks{}
	case *verbose:
		sinks.Metrics, sinks.Emulator = stderr, stderr
	}
	logs := lambdarie.NewSplitter(*fn, sinks)
	defer logs.Flush()
	var output io.Writer = logs
	var forward bytes.Buffer // the function's output, for the running stack
	if beside {
		output = io.MultiWriter(logs, &lockedBuffer{b: &forward})
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{RIE: rie, Bootstrap: bin, FunctionName: *fn, Env: env, Timeout: time.Duration(timeout) * time.Second, Output: output})
	if err != nil {
		return err
	}
	defer em.Stop()
	body, invokeErr := em.Invoke(ctx, event)
	if beside {
		em.Stop() // its output is complete once it stopped
		if err := forwardOutput(ctx, running.APIURL, *fn, forward.Bytes()); err != nil {
			fmt.Fprintf(stderr, "invoke: the function's lines could not be handed to the running stack (%v); they are only shown here\n", err)
		}
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, body, "", "  ") == nil {
		body = pretty.Bytes()
	}
	fmt.Fprintf(stdout, "%s\n", body)
	return invokeErr
}

// envFileEndpoint, envFileAPI and envFileWebhook are the addresses
// events/env.json is written for: a local stack on its default ports
// (moto, the API, the webhook receiver).
const (
	envFileEndpoint = "http://127.0.0.1:5000"
	envFileAPI      = localapi.DefaultURL
	envFileWebhook  = "http://127.0.0.1:3001/events"
)

// atAddresses rewrites the env file's addresses of the default local stack
// to the ones this invocation runs against: the AWS endpoint (a queue
// URL, say), and the running stack's API and webhook receiver (its
// WEBHOOK_URL), as .devstack/stack.json names them, so a stack on other
// ports (make run ARGS="--moto-port 5100 --webhook-addr …") gets its own.
func atAddresses(env map[string]string, endpoint string, stack localapi.StackInfo) {
	bases := [][2]string{{envFileEndpoint, endpoint}, {envFileAPI, stack.APIURL}}
	if stack.WebhookURL != "" {
		bases = append(bases, [2]string{origin(envFileWebhook), origin(stack.WebhookURL)})
	}
	for k, v := range env {
		for _, b := range bases {
			if strings.HasPrefix(v, b[0]+"/") || v == b[0] {
				env[k] = strings.TrimSuffix(b[1], "/") + strings.TrimPrefix(v, b[0])
				break
			}
		}
	}
}

// origin is a URL's scheme and host ("http://127.0.0.1:3001"); rawURL
// itself when it does not parse.
func origin(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return u.Scheme + "://" + u.Host
}

// findEndpoint picks the AWS endpoint: the flag, else $AWS_ENDPOINT_URL,
// else the running local stack's. running is that stack, when one runs.
func findEndpoint(flagValue, stateDir string) (endpoint string, running *localapi.StackInfo, err error) {
	info, alive, err := localapi.ReadStackInfo(stateDir)
	if err != nil {
		return "", nil, err
	}
	if alive && info.Endpoint != "" {
		running = &info
	}
	switch {
	case flagValue != "":
		return flagValue, running, nil
	case os.Getenv("AWS_ENDPOINT_URL") != "":
		return os.Getenv("AWS_ENDPOINT_URL"), running, nil
	case running != nil:
		return running.Endpoint, running, nil
	}
	return "", nil, errors.New("no AWS endpoint: start the local stack (`make run`) in another terminal, or set AWS_ENDPOINT_URL (or -endpoint) to an endpoint such as moto")
}

// queuesNote names the queues the function's environment points at.
func queuesNote(env map[string]string) string {
	var names []string
	for _, k := range stack.SortedIDs(env) {
		if strings.HasPrefix(k, "QUEUE_URL_") || k == "DLQ_URL" {
			names = append(names, env[k][strings.LastIndex(env[k], "/")+1:])
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; it may send to " + strings.Join(names, ", ") + ", which that stack's workers consume"
}

// forwardOutput hands a function's output to the running stack at apiURL,
// which sorts it into its functions.log (and its output) as its own.
func forwardOutput(ctx context.Context, apiURL, fn string, output []byte) error {
	if len(output) == 0 {
		return nil
	}
	u := apiURL + devstack.FunctionOutputPath + "?" + url.Values{"fn": {fn}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(output))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// lockedBuffer is a buffer the emulator's output goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
