package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// truth is what the campaign reads back once the stack is quiet: the
// ground truth (the mail SES holds, the dead letters), what
// the API reports for every job, and what the campaign's own instruments
// saw.
type truth struct {
	// Mails are the ids of the mails SES (moto) holds.
	Mails []string
	// Letters are the dead letters, by job id.
	Letters map[string]deadletter.Record
	// States are the jobs as GET /v1/jobs/{id} reports them, by job id (a
	// GET that failed leaves its job out). A job of another caller than the
	// campaign's (an outbox job, a digest of the fan-out) is read as GET
	// reads it for its own caller: the job store's view of it, with its
	// marker, if its caller is the one it must be.
	States map[string]client.Job
	// Fanout are the fan-out's jobs (ticks and pages), read the same way.
	Fanout map[string]client.Job
	// RefusedJobs are the ids of the outbox jobs whose transaction was
	// refused on purpose and that exist all the same.
	RefusedJobs map[string]bool
	// BatchMade are the ids of the jobs of batches never answered 202
	// that exist all the same (their finisher completed the batch).
	BatchMade map[string]bool
	Sends     []send
	Claims    []claim
	Faults    []faults.Event
	Seen      seen
	Attempts  []attempt
}

func (c *campaign) readTruth(ctx context.Context, results []result, fan fanoutPlan) (*truth, error) {
	t := &truth{Faults: c.faults.Events(), Seen: c.obs.snapshot(), Attempts: c.front.attempts()}
	t.Sends, t.Claims = c.witness.snapshot()
	var err error
	if t.Mails, err = motoMails(ctx, c.stack.Endpoint); err != nil {
		return nil, err
	}
	letters, err := deadletter.NewStore(c.db, c.res.DeadLetters).List(ctx, "")
	if err != nil {
		return nil, err
	}
	t.Letters = map[string]deadletter.Record{}
	for _, l := range letters {
		t.Letters[l.ID] = l
	}
	t.States = c.getAll(ctx, append(slices.Clone(results), fan.Digests...))
	t.Fanout, t.RefusedJobs, t.BatchMade = map[string]client.Job{}, map[string]bool{}, map[string]bool{}
	for id := range fan.Jobs {
		if j, ok := c.readJob(ctx, id, digest.Caller); ok {
			t.Fanout[id] = j
		}
	}
	store := jobs.NewStore(c.db, c.res.Jobs, nil)
	for _, r := range results {
		if !r.Refused && (r.Accepted || !r.Job.batched()) {
			continue
		}
		if _, err := store.Get(ctx, r.Job.JobID); !errors.Is(err, jobs.ErrNotFound) {
			if r.Refused {
				t.RefusedJobs[r.Job.JobID] = true
			} else {
				t.BatchMade[r.Job.JobID] = true
			}
		}
	}
	return t, nil
}

// readJob reads job id as GET /v1/jobs/{id} would for caller: the job
// store's view (its record and marker), the job only if caller made it.
func (c *campaign) readJob(ctx context.Context, id, caller string) (client.Job, bool) {
	j, err := jobs.NewStore(c.db, c.res.Jobs, marker.NewStore(c.db, c.res.Markers)).Get(ctx, id)
	if err != nil || j.Caller != caller {
		return client.Job{}, false
	}
	b, err := json.Marshal(j) // what GET answers
	var out client.Job
	if err != nil || json.Unmarshal(b, &out) != nil {
		return client.Job{}, false
	}
	return out, true
}

// callerOf is the caller a planned job belongs to ("" for the campaign's
// own, which GET reads).
func callerOf(j plannedJob) string {
	switch j.Source {
	case viaOutbox:
		return contract.OutboxCallerPrefix + Producer
	case viaFanout:
		return digest.Caller
	}
	return ""
}

// motoMails reads the ids of the mails moto's SES holds: moto's own record
// (GET /moto-api/data.json, key ses), not what the campaign saw go by.
func motoMails(ctx context.Context, endpoint string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/moto-api/data.json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chaos: read SES from moto: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("chaos: read SES from moto: %s: %s", resp.Status, b)
	}
	var data struct {
		SES map[string][]struct {
			ID string `json:"id"`
		} `json:"ses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		return nil, fmt.Errorf("chaos: read SES from moto: %w", err)
	}
	var ids []string
	for _, m := range data.SES["Message"] {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// getAll asks the API for every accepted job, as its caller would (readJob
// for a job of another caller).
func (c *campaign) getAll(ctx context.Context, results []result) map[string]client.Job {
	states := map[string]client.Job{}
	var mu sync.Mutex
	work := make(chan result)
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for r := range work {
				var j client.Job
				if caller := callerOf(r.Job); caller != "" {
					got, ok := c.readJob(ctx, r.JobID, caller)
					if !ok {
						continue
					}
					j = got
				} else {
					got, err := c.api.Get(ctx, r.JobID)
					if err != nil {
						continue
					}
					j = *got
				}
				mu.Lock()
				states[r.JobID] = j
				mu.Unlock()
			}
		})
	}
	for _, r := range results {
		if r.Accepted {
			work <- r
		}
	}
	close(work)
	wg.Wait()
	return states
}
