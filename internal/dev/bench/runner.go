package bench

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// benchType is the job type every section runs: a welcome-like job whose
// lease is on or off.
func benchType(lease bool) message.JobType {
	return message.JobType{
		Name: "bench.notify.v1", Args: []message.ArgSpec{{Name: "userId", Format: message.FormatID, Required: true}},
		Queue: contract.QueueDefault, EnabledByDefault: true, Lease: lease, KeyPrefix: "notify", KeyArgs: []string{"userId"},
	}
}

// batchOf returns n fresh SQS records of jt.
func batchOf(jt message.JobType, n int) events.SQSEvent {
	var ev events.SQSEvent
	for range n {
		body, err := testkit.EnvelopeFor(jt).Encode()
		if err != nil {
			panic(err)
		}
		ev.Records = append(ev.Records, testkit.RawRecord(string(body), 1))
	}
	return ev
}

// benchOrder is a team's own message, the any-payload rows' record.
type benchOrder struct {
	ID     string `json:"orderId"`
	Amount int    `json:"amount"`
}

// orderKind is benchOrder's kind, its lease on or off.
func orderKind(lease bool) engine.Kind[benchOrder] {
	return engine.Kind[benchOrder]{Name: "bench.orders", Key: func(o benchOrder) (string, error) { return o.ID, nil }, Lease: lease}
}

var orderSeq atomic.Int64

// orderBatch returns n records of fresh orders.
func orderBatch(n int) events.SQSEvent {
	var ev events.SQSEvent
	for range n {
		body := fmt.Sprintf(`{"orderId":"o-%d-%d","amount":12}`, time.Now().UnixNano(), orderSeq.Add(1))
		ev.Records = append(ev.Records, testkit.RawRecord(body, 1))
	}
	return ev
}

// Pipeline is the runner over in-memory fakes with a handler that does
// nothing, and a batch of 10 fresh records of one job type: what make bench
// and the runner's BenchmarkRunnerBatch10 measure.
type Pipeline struct {
	handle handleFunc
	store  *swappable
	batch  events.SQSEvent
	// spans is the traced pipeline's exporter (nil untraced).
	spans *recorder
}

// PipelineBatch is the number of records a Pipeline handles per run.
const PipelineBatch = 10

// NewPipeline builds the pipeline, its job type leased or not.
func NewPipeline(lease bool) (*Pipeline, error) { return newPipeline(lease, nil) }

// NewPayloadPipeline is NewPipeline on a team's own payload: a Kind of
// JSON orders on engine.NewHandler, with the same fakes, logs and metrics,
// so the two rows differ only in the payload.
func NewPayloadPipeline(lease bool) (*Pipeline, error) {
	p := &Pipeline{store: &swappable{memstore.New()}, batch: orderBatch(PipelineBatch)}
	h, err := engine.NewHandler(orderKind(lease), func(context.Context, engine.Job[benchOrder]) error { return nil }, engine.Options{
		Store: p.store, Switch: &testkit.Switches{}, Parker: &testkit.Queues{},
		Logger: obs.NewLogger(io.Discard, "info"), Metrics: engine.NewMetrics(io.Discard, obs.Namespace),
	})
	if err != nil {
		return nil, err
	}
	p.handle = h.HandleSQS
	return p, nil
}

// NewTracedPipeline is NewPipeline with a tracer provider that records
// every span, synchronously: each span is exported, as it ends, to an
// exporter that keeps it in memory (what tracing costs the runner at most;
// a batching exporter hands the export to another goroutine).
func NewTracedPipeline(lease bool) (*Pipeline, error) {
	exp := &recorder{}
	p, err := newPipeline(lease, sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	if p != nil {
		p.spans = exp
	}
	return p, err
}

func newPipeline(lease bool, tp trace.TracerProvider) (*Pipeline, error) {
	jt := benchType(lease)
	reg, err := message.NewRegistry(jt)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{store: &swappable{memstore.New()}, batch: batchOf(jt, PipelineBatch)}
	noop := runner.HandlerFunc(func(context.Context, runner.Job) error { return nil })
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: map[string]runner.Handler{jt.Name: noop},
		Switch: &testkit.Switches{}, Markers: p.store, Parker: &testkit.Queues{},
		Logger: obs.NewLogger(io.Discard, "info"), Metrics: engine.NewMetrics(io.Discard, obs.Namespace),
		TracerProvider: tp,
	})
	if err != nil {
		return nil, err
	}
	p.handle = r.Handle
	return p, nil
}

// Run handles the batch once, from an empty marker store (every record a
// first delivery), and reports how many records failed.
func (p *Pipeline) Run(ctx context.Context) int {
	p.store.Store = memstore.New()
	if p.spans != nil {
		p.spans.Reset()
	}
	resp, _ := p.handle(ctx, p.batch)
	return len(resp.BatchItemFailures)
}

// runnerRuns is how many benchmark runs the runner's time is the median of
// (as benchstat wants at least five): one run moves with the machine's load.
const runnerRuns = 5

// Runner measures the whole pipeline in-process (decode, validate, switch,
// one batch peek, lease, effect, claim, logs and metrics) over batches of
// 10 fresh records with in-memory fakes: time and allocations per job, the
// median of runnerRuns runs, in seed and lease mode, each without a tracer
// and with one that records every span (NewTracedPipeline): the traced
// time is at most 1.5 times the untraced.
func Runner() []Row {
	var rows []Row
	for _, lease := range []bool{false, true} {
		mode := map[bool]string{false: "seed", true: "lease"}[lease]
		plain, err := NewPipeline(lease)
		if err != nil {
			panic(err)
		}
		traced, err := NewTracedPipeline(lease)
		if err != nil {
			panic(err)
		}
		payload, err := NewPayloadPipeline(lease)
		if err != nil {
			panic(err)
		}
		f := measure(plain, traced, payload)
		ns, allocs, tracedNs, tracedAllocs := f[0].ns, f[0].allocs, f[1].ns, f[1].allocs
		ratio, payloadRatio := tracedNs/ns, f[2].ns/ns
		rows = append(rows,
			Row{"runner", "in-process, " + mode + " mode, envelope: time per job", fmt.Sprintf("%.1f µs", ns/1000), "≤ 20 µs", ns <= 20_000},
			Row{"runner", "in-process, " + mode + " mode, envelope: allocations per job", fmt.Sprintf("%.1f", allocs), "≤ 47.6 (release 4)", allocs <= 47.6},
			Row{"runner", "in-process, " + mode + " mode, any payload: time per job", fmt.Sprintf("%.1f µs (%.2f× envelope)", f[2].ns/1000, payloadRatio),
				"≤ 1.05× envelope (no strict envelope decode)", payloadRatio <= 1.05},
			Row{"runner", "in-process, " + mode + " mode, any payload: allocations per job", fmt.Sprintf("%.1f", f[2].allocs), "≤ 47.6 (release 4)", f[2].allocs <= 47.6},
			Row{"runner", "in-process, " + mode + " mode, envelope, traced (every span recorded): time per job",
				fmt.Sprintf("%.1f µs (%.2f× untraced)", tracedNs/1000, ratio), "≤ 1.5× untraced", ratio <= 1.5},
			Row{"runner", "in-process, " + mode + " mode, envelope, traced: allocations per job", fmt.Sprintf("%.1f", tracedAllocs), "", true},
		)
	}
	return rows
}

// perJobCost is what one pipeline costs per job: the median time of its runs
// and its allocations.
type perJobCost struct{ ns, allocs float64 }

// measure runs each pipeline runnerRuns times, taking turns (so that a
// change in the machine's load falls on all of them alike), and returns
// each one's cost per job.
func measure(ps ...*Pipeline) []perJobCost {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	times := make([][]time.Duration, len(ps))
	allocs := make([]int64, len(ps))
	for range runnerRuns {
		for i, p := range ps {
			res := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for range b.N {
					p.Run(ctx)
				}
			})
			times[i] = append(times[i], time.Duration(res.NsPerOp()))
			allocs[i] = max(allocs[i], res.AllocsPerOp())
		}
	}
	out := make([]perJobCost, len(ps))
	for i := range ps {
		out[i] = perJobCost{float64(median(times[i])) / PipelineBatch, float64(allocs[i]) / PipelineBatch}
	}
	return out
}

// recorder is a span exporter that keeps the spans it is given, as they
// are (an exporter's own encoding is not the runner's cost).
type recorder struct {
	mu    sync.Mutex
	spans []sdktrace.ReadOnlySpan
}

func (r *recorder) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, spans...)
	return nil
}

func (r *recorder) Shutdown(context.Context) error { return nil }

// Reset forgets the spans kept, keeping the room they took.
func (r *recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.spans)
	r.spans = r.spans[:0]
}

// swappable lets each run start from an empty marker store.
type swappable struct{ *memstore.Store }
