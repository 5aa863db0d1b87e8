package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/bench"
)

// BenchmarkRunnerBatch10 runs the whole pipeline (decode, validate, toggle,
// one batch peek, lease, effect, claim, logs and EMF metrics) over a batch of
// 10 fresh records with in-memory fakes (bench.Pipeline, which make bench
// measures too), and reports the cost per job.
func BenchmarkRunnerBatch10(b *testing.B) {
	for _, lease := range []bool{false, true} {
		name := "seed"
		if lease {
			name = "lease"
		}
		b.Run(name, func(b *testing.B) {
			p, err := bench.NewPipeline(lease)
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
