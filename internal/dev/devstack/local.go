package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/dev/stack"
)

// Options configures the local stack.
type Options struct {
	// Root is the checkout (template.yaml, functions/).
	Root string
	// StateDir receives resources.json, stack.json, env, the builds and the
	// logs (.devstack). One stack runs from a state directory at a time.
	StateDir string
	// Endpoint is the AWS endpoint to use; empty starts moto on MotoPort.
	Endpoint string
	// AWS uses the standard AWS configuration chain (real credentials)
	// instead of an emulator.
	AWS bool
	// MotoPort is where moto listens when the stack starts it (5000).
	MotoPort int
	// APIAddr is where the API is served (127.0.0.1:3000).
	APIAddr string
	// WebhookAddr is where the local webhook receiver listens, the webhook
	// function's WEBHOOK_URL (127.0.0.1:0, a free port, when empty).
	WebhookAddr string
	// OTLPAddr is where the local OTLP/HTTP receiver listens, the
	// functions' OTEL_EXPORTER_OTLP_ENDPOINT (127.0.0.1:0 when empty);
	// "off" runs the functions untraced.
	OTLPAddr string
	// APIConcurrency is how many enqueue invocations run at once, each in
	// an instance of its own (DefaultAPIConcurrency when zero).
	APIConcurrency int
	// ParkDelay and ToggleTTL shorten the template's defaults for a local run.
	ParkDelay time.Duration
	ToggleTTL time.Duration
	// AllowFederatedUsers provisions the template with
	// AllowFederatedUsers=true (federated users accepted as callers).
	AllowFederatedUsers bool
	// Out receives progress, and one line per mail sent and per job outcome.
	Out io.Writer
	// Chaos runs the stack under faults, kills or a campaign (see Chaos).
	Chaos Chaos
	// SchedulerPoll is how often the scheduler emulator looks for due
	// schedules (DefaultSchedulerPoll if 0).
	SchedulerPoll time.Duration
	// ShowInternal prints every outcome of runstwice's own jobs (its
	// sweeps' ticks, a batch's finisher), not only those that went wrong.
	ShowInternal bool
}

// DefaultAPIConcurrency is how many enqueue instances the API may run at
// once by default.
const DefaultAPIConcurrency = 8

// The local stack's back-off of transient retries (BACKOFF_BASE,
// BACKOFF_CAP), shorter than the functions' defaults as its park delay is:
// a local retry comes back within seconds.
const (
	LocalBackoffBase = 2 * time.Second
	LocalBackoffCap  = 30 * time.Second
)

// localBackoff sets the local back-off in a function's environment. Under
// a shortened visibility timeout (a chaos campaign) every back-off is
// between one and two timeouts: never sooner than the timeout would bring
// the record back, so a campaign's retries (a copy waiting for its twin's
// lease) spend their receives no faster than before.
func localBackoff(env map[string]string, visibility time.Duration) {
	base, limit := LocalBackoffBase, LocalBackoffCap
	if visibility > 0 {
		base = max(2*visibility, time.Second).Round(time.Second)
		limit = base
	}
	env["BACKOFF_BASE"] = base.String()
	env["BACKOFF_CAP"] = limit.String()
}

// LocalSesMaxSendRate is the template's SesMaxSendRate on the local stack:
// high enough that the e-mail worker's share of it never holds a local
// run back.
const LocalSesMaxSendRate = 1000

// Local is a running local stack.
type Local struct {
	// APIURL is the base URL of the API, e.g. http://127.0.0.1:3000.
	APIURL string
	// Endpoint is the AWS endpoint the stack runs against ("" on AWS).
	Endpoint string
	// Stack is what was provisioned from the template.
	Stack *stack.Stack
	// RunID tells this run from the others in functions.log, where its
	// "run started" line carries it (see RunStartedMsg).
	RunID string
	// WebhookURL is where the local webhook receiver takes events (the
	// webhook function's WEBHOOK_URL); OTLPURL is the OTLP/HTTP receiver
	// of the functions' spans ("" when traces are off).
	WebhookURL string
	OTLPURL    string

	stateDir string
	lock     *stateLock
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	server   *http.Server
	moto     *moto.Server
	proxy    *awsproxy.Server
	pools    []*Pool
	logs     []*os.File
	runLog   *slog.Logger // the run marks in functions.log
	mailbox  Mailbox
	webhooks *Receiver
	// traces is the OTLP receiver (nil when traces are off).
	traces   *otlp.Receiver
	wrote    bool // stack.json and env are ours to remove
	stopOnce sync.Once
}

// Start brings the whole bundle up and returns once it serves requests. The
// stack runs until Stop. It checks what it needs first (its state directory,
// its ports, the endpoint or the credentials) and says plainly what is
// wrong, touching nothing of another stack.
func Start(ctx context.Context, opts Options) (l *Local, err error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	step := func(n int, format string, args ...any) {
		fmt.Fprintf(out, "[%d/6] %s\n", n, fmt.Sprintf(format, args...))
	}
	_, statErr := os.Stat(opts.StateDir)
	created := errors.Is(statErr, fs.ErrNotExist)
	defer func() {
		if err != nil && created {
			_ = os.Remove(opts.StateDir) // a start refused leaves no trace (only when empty)
		}
	}()
	// Every `return nil, err` below sets l to nil before this runs: stop
	// what was started through its own name.
	started := &Local{stateDir: opts.StateDir}
	l = started
	defer func() {
		if err != nil {
			started.Stop()
			l = nil
		}
	}()

	// 0. Checks, before anything is written or started.
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, err
	}
	if l.lock, err = lockStateDir(opts.StateDir); err != nil {
		return nil, err
	}
	// Every port the stack opens, before anything is started or written.
	if err := CheckPorts(opts.Ports()); err != nil {
		return nil, err
	}
	apiListener, err := listen(opts.APIAddr, APIAddrFlag)
	if err != nil {
		return nil, err
	}
	l.server = &http.Server{ReadHeaderTimeout: 10 * time.Second}
	defer func() {
		if err != nil {
			apiListener.Close()
		}
	}()
	var cfg aws.Config
	switch {
	case opts.AWS:
		if cfg, err = awsx.Load(ctx); err != nil {
			return nil, err
		}
		if err := checkCredentials(ctx, cfg); err != nil {
			return nil, err
		}
	case opts.Endpoint != "":
		if err := CheckEndpoint(ctx, opts.Endpoint); err != nil {
			return nil, err
		}
	}
	report := NewReporter(out)
	report.ShowInternal = opts.ShowInternal
	l.mailbox.OnMail = report.Mail
	if l.webhooks, err = StartReceiver(anyPort(opts.WebhookAddr)); err != nil {
		return nil, portError(Port{What: "the webhook receiver", Flag: WebhookAddrFlag, Addr: anyPort(opts.WebhookAddr)}, err)
	}
	l.WebhookURL = l.webhooks.URL
	l.webhooks.OnDelivery = report.Webhook
	if opts.OTLPAddr != "off" {
		if l.traces, err = otlp.Start(anyPort(opts.OTLPAddr)); err != nil {
			return nil, portError(Port{What: "the OTLP receiver", Flag: OTLPAddrFlag, Addr: anyPort(opts.OTLPAddr)}, err)
		}
		l.OTLPURL = l.traces.URL
	}
	// The run is marked once every port is taken: a run refused at its
	// checks writes nothing to functions.log.
	sinks, err := l.openLogs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	l.RunID = newRunID(time.Now())
	l.runLog = runMarker(sinks.App, l.RunID)
	l.runLog.Info(RunStartedMsg, "pid", os.Getpid(), "api", "http://"+apiListener.Addr().String(), "stateDir", opts.StateDir)
	sinks.App = report.OutcomeWriter(sinks.App)
	sinks = opts.Chaos.appLog(sinks)

	// 1. The AWS endpoint.
	switch {
	case opts.AWS:
		step(1, "using AWS through the standard configuration chain")
	case opts.Endpoint != "":
		step(1, "using the AWS endpoint %s", opts.Endpoint)
		l.Endpoint = opts.Endpoint
		cfg = moto.Config(opts.Endpoint, moto.Region)
	default:
		step(1, "starting moto on 127.0.0.1:%d", opts.MotoPort)
		bin, err := moto.Binary()
		if err != nil {
			return nil, err
		}
		motoLog, err := l.openLog(opts.StateDir, MotoLog)
		if err != nil {
			return nil, err
		}
		if l.moto, err = moto.Start(bin, opts.MotoPort, motoLog); err != nil {
			if errors.Is(err, moto.ErrPortInUse) {
				return nil, motoPortInUse(opts.MotoPort)
			}
			return nil, err
		}
		l.Endpoint = l.moto.Endpoint
		cfg = moto.Config(l.Endpoint, moto.Region)
	}
	cfg.Retryer = nil // the SDK's standard retries, as in AWS

	// 2. Every resource of the template, the same names, keys, TTLs,
	// redrive policies and toggle parameters that deploy to AWS.
	tmpl, err := l.provision(ctx, cfg, opts, step, out, map[string]string{"WebhookUrl": l.webhooks.URL})
	if err != nil {
		return nil, err
	}

	// 3. Demo data.
	step(3, "seeding demo users u-demo-1 (unconfirmed), u-demo-2 (confirmed, weekly digest) and u-bad (an unusable address); verifying the sender")
	users, ok := l.Stack.Physical("UsersTable")
	if !ok {
		return nil, errors.New("devstack: the template has no UsersTable")
	}
	if err := SeedUsers(ctx, dynamodb.NewFromConfig(cfg), users.Name, DemoUsers); err != nil {
		return nil, err
	}
	if err := VerifySender(ctx, sesv2.NewFromConfig(cfg), l.Stack.Param("MailFrom")); err != nil {
		return nil, err
	}

	// 4. The functions, built for this machine.
	rie, err := lambdarie.Binary(opts.Root)
	if err != nil {
		return nil, err
	}
	bins := map[string]string{}
	for _, fn := range FunctionDirs(tmpl) {
		step(4, "building functions/%s", fn)
		if bins[fn], err = lambdarie.Build(ctx, opts.Root, "functions/"+fn, filepath.Join(opts.StateDir, "build", fn, "bootstrap"), opts.Chaos.BuildTags...); err != nil {
			return nil, err
		}
	}

	// 5. Each function under the runtime interface emulator, its AWS calls
	// through the proxy that shows the mail going out.
	step(5, "starting the functions under aws-lambda-rie (logs: %s)", filepath.Join(opts.StateDir, FunctionsLog))
	functionEndpoint := l.Endpoint
	if !opts.AWS {
		if l.proxy, err = awsproxy.Start(l.Endpoint, opts.Chaos.hooks(l.mailbox.Hook)...); err != nil {
			return nil, err
		}
		functionEndpoint = l.proxy.URL
	}
	newPool := func(fn string, size int) (*Pool, error) {
		id, ok := tmpl.FunctionByCodeURI("functions/" + fn)
		if !ok {
			return nil, fmt.Errorf("devstack: no function with CodeUri functions/%s", fn)
		}
		env, err := l.Stack.FunctionEnv(id)
		if err != nil {
			return nil, err
		}
		for k, v := range awsEnv(opts.AWS, functionEndpoint) {
			env[k] = v
		}
		if l.traces != nil {
			env["OTEL_EXPORTER_OTLP_ENDPOINT"] = l.traces.URL
		}
		localBackoff(env, opts.Chaos.VisibilityTimeout)
		opts.Chaos.env(env)
		timeout, err := l.Stack.FunctionTimeout(id)
		if err != nil {
			return nil, err
		}
		p := NewPool(size, opts.Chaos.killing(fn, emulatorStart(lambdarie.Config{RIE: rie, Bootstrap: bins[fn], FunctionName: fn, Env: env,
			Timeout: opts.Chaos.timeout(time.Duration(timeout) * time.Second)}, func() io.Writer { return lambdarie.NewSplitter(fn, sinks) })))
		l.pools = append(l.pools, p)
		// One warm instance now: a function that cannot start says so here.
		return p, p.Warm(ctx)
	}
	api, err := newPool("enqueue", orDefault(opts.APIConcurrency, DefaultAPIConcurrency))
	if err != nil {
		return nil, err
	}
	sources, err := EventSources(l.Stack)
	if err != nil {
		return nil, err
	}
	sqsClient := sqs.NewFromConfig(cfg)
	if err := opts.Chaos.shortenVisibility(ctx, sqsClient, sources); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	platform := slog.New(slog.NewTextHandler(sinks.Emulator, nil))
	for _, src := range sources {
		fn, err := newPool(src.Function, 1)
		if err != nil {
			return nil, err
		}
		p := &Poller{Client: sqsClient, QueueURL: src.QueueURL, QueueARN: src.QueueARN, Region: cfg.Region,
			Function: opts.Chaos.wrap(src.Function, fn), BatchSize: src.BatchSize, Window: src.Window, Logger: platform}
		l.wg.Go(func() { p.Run(runCtx) })
	}
	// The DynamoDB stream event sources (the outbox relay): their records
	// fed to their function as Lambda's event source mapping does.
	streamSources, err := StreamSources(l.Stack)
	if err != nil {
		return nil, err
	}
	streams := dynamodbstreams.NewFromConfig(cfg)
	for _, src := range streamSources {
		fn, err := newPool(src.Function, 1)
		if err != nil {
			return nil, err
		}
		p := &StreamPoller{Source: src, Streams: streams, SQS: sqsClient, Function: opts.Chaos.wrap(src.Function, fn),
			Region: cfg.Region, RetryDelay: StreamRetryDelay, Logger: platform}
		l.wg.Go(func() { p.Run(runCtx) })
	}
	if !opts.AWS {
		// moto keeps schedules but never fires them; on AWS the service does.
		sched := NewScheduler(scheduler.NewFromConfig(cfg), sqsClient, l.Stack, platform)
		sched.Poll = opts.SchedulerPoll
		opts.Chaos.scheduler(sched)
		l.wg.Go(func() { sched.Run(runCtx) })
	}

	// 6. The API.
	step(6, "serving the API on http://%s", apiListener.Addr())
	l.APIURL = "http://" + apiListener.Addr().String()
	if l.server.Handler, err = handler(NewGateway(api), cfg, l.Stack, l.Mails(), l.traces, sinks, report.Logger()); err != nil {
		return nil, err
	}
	l.wg.Go(func() { _ = l.server.Serve(apiListener) })
	info := localapi.StackInfo{Endpoint: l.Endpoint, APIURL: l.APIURL, WebhookURL: l.WebhookURL, OTLPURL: l.OTLPURL,
		Stage: Stage, Region: cfg.Region, PID: os.Getpid(), ToggleTTL: l.Stack.Param("ToggleTtl")}
	if l.proxy != nil {
		info.FunctionEndpoint = l.proxy.URL
	}
	if err := writeStackFiles(opts.StateDir, info); err != nil {
		return nil, err
	}
	l.wrote = true
	return l, nil
}

// FunctionEndpoint is the AWS endpoint the functions use: the proxy in front
// of the emulator, through which a chaos campaign's own writes meet the same
// faults ("" on AWS).
func (l *Local) FunctionEndpoint() string {
	if l.proxy == nil {
		return ""
	}
	return l.proxy.URL
}

// Mails is the mail the functions sent (nil on AWS, where the stack does
// not see it).
func (l *Local) Mails() MailLog {
	if l.proxy == nil {
		return nil
	}
	return &l.mailbox
}

func orDefault(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}
