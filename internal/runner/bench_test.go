package runner_test

import (
	"context"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/bench"
)

// BenchmarkRunnerBatch10 runs the whole pipeline (decode, validate, kill switch,
// one batch peek, lease, effect, claim, logs and EMF metrics) over a batch of
// 10 fresh SQS records with in-memory fakes (bench.Pipeline, which make bench
// measures too), and reports the cost per job.
//
// payload-seed and payload-lease run a team's own JSON messages on
// engine.NewHandler through the same pipeline: they cost what the envelope
// costs. lease-traced is lease with a tracer provider that records every span
// (synchronously, in memory): what the per-record spans cost at most.
func BenchmarkRunnerBatch10(b *testing.B) {
	for _, c := range []struct {
		name   string
		lease  bool
		newRun func(bool) (*bench.Pipeline, error)
	}{{"seed", false, bench.NewPipeline}, {"lease", true, bench.NewPipeline}, {"lease-traced", true, bench.NewTracedPipeline},
		{"payload-seed", false, bench.NewPayloadPipeline}, {"payload-lease", true, bench.NewPayloadPipeline}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := c.newRun(c.lease)
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
			defer cancel()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if p.Run(ctx) != 0 {
					b.Fatal("unexpected failures")
				}
			}
			b.StopTimer()
			perJob := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / bench.PipelineBatch
			b.ReportMetric(perJob, "ns/job")
			b.ReportMetric(testing.AllocsPerRun(10, func() { p.Run(ctx) })/bench.PipelineBatch, "allocs/job")
		})
	}
}
