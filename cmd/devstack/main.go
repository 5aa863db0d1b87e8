// Command devstack runs the whole runstwice bundle on one machine, with no
// Docker and no AWS account: moto as AWS, every resource provisioned from
// template.yaml, each function's real bootstrap under the Lambda Runtime
// Interface Emulator, the API served the way API Gateway would, the queues
// polled the way event source mappings do, and every e-mail shown as it goes
// out. `make run` starts it; Ctrl-C stops everything it started.
//
//	devstack [--api-addr 127.0.0.1:3000] [--moto-port 5000] [--endpoint URL | --aws]
//	         [--park-delay 10s] [--toggle-ttl 5s] [--state-dir .devstack]
//
// AWS_ENDPOINT_URL, when set, is used as --endpoint.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

func main() {
	stopWithParent()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	apiAddr := fs.String("api-addr", "127.0.0.1:3000", "where to serve the API")
	motoPort := fs.Int("moto-port", 5000, "where to start moto (unless --endpoint or --aws)")
	endpoint := fs.String("endpoint", os.Getenv("AWS_ENDPOINT_URL"), "an AWS endpoint already running (default $AWS_ENDPOINT_URL)")
	useAWS := fs.Bool("aws", false, "run against AWS with the standard credential chain (AWS_ENDPOINT_URL unset)")
	parkDelay := fs.Duration("park-delay", 10*time.Second, "how long a disabled job is parked (whole seconds, ≤ 900s)")
	toggleTTL := fs.Duration("toggle-ttl", 5*time.Second, "how long workers cache the kill switches")
	stateDir := fs.String("state-dir", ".devstack", "where resources.json, the builds and the function logs go")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *useAWS && *endpoint != "" {
		return fmt.Errorf("--aws runs against AWS itself: unset AWS_ENDPOINT_URL (or drop --endpoint)")
	}
	root, err := moto.RepoRoot()
	if err != nil {
		return err
	}
	state, err := filepath.Abs(*stateDir)
	if err != nil {
		return err
	}
	l, err := devstack.Start(ctx, devstack.Options{
		Root: root, StateDir: state, Endpoint: *endpoint, AWS: *useAWS, MotoPort: *motoPort, APIAddr: *apiAddr,
		ParkDelay: *parkDelay, ToggleTTL: *toggleTTL, Out: out,
	})
	if err != nil {
		return err
	}
	defer l.Stop()
	banner(out, l, state)
	<-ctx.Done()
	fmt.Fprintln(out, "\nstopping: API, pollers, functions, moto…")
	l.Stop()
	fmt.Fprintln(out, "stopped")
	return nil
}

func banner(out io.Writer, l *devstack.Local, state string) {
	endpointEnv := ""
	if l.Endpoint != "" {
		endpointEnv = "AWS_ENDPOINT_URL=" + l.Endpoint + " AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 "
	}
	fmt.Fprintf(out, `
runstwice is running (ready)
  API        %s   (caller from header X-Caller, default local-user)
  AWS        %s
  resources  %s
  logs       %s

Enqueue a verification mail for the demo user u-demo-1:

  curl -i -X POST %s/v1/jobs/email.partner-verification.v1 \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: first-try' \
    -d '{"args":{"userId":"u-demo-1","roleCode":"city-partner","countryCode":"BD"}}'

The mail shows up below as "mail to=demo1@example.com …". Then:

  curl -s %s/v1/jobs/JOB_ID                         # the job, Succeeded
  %sgo run ./cmd/jobctl toggles list
  %sgo run ./cmd/jobctl toggles set email.welcome.v1 off
  %sgo run ./cmd/jobctl dlq list

Ctrl-C stops everything.
`, l.APIURL, orAWS(l.Endpoint), filepath.Join(state, "resources.json"), filepath.Join(state, "functions.log"),
		l.APIURL, l.APIURL, endpointEnv, endpointEnv, endpointEnv)
}

func orAWS(endpoint string) string {
	if endpoint == "" {
		return "AWS (standard credential chain)"
	}
	return endpoint
}
