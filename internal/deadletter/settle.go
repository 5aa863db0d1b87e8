package deadletter

import (
	"context"
	"fmt"

	"github.com/runstwice/runstwice/engine"
)

// BatchPeeker reads the markers of jobs, many at once
// (aws/dynamostore.Store.PeekBatch).
type BatchPeeker interface {
	PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error)
}

// Settle shows every redriven letter as what became of it: one whose job
// has since run (its marker claimed) reads StatusSucceeded, with its
// RedrivenAt still saying it was redriven first. The record itself is not
// written: the worker that ran the job does not touch the dead letters, so
// the marker is what knows. It reads the markers of the redriven letters
// only, in batches; the others are returned as they are.
func Settle(ctx context.Context, recs []Record, markers BatchPeeker) ([]Record, error) {
	var keys []engine.Key
	for _, r := range recs {
		if r.Status == StatusRedriven && r.JobID != "" {
			keys = append(keys, engine.Key{Type: r.Type, JobID: r.JobID})
		}
	}
	if len(keys) == 0 {
		return recs, nil
	}
	seen, err := markers.PeekBatch(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("deadletter: the markers of redriven letters: %w", err)
	}
	for i, r := range recs {
		if r.Status != StatusRedriven || r.JobID == "" {
			continue
		}
		if m, ok := seen[engine.Key{Type: r.Type, JobID: r.JobID}]; ok && m.Processed() {
			recs[i].Status = StatusSucceeded
		}
	}
	return recs, nil
}
