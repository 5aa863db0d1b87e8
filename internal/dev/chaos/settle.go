package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// settlePoll is how often waitSettled reads the accepted jobs again.
const settlePoll = 5 * time.Second

// waitSettled waits until the stack is quiet (waitQuiet) and every job the
// campaign had accepted is sent or decided: none reads Pending (its
// message not confirmed in a queue: a release whose send failed, or
// whose promotion was not written), and no continuation waits for a
// parent whose end already decides it. What only a release still to come
// would finish (the markers stream's retry, the continuation sweep every
// five minutes) is waited for, since a caller was told it would happen:
// the ledger judges what the stack did, not how far it had got. It
// reports false (and notes a problem naming some of them) when ctx ended
// first.
func (c *campaign) waitSettled(ctx context.Context, results []result) bool {
	store := jobs.NewStore(c.db, c.res.Jobs, marker.NewStore(c.db, c.res.Markers))
	store.Now = c.clockNow
	var open []string
	for ctx.Err() == nil {
		if !c.waitQuiet(ctx) {
			return false
		}
		var err error
		if open, err = undecided(ctx, store, results); err == nil && len(open) == 0 {
			return true
		}
		c.progress.phase(fmt.Sprintf("waiting for %d accepted jobs to be sent or decided", len(open)))
		_ = smithytime.SleepWithContext(ctx, settlePoll)
	}
	c.problem(fmt.Errorf("%w: %s", errNotSettled, strings.Join(open[:min(len(open), 10)], ", ")))
	return false
}

// errNotSettled says accepted jobs were neither sent nor decided before
// the campaign's timeout.
var errNotSettled = errors.New("chaos: accepted jobs left neither sent nor decided")

// undecided returns the ids of the accepted jobs of results that are not
// sent or decided yet (see waitSettled), as the job store reads them.
func undecided(ctx context.Context, store *jobs.Store, results []result) ([]string, error) {
	var keys []engine.Key
	seen := map[string]bool{}
	for _, r := range results {
		if r.Accepted && r.JobID != "" && !seen[r.JobID] {
			seen[r.JobID] = true
			keys = append(keys, engine.Key{Type: r.Job.Kind.Type, JobID: r.JobID})
		}
	}
	views, err := store.Views(ctx, keys)
	if err != nil {
		return nil, err
	}
	var open []string
	parents := map[string]jobs.Job{}
	for _, j := range views {
		switch j.State {
		case jobs.StatePending:
			open = append(open, j.ID)
		case jobs.StateAwaitingContinuation:
			p, ok := parents[j.After]
			if !ok {
				if p, err = parentOf(ctx, store, j.After); err != nil {
					return nil, err
				}
				parents[j.After] = p
			}
			gone := p.Type == "" && strings.HasPrefix(j.Caller, contract.OutboxCallerPrefix) // its parent's item may yet come
			if !gone && jobs.Judge(j.AfterPolicy, p) != jobs.Wait {
				open = append(open, j.ID)
			}
		}
	}
	slices.Sort(open)
	return open, nil
}

// parentOf reads job id as a release reads a parent: with its derived
// state, and one whose record is gone as Expired (no Type).
func parentOf(ctx context.Context, store *jobs.Store, id string) (jobs.Job, error) {
	p, err := store.Get(ctx, id)
	if errors.Is(err, jobs.ErrNotFound) {
		return jobs.Job{ID: id, State: jobs.StateExpired}, nil
	}
	return p, err
}
