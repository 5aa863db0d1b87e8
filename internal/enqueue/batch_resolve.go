package enqueue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/runstwice/runstwice/internal/jobs"
)

// earlierResolutions returns, by index, what an earlier try of batch b
// resolved the "#k" of its jobs to: a job that waits for "#k" and was
// reserved keeps that job in its own record. A job k deduplicated onto an
// active job X, and its dependents reserved after X, before the try was cut
// short; X may have ended since, and job k would now be a new job of its
// own. The batch answers what its first try decided, so job k is X again,
// the job its dependents wait for. One BatchGetItem when a job of b waits
// for another of b, none otherwise.
func (h *Handler) earlierResolutions(ctx context.Context, b jobs.Batch) (map[int]string, error) {
	refs := map[string]int{} // a dependent's own id: the index it waits for
	for _, bj := range b.Jobs {
		if n, ok := batchRef(bj.Job.After); ok {
			refs[bj.Job.ID] = n
		}
	}
	if len(refs) == 0 {
		return nil, nil
	}
	recs, err := h.Batches.Records(ctx, slices.Collect(maps.Keys(refs)))
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for id, r := range recs {
		if r.After != "" {
			out[refs[id]] = r.After
		}
	}
	return out, nil
}

// answerAs answers batch job bj as job x, the active job an earlier try of
// the batch deduplicated it onto (earlierResolutions), with x's state now:
// Expired when x's record is gone (what waits for it is decided as after
// an Expired parent).
func (h *Handler) answerAs(ctx context.Context, bj *jobs.BatchJob, x string) error {
	state := jobs.StateExpired
	cur, err := h.Jobs.Get(ctx, x)
	switch {
	case err == nil:
		state = cur.State
	case !errors.Is(err, jobs.ErrNotFound):
		return fmt.Errorf("jobs[%d]: read %s, the job an earlier try answered: %w", bj.Index, x, err)
	}
	bj.JobID, bj.State, bj.Deduplicated = x, state, true
	return nil
}

// batchRef returns the index an after of "#<index>" names, an earlier job
// of the same batch (decodeBatch has checked it), and whether after is one.
func batchRef(after string) (int, bool) {
	k, ok := strings.CutPrefix(after, "#")
	if !ok {
		return 0, false
	}
	n, _ := strconv.Atoi(k)
	return n, true
}
