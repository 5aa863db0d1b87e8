package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/runstwice/runstwice/client"
)

// batchesGetUsage is the synopsis of `jobctl batches get`.
const batchesGetUsage = "batches get BATCH_ID [--api URL] [--caller NAME]"

// batchFile is the body of POST /v1/batches as --batch reads it.
type batchFile struct {
	Jobs []struct {
		Type            string                 `json:"type"`
		Args            json.RawMessage        `json:"args"`
		Key             string                 `json:"key"`
		DuplicatePolicy client.DuplicatePolicy `json:"duplicatePolicy"`
		DelaySeconds    int                    `json:"delaySeconds"`
		RunAt           *time.Time             `json:"runAt"`
		After           string                 `json:"after"`
		AfterPolicy     client.AfterPolicy     `json:"afterPolicy"`
	} `json:"jobs"`
}

// readBatch reads a --batch file ("-" for stdin) into the client's jobs.
func (a *app) readBatch(path string) ([]client.BatchJob, error) {
	var (
		b   []byte
		err error
	)
	if path == "-" {
		in := a.stdin
		if in == nil {
			in = os.Stdin
		}
		b, err = io.ReadAll(io.LimitReader(in, 1<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usagef("enqueue: --batch: %v", err)
	}
	var f batchFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, usagef("enqueue: --batch %s is not a batch, {\"jobs\":[{\"type\":…,\"args\":{…}},…]}: %v", path, err)
	}
	out := make([]client.BatchJob, len(f.Jobs))
	for i, j := range f.Jobs {
		out[i] = client.BatchJob{Type: j.Type, Key: j.Key, DuplicatePolicy: j.DuplicatePolicy, DelaySeconds: j.DelaySeconds,
			After: j.After, AfterPolicy: j.AfterPolicy}
		if len(j.Args) > 0 {
			out[i].Args = j.Args
		}
		if j.RunAt != nil {
			out[i].RunAt = *j.RunAt
		}
	}
	return out, nil
}

// enqueueBatch is `jobctl enqueue --batch FILE`: the batch through the API,
// all or nothing, and each job's id and state.
func (a *app) enqueueBatch(ctx context.Context, c *client.Client, r enqueueRequest, how string) error {
	batch, err := a.readBatch(r.batch)
	if err != nil {
		return err
	}
	res, err := c.EnqueueBatch(ctx, batch, client.BatchOptions{IdempotencyKey: r.opts.IdempotencyKey})
	if err := a.refused(err); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	outcome := fmt.Sprintf("accepted, HTTP %d", res.StatusCode)
	if res.Replayed {
		outcome += " (replayed answer)"
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{{"batchId", res.BatchID}, {"outcome", outcome},
		{"location", strings.TrimSuffix(r.api, "/") + res.Location}, {"idempotencyKey", res.IdempotencyKey}, {"caller", how}} {
		fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return a.printBatchJobs(batchTypes(batch), res.Jobs)
}

// printBatchJobs is the table of a batch's jobs: index, id, type, state
// and whether it deduplicated (an active job of its key answered for
// it). types names each job's type by its index ("-" for a job not made
// yet).
func (a *app) printBatchJobs(types map[int]string, jobs []client.BatchJobResult) error {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tJOB ID\tTYPE\tSTATE\tDEDUPLICATED")
	for _, j := range jobs {
		dedup := "no"
		if j.Deduplicated {
			dedup = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", j.Index, j.JobID, dash(types[j.Index]), j.State, dedup)
	}
	return tw.Flush()
}

// batchTypes names the type of each job of a batch by its index, as the
// batch file gave it.
func batchTypes(batch []client.BatchJob) map[int]string {
	types := make(map[int]string, len(batch))
	for i, j := range batch {
		types[i] = j.Type
	}
	return types
}

// jobTypes reads the type of each of a batch's jobs (GET /v1/jobs/{jobId},
// a few at a time), which the batch's own answer does not carry. A job of
// a cut-short accept that is not made yet has none.
func jobTypes(ctx context.Context, c *client.Client, jobs []client.BatchJobResult) (map[int]string, error) {
	var (
		mu    sync.Mutex
		types = make(map[int]string, len(jobs))
		first error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
	)
	for _, j := range jobs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			got, err := c.Get(ctx, j.JobID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				types[j.Index] = got.Type
			case !errors.Is(err, client.ErrNotFound) && first == nil:
				first = fmt.Errorf("job %s of the batch: %w", j.JobID, err)
			}
		})
	}
	wg.Wait()
	return types, first
}

// batchesGet is `jobctl batches get BATCH_ID`: the batch's state and its
// jobs' states now, through the API (GET /v1/batches/{batchId}), as its
// caller.
func (a *app) batchesGet(ctx context.Context, rest []string) error {
	r := enqueueRequest{api: a.getenv("RUNSTWICE_API_URL")}
	var id string
	for i := 0; i < len(rest); i++ {
		name, value, inline := strings.Cut(strings.TrimPrefix(rest[i], "--"), "=")
		if !strings.HasPrefix(rest[i], "--") {
			if id != "" {
				return usagef("batches get takes one batch id")
			}
			id = rest[i]
			continue
		}
		if !inline {
			if i+1 >= len(rest) {
				return usagef("batches get: --%s needs a value", name)
			}
			i++
			value = rest[i]
		}
		switch name {
		case "api":
			r.api = value
		case "caller":
			r.caller, r.hasCaller = value, true
		default:
			return usagef("batches get: unknown flag --%s", name)
		}
	}
	if id == "" {
		return usagef("batches get needs a batch id (enqueue --batch prints it)")
	}
	if err := a.resolveAPI(&r, "batches get"); err != nil {
		return err
	}
	c, _, err := a.producer(ctx, r)
	if err != nil {
		return err
	}
	b, err := c.GetBatch(ctx, id)
	switch {
	case err == nil:
	case errors.Is(err, client.ErrNotFound):
		return &notFoundError{"no batch " + id + " of this caller's"}
	default:
		return err
	}
	if a.json {
		return a.printJSON(b)
	}
	counts := make([]string, 0, len(b.Counts))
	for _, s := range client.States {
		if n := b.Counts[s]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, s))
		}
	}
	types, err := jobTypes(ctx, c, b.Jobs)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "batch %s: %s, %d jobs (%s)\n", b.BatchID, b.State, len(b.Jobs), strings.Join(counts, ", "))
	return a.printBatchJobs(types, b.Jobs)
}
