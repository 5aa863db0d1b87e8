package bench

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/testkit"
)

// firstEvent is an event each function answers without calling AWS.
var firstEvent = map[string]string{
	"enqueue": `{"version":"2.0","rawPath":"/nowhere","requestContext":{"http":{"method":"GET","path":"/nowhere"}}}`,
	"email":   `{"Records":[]}`,
	"dlq":     `{"Records":[]}`,
	"outbox":  `{"Records":[]}`,
	"chain":   `{"Records":[]}`,
	"webhook": `{"Records":[]}`,
}

// initReport is the emulator's line about a function's init phase.
var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// Init measures each function's init time under the runtime emulator (the
// time from the runtime's start to its first request, as the emulator
// reports it), the median of starts cold starts each, without an OTLP
// endpoint and with one (an OTLP receiver of the local stack's, so the
// traced function sets up its tracer provider and exporter and flushes its
// first invocation's spans): the traced init is at most 15 ms longer.
// Each function starts
// with the environment template.yaml gives it, resolved against a stack
// provisioned on the moto at endpoint (a function refuses to start without
// its variables, and a hand-kept list of them goes stale); nothing is called
// at start.
func Init(ctx context.Context, root, endpoint string, starts int) ([]Row, error) {
	rie, err := lambdarie.Binary(root)
	if err != nil {
		return nil, err
	}
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	tmpl, err := stack.Load(filepath.Join(root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	st, err := stack.Provision(ctx, stack.NewClients(moto.Config(endpoint, moto.Region)), tmpl, stack.Options{StackName: "bench-init"})
	if err != nil {
		return nil, fmt.Errorf("bench: provision the template: %w", err)
	}
	spans, err := otlp.Start("127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: the OTLP receiver: %w", err)
	}
	defer spans.Close()
	var rows []Row
	for _, fn := range []string{"enqueue", "email", "dlq", "outbox", "chain", "webhook"} {
		id, ok := tmpl.FunctionByCodeURI("functions/" + fn)
		if !ok {
			return nil, fmt.Errorf("bench: no function with CodeUri functions/%s in template.yaml", fn)
		}
		env, err := st.FunctionEnv(id)
		if err != nil {
			return nil, err
		}
		env["AWS_ENDPOINT_URL"] = endpoint
		env["AWS_REGION"], env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = moto.Region, "test", "test"
		bin, err := lambdarie.Build(ctx, root, "functions/"+fn, filepath.Join(dir, fn, "bootstrap"))
		if err != nil {
			return nil, err
		}
		cfg := lambdarie.Config{RIE: rie, Bootstrap: bin, FunctionName: fn, Env: env, Timeout: 10 * time.Second}
		m, err := medianInit(ctx, cfg, firstEvent[fn], starts)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", fn, err)
		}
		cfg.Env = maps.Clone(env)
		cfg.Env["OTEL_EXPORTER_OTLP_ENDPOINT"] = spans.URL
		traced, err := medianInit(ctx, cfg, firstEvent[fn], starts)
		if err != nil {
			return nil, fmt.Errorf("bench: %s, traced: %w", fn, err)
		}
		of := " (median of " + strconv.Itoa(starts) + " cold starts)"
		rows = append(rows,
			Row{"init", fn + " function: init under the emulator" + of, ms(m), "≤ 50 ms", m <= 50*time.Millisecond},
			Row{"init", fn + " function: init with an OTLP endpoint, more than without" + of,
				fmt.Sprintf("%+.1f ms (%s)", float64(traced-m)/float64(time.Millisecond), ms(traced)), "≤ +15 ms", traced-m <= 15*time.Millisecond})
	}
	return rows, nil
}

// medianInit is the median init time of starts cold starts of cfg.
func medianInit(ctx context.Context, cfg lambdarie.Config, event string, starts int) (time.Duration, error) {
	var inits []time.Duration
	for range starts {
		d, err := coldStart(ctx, cfg, event)
		if err != nil {
			return 0, err
		}
		inits = append(inits, d)
	}
	return median(inits), nil
}

// coldStart starts a fresh emulator, invokes it once and reads the init
// duration it reports.
func coldStart(ctx context.Context, cfg lambdarie.Config, event string) (time.Duration, error) {
	var out testkit.Buffer
	cfg.Output = &out
	em, err := lambdarie.Start(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer em.Stop()
	if _, err := em.Invoke(ctx, []byte(event)); err != nil {
		return 0, err
	}
	for range 50 { // the report line may follow the answer
		if m := initReport.FindStringSubmatch(out.String()); m != nil {
			f, _ := strconv.ParseFloat(m[1], 64)
			return time.Duration(f * float64(time.Millisecond)), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("the emulator reported no INIT REPORT line:\n%s", out.String())
}
