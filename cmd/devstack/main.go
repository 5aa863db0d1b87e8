// Command devstack runs the whole runstwice bundle on one machine, with no
// Docker and no AWS account: moto as AWS, every resource provisioned from
// template.yaml, each function's real bootstrap under the Lambda Runtime
// Interface Emulator, the API served the way API Gateway would, the queues
// polled the way event source mappings do, and every e-mail shown as it goes
// out. `make run` starts it; Ctrl-C stops everything it started.
//
//	devstack [--api-addr 127.0.0.1:3000] [--webhook-addr 127.0.0.1:3001] [--otlp-addr 127.0.0.1:4318] [--moto-port 5000] [--endpoint URL | --aws]
//	         [--api-concurrency 8] [--park-delay 10s] [--toggle-ttl 5s] [--state-dir .devstack]
//	         [--faults SPEC] [--show-internal]
//
// It checks what it needs before it starts anything and says plainly what
// is wrong (a port in use, named with the flag that moves it, and all four
// at once; another stack running from the same state directory, an
// endpoint that does not answer, no credentials for --aws), exiting
// non-zero. An exported AWS_ENDPOINT_URL is ignored: --endpoint
// runs against another endpoint, --aws against AWS. While it runs,
// .devstack/stack.json and .devstack/env say how to reach it. --faults
// injects faults into the functions' AWS calls: throttling, 500/503, cut
// connections, delays, outages and responses lost after the call was applied
// (see internal/dev/faults for the syntax), e.g.
// --faults 'dynamodb:*:throttle=0.02,ses:*:drop=0.01,ssm:*:down@1m-2m'.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/cmdmain"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

func main() {
	stopWithParent()
	cmdmain.Main(func(ctx context.Context) int {
		return cmdmain.Exit(os.Stderr, "devstack", run(ctx, os.Args[1:], os.Stdout), func(err error) int {
			if errors.As(err, new(usageError)) {
				return 2
			}
			return 1
		})
	})
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("devstack", flag.ContinueOnError)
	apiAddr := fs.String("api-addr", "127.0.0.1:3000", "where to serve the API and the web view")
	webhookAddr := fs.String("webhook-addr", "127.0.0.1:3001", "where the local webhook receiver listens (the webhook function's WEBHOOK_URL)")
	otlpAddr := fs.String("otlp-addr", "127.0.0.1:4318", `where the local OTLP/HTTP receiver listens (the functions' OTEL_EXPORTER_OTLP_ENDPOINT); "off": no traces`)
	motoPort := fs.Int("moto-port", 5000, "where to start moto (unless --endpoint or --aws)")
	endpoint := fs.String("endpoint", "", "run against an AWS endpoint already running instead of starting moto")
	useAWS := fs.Bool("aws", false, "run against AWS with the standard credential chain")
	apiConcurrency := fs.Int("api-concurrency", devstack.DefaultAPIConcurrency, "how many enqueue invocations run at once")
	parkDelay := fs.Duration("park-delay", 10*time.Second, "how long a disabled job is parked (whole seconds, ≤ 900s)")
	toggleTTL := fs.Duration("toggle-ttl", 5*time.Second, "how long workers cache the kill switches")
	stateDir := fs.String("state-dir", ".devstack", "where resources.json, the builds and the function logs go")
	faultSpec := fs.String("faults", "", faultsFlagHelp)
	showInternal := fs.Bool("show-internal", false, "print every outcome of runstwice's own jobs (its sweeps' ticks, a batch's finisher), not only those that went wrong")
	allowFederated := fs.Bool("allow-federated-users", false, "provision the stack with AllowFederatedUsers=true (STS federated users accepted as callers)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if *useAWS && *endpoint != "" {
		return usageError{errors.New("--aws runs against AWS itself: give --aws or --endpoint, not both")}
	}
	chaos, err := faultOptions(*faultSpec, *useAWS, out)
	if err != nil {
		return err
	}
	if v := os.Getenv("AWS_ENDPOINT_URL"); v != "" && *endpoint == "" && !*useAWS {
		fmt.Fprintf(out, "note: AWS_ENDPOINT_URL=%s is set in this shell and ignored (make run ARGS=\"--endpoint %s\" to use it)\n", v, v)
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
		Root: root, StateDir: state, Endpoint: *endpoint, AWS: *useAWS, MotoPort: *motoPort, APIAddr: *apiAddr, WebhookAddr: *webhookAddr, OTLPAddr: *otlpAddr,
		APIConcurrency: *apiConcurrency, ParkDelay: *parkDelay, ToggleTTL: *toggleTTL, Out: out, Chaos: chaos,
		AllowFederatedUsers: *allowFederated, ShowInternal: *showInternal,
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

// usageError is a mistake in the command line (exit 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func banner(out io.Writer, l *devstack.Local, state string) {
	rel := func(name string) string {
		if wd, err := os.Getwd(); err == nil {
			if r, err := filepath.Rel(wd, filepath.Join(state, name)); err == nil && !strings.HasPrefix(r, "..") {
				return r
			}
		}
		return filepath.Join(state, name)
	}
	mail := "Each mail sent and each job outcome shows up below as one line."
	if l.Mails() == nil {
		mail = "Mail goes out through SES (not shown here); job outcomes show up below."
	}
	fmt.Fprintf(out, `
runstwice is running (ready)
  API        %s   (caller from header X-Caller, default local-user)
  web view   %s%s   (jobs, mails, dead letters, switches)
  webhooks   %s   (the local receiver the webhook function POSTs to)
  traces     %s
  AWS        %s
  resources  %s
  logs       %s (application JSON), %s, %s
  run        %s (marked in %s; all state is in memory, gone at Ctrl-C)

Enqueue a verification mail for the demo user u-demo-1:

  curl -i -X POST %s/v1/jobs/email.partner-verification.v1 \
    -H 'Content-Type: application/json' -H 'Idempotency-Key: first-try' \
    -d '{"args":{"userId":"u-demo-1","roleCode":"city-partner","countryCode":"BD"}}'

%s Then, in another terminal:

  curl -s %s/v1/jobs/JOB_ID                # the job
  make jobctl; bin/jobctl toggles list
  bin/jobctl dlq list

(jobctl finds this stack by itself; for other AWS tools, . %s sets
their AWS_ENDPOINT_URL, region and credentials — make run itself ignores them.)

Ctrl-C stops everything.
`, l.APIURL, l.APIURL, devstack.ViewPath, l.WebhookURL, traces(l.OTLPURL), orAWS(l.Endpoint), rel(devstack.ResourcesFile), rel(devstack.FunctionsLog), rel(devstack.MetricsLog), rel(devstack.EmulatorLog),
		l.RunID, rel(devstack.FunctionsLog),
		l.APIURL, mail, l.APIURL, rel(devstack.EnvFile))
}

func traces(otlpURL string) string {
	if otlpURL == "" {
		return "off (--otlp-addr off)"
	}
	return otlpURL + "   (the OTLP/HTTP receiver of the functions' spans)"
}

func orAWS(endpoint string) string {
	if endpoint == "" {
		return "AWS (standard credential chain)"
	}
	return endpoint
}
