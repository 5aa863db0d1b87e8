package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/stack"
)

// Options configures the local stack.
type Options struct {
	// Root is the checkout (template.yaml, functions/).
	Root string
	// StateDir receives resources.json and the function logs (.devstack).
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
	// ParkDelay and ToggleTTL shorten the template's defaults for a local run.
	ParkDelay time.Duration
	ToggleTTL time.Duration
	// Out receives progress and the mail as it goes out.
	Out io.Writer
}

// Local is a running local stack.
type Local struct {
	// APIURL is the base URL of the API, e.g. http://127.0.0.1:3000.
	APIURL string
	// Endpoint is the AWS endpoint the stack runs against.
	Endpoint string
	// Stack is what was provisioned from the template.
	Stack *stack.Stack

	cancel   context.CancelFunc
	wg       sync.WaitGroup
	server   *http.Server
	moto     *moto.Server
	emus     []*lambdarie.Emulator
	logFile  *os.File
	stopOnce sync.Once
}

// functions are the bundle's functions, by directory under functions/.
var functions = []string{"enqueue", "email", "dlq"}

// enqueueSlots is how many emulators serve the API: one per concurrent
// request, since an emulator takes one invocation at a time.
const enqueueSlots = 3

// Start brings the whole bundle up and returns once it serves requests. The
// stack runs until Stop (or until ctx is done).
func Start(ctx context.Context, opts Options) (l *Local, err error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	step := func(n int, format string, args ...any) {
		fmt.Fprintf(out, "[%d/6] %s\n", n, fmt.Sprintf(format, args...))
	}
	l = &Local{}
	defer func() {
		if err != nil {
			l.Stop()
		}
	}()
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, err
	}
	if l.logFile, err = os.Create(filepath.Join(opts.StateDir, "functions.log")); err != nil {
		return nil, err
	}

	// 1. The AWS endpoint.
	var cfg aws.Config
	switch {
	case opts.AWS:
		step(1, "using AWS through the standard configuration chain")
		if cfg, err = awsx.Load(ctx); err != nil {
			return nil, err
		}
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
		if l.moto, err = moto.Start(bin, opts.MotoPort, nil); err != nil {
			return nil, fmt.Errorf("%w (is another `make run` still running?)", err)
		}
		l.Endpoint = l.moto.Endpoint
		cfg = moto.Config(l.Endpoint, moto.Region)
	}
	cfg.Retryer = nil // the SDK's standard retries, as in AWS

	// 2. Every resource of the template, the same names, keys, TTLs,
	// redrive policies and toggle parameters that deploy to AWS.
	tmpl, err := stack.Load(filepath.Join(opts.Root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	params := map[string]string{"Stage": "local"}
	if opts.ParkDelay > 0 {
		params["ParkDelaySeconds"] = strconv.Itoa(int(opts.ParkDelay / time.Second))
	}
	if opts.ToggleTTL > 0 {
		params["ToggleTtl"] = opts.ToggleTTL.String()
	}
	step(2, "provisioning template.yaml (stage local)")
	if l.Stack, err = stack.Provision(ctx, stack.NewClients(cfg), tmpl, stack.Options{Params: params}); err != nil {
		return nil, err
	}
	refs := l.Stack.Refs()
	ids := make([]string, 0, len(refs))
	for id := range refs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for i, id := range ids {
		fmt.Fprintf(out, "      %2d of %d  %-22s %s\n", i+1, len(ids), id, refs[id])
	}
	b, _ := json.MarshalIndent(refs, "", "  ")
	if err := os.WriteFile(filepath.Join(opts.StateDir, "resources.json"), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}

	// 3. Demo data.
	step(3, "seeding demo users u-demo-1 (unconfirmed) and u-demo-2 (confirmed); verifying the sender")
	users, ok := l.Stack.Physical("UsersTable")
	if !ok {
		return nil, errors.New("devstack: the template has no UsersTable")
	}
	if err := SeedUsers(ctx, dynamodb.NewFromConfig(cfg), users.Name); err != nil {
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
	for _, fn := range functions {
		step(4, "building functions/%s", fn)
		if bins[fn], err = lambdarie.Build(ctx, opts.Root, "functions/"+fn, filepath.Join(opts.StateDir, "build", fn, "bootstrap")); err != nil {
			return nil, err
		}
	}

	// 5. Each function under the runtime interface emulator.
	step(5, "starting the functions under aws-lambda-rie (logs: %s)", l.logFile.Name())
	start := func(fn string) (*lambdarie.Emulator, error) {
		id, ok := tmpl.FunctionByCodeURI("functions/" + fn)
		if !ok {
			return nil, fmt.Errorf("devstack: no function with CodeUri functions/%s", fn)
		}
		env, err := l.Stack.FunctionEnv(id)
		if err != nil {
			return nil, err
		}
		for k, v := range l.awsEnv(opts) {
			env[k] = v
		}
		timeout, err := l.Stack.FunctionTimeout(id)
		if err != nil {
			return nil, err
		}
		em, err := lambdarie.Start(ctx, lambdarie.Config{
			RIE: rie, Bootstrap: bins[fn], FunctionName: fn, Env: env,
			Timeout: time.Duration(timeout) * time.Second, Output: l.logFile,
		})
		if err == nil {
			l.emus = append(l.emus, em)
		}
		return em, err
	}
	var api pool
	for range enqueueSlots {
		em, err := start("enqueue")
		if err != nil {
			return nil, err
		}
		api.add(em)
	}
	sources, err := EventSources(l.Stack)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l.cancel = cancel
	sqsClient := sqs.NewFromConfig(cfg)
	logger := slog.New(slog.NewTextHandler(l.logFile, nil))
	for _, src := range sources {
		em, err := start(src.Function)
		if err != nil {
			return nil, err
		}
		p := &Poller{Client: sqsClient, QueueURL: src.QueueURL, QueueARN: src.QueueARN, Region: cfg.Region,
			Function: em, BatchSize: src.BatchSize, Window: src.Window, Logger: logger}
		l.wg.Add(1)
		go func() { defer l.wg.Done(); p.Run(runCtx) }()
	}

	// 6. The API, and the mail as it goes out.
	step(6, "serving the API on http://%s", opts.APIAddr)
	ln, err := net.Listen("tcp", opts.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("devstack: API address: %w", err)
	}
	l.APIURL = "http://" + ln.Addr().String()
	l.server = &http.Server{Handler: NewGateway(&api), ReadHeaderTimeout: 10 * time.Second}
	l.wg.Add(1)
	go func() { defer l.wg.Done(); _ = l.server.Serve(ln) }()
	if !opts.AWS {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); WatchMail(runCtx, l.Endpoint, out, 500*time.Millisecond) }()
	}
	return l, nil
}

// awsEnv is what the functions need to reach the same AWS as the stack.
func (l *Local) awsEnv(opts Options) map[string]string {
	env := map[string]string{"AWS_REGION": moto.Region, "AWS_DEFAULT_REGION": moto.Region}
	if opts.AWS {
		for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
			if v := os.Getenv(k); v != "" {
				env[k] = v
			}
		}
		return env
	}
	env["AWS_ENDPOINT_URL"] = l.Endpoint
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "test", "test"
	return env
}

// Stop stops every process the stack started. It is safe to call twice.
func (l *Local) Stop() {
	l.stopOnce.Do(func() {
		if l.cancel != nil {
			l.cancel()
		}
		if l.server != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = l.server.Shutdown(ctx)
			cancel()
		}
		l.wg.Wait()
		for _, em := range l.emus {
			em.Stop()
		}
		if l.moto != nil {
			l.moto.Stop()
		}
		if l.logFile != nil {
			l.logFile.Close()
		}
	})
}

// pool spreads invocations over several emulators, each serving one at a
// time, the way Lambda runs concurrent invocations in separate containers.
type pool struct {
	emus []*lambdarie.Emulator
	next atomic.Uint32
}

func (p *pool) add(em *lambdarie.Emulator) { p.emus = append(p.emus, em) }

// Invoke implements Invoker.
func (p *pool) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	em := p.emus[int(p.next.Add(1))%len(p.emus)]
	return em.Invoke(ctx, payload)
}
