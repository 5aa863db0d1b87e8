package testkit

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

// Harness is the real runner on the kit's fakes and the traced in-memory
// marker store; every fake records on one Trace, so a test can assert the
// order of the runner's calls.
type Harness struct {
	Trace    *enginetest.Trace
	Markers  enginetest.Traced
	Switches *Switches
	Queues   *Queues
	Jobs     *Jobs
	Logs     *Buffer
	Metrics  *Buffer
	Runner   *runner.Runner
}

// NewHarness builds a runner of registry with handlers; mutate (optional)
// adjusts the config before the runner is built.
func NewHarness(t testing.TB, registry *message.Registry, handlers map[string]runner.Handler, mutate func(*runner.Config)) *Harness {
	t.Helper()
	h := &Harness{Trace: &enginetest.Trace{}, Switches: &Switches{}, Logs: &Buffer{}, Metrics: &Buffer{}}
	h.Markers = enginetest.Traced{Store: memstore.New(), Trace: h.Trace}
	h.Queues = &Queues{Trace: h.Trace}
	h.Jobs = &Jobs{Trace: h.Trace}
	cfg := runner.Config{
		Registry: registry, Handlers: handlers, Switch: h.Switches, Markers: h.Markers,
		Parker: h.Queues, DeadLetterer: h.Queues, Jobs: jobs.ForEngine(h.Jobs),
		ParkDelay: 2 * time.Second, MaxReceiveCount: 5,
		Logger: obs.NewLogger(h.Logs, "debug"), Metrics: engine.NewMetrics(h.Metrics, obs.Namespace),
	}
	h.Runner = Build(t, cfg, mutate, runner.New)
	return h
}

// Build returns what build makes of cfg once mutate (optional) adjusted it,
// failing t when build refuses the config: how a test harness builds the
// real runner or consumer with one setting changed.
func Build[C, T any](t testing.TB, cfg C, mutate func(*C), build func(C) (T, error)) T {
	t.Helper()
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := build(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Run handles one batch and returns the SQS message ids to retry.
func (h *Harness) Run(t testing.TB, msgs ...events.SQSMessage) []string {
	t.Helper()
	return Run(t, context.Background(), h.Runner, msgs...)
}

// Count is how often the runner counted metric for jobType.
func (h *Harness) Count(jobType, metric string) int {
	return obstest.Count(h.Metrics.String(), jobType, metric)
}

// MarkerOf returns the marker of env's job.
func (h *Harness) MarkerOf(env message.Envelope) (engine.Record, bool) {
	r, ok, _ := h.Markers.Store.Peek(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID})
	return r, ok
}

// Outcomes returns the outcome of every "job outcome" log line, by job id.
func (h *Harness) Outcomes() map[string]string {
	out := map[string]string{}
	for _, l := range obstest.Lines(h.Logs.String()) {
		if l["msg"] == "job outcome" {
			id, _ := l[obs.KeyJobID].(string)
			o, _ := l[obs.KeyOutcome].(string)
			out[id] = o
		}
	}
	return out
}
