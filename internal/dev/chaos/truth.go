package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/faults"
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
	// GET that failed leaves its job out).
	States   map[string]client.Job
	Sends    []send
	Claims   []claim
	Faults   []faults.Event
	Seen     seen
	Attempts []attempt
}

func (c *campaign) readTruth(ctx context.Context, results []result) (*truth, error) {
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
	t.States = c.getAll(ctx, results)
	return t, nil
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

// getAll asks the API for every accepted job, as its caller would.
func (c *campaign) getAll(ctx context.Context, results []result) map[string]client.Job {
	states := map[string]client.Job{}
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range c.cfg.Concurrency {
		wg.Go(func() {
			for id := range work {
				j, err := c.api.Get(ctx, id)
				if err != nil {
					continue
				}
				mu.Lock()
				states[id] = *j
				mu.Unlock()
			}
		})
	}
	for _, r := range results {
		if r.Accepted {
			work <- r.JobID
		}
	}
	close(work)
	wg.Wait()
	return states
}
