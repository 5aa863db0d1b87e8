package runner_test

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
)

// swappable lets each benchmark iteration start from an empty marker store.
type swappable struct{ *marker.Memory }

// BenchmarkRunnerBatch10 runs the whole pipeline (decode, validate, toggle,
// one batch peek, lease, effect, claim, logs and EMF metrics) over a batch of
// 10 fresh records with in-memory fakes, and reports the cost per job.
func BenchmarkRunnerBatch10(b *testing.B) {
	for _, lease := range []bool{false, true} {
		name := "seed"
		if lease {
			name = "lease"
		}
		b.Run(name, func(b *testing.B) {
			reg := registry(b, lease)
			store := &swappable{marker.NewMemory()}
			noop := runner.HandlerFunc(func(context.Context, runner.Job) error { return nil })
			r, err := runner.New(runner.Config{
				Registry: reg, Handlers: map[string]runner.Handler{notify.Name: noop},
				Toggles: &testkit.Switches{}, Markers: store, Parker: &testkit.Queues{},
				Logger: obs.NewLogger(io.Discard, "info"), Metrics: obs.NewMetrics(io.Discard),
			})
			if err != nil {
				b.Fatal(err)
			}
			var ev events.SQSEvent
			for range 10 {
				ev.Records = append(ev.Records, testkit.Record(b, notifyJob(), 1))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				store.Memory = marker.NewMemory()
				resp, _ := r.Handle(ctx, ev)
				if len(resp.BatchItemFailures) != 0 {
					b.Fatal("unexpected failures")
				}
			}
			b.StopTimer()
			perJob := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 10
			b.ReportMetric(perJob, "ns/job")
			b.ReportMetric(float64(testing.AllocsPerRun(10, func() {
				store.Memory = marker.NewMemory()
				_, _ = r.Handle(ctx, ev)
			}))/10, "allocs/job")
		})
	}
}
