package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"
)

// MaxBatch is the most jobs one batch holds.
const MaxBatch = 100

// BatchJob is one job of a batch: its type and arguments and the optional
// parts of a single enqueue. After may name a job id of this caller's or
// an earlier job of the same batch by its index ("#0"); BatchRef makes one.
type BatchJob struct {
	Type            string
	Args            any
	Key             string
	DuplicatePolicy DuplicatePolicy
	DelaySeconds    int
	RunAt           time.Time
	After           string
	AfterPolicy     AfterPolicy
}

// BatchRef is the After that names the batch's job at index (an earlier
// one than the job that waits for it).
func BatchRef(index int) string { return "#" + strconv.Itoa(index) }

// BatchOptions are the optional parts of a batch request. Give the same
// IdempotencyKey to repeat a batch safely: its answer is replayed and its
// jobs' ids are derived from the key, so a retry never makes a second job.
type BatchOptions struct {
	IdempotencyKey string
	CorrelationID  string
}

// BatchJobResult is one job of a batch's answer, in the request's order.
type BatchJobResult struct {
	Index int    `json:"index"`
	JobID string `json:"jobId"`
	State State  `json:"state"`
	// Deduplicated is true when an active job with the job's key already
	// existed: JobID is that job's.
	Deduplicated bool `json:"deduplicated"`
}

// BatchResult is the API's answer to a batch: every job exists (202).
type BatchResult struct {
	BatchID string           `json:"batchId"`
	Jobs    []BatchJobResult `json:"jobs"`
	// Replayed is true when the API answered from its store of responses:
	// a batch with this Idempotency-Key had already been accepted.
	Replayed bool `json:"replayed"`
	// Location is the batch's URL path (/v1/batches/{batchId}).
	Location       string `json:"location,omitempty"`
	StatusCode     int    `json:"statusCode"`
	IdempotencyKey string `json:"idempotencyKey"`
	Attempts       int    `json:"attempts"`
}

// The states of a batch as GET /v1/batches/{batchId} reports them.
const (
	// BatchAccepting: the batch's accept was cut short; it completes by
	// itself within a couple of minutes.
	BatchAccepting = "Accepting"
	// BatchAccepted: every job of the batch exists.
	BatchAccepted = "Accepted"
)

// Batch is a batch as GET /v1/batches/{batchId} reports it: its jobs with
// their states now, and how many are in each state.
type Batch struct {
	BatchID string           `json:"batchId"`
	State   string           `json:"state"`
	Jobs    []BatchJobResult `json:"jobs"`
	Counts  map[State]int    `json:"counts"`
}

// EnqueueBatch asks for 1 to MaxBatch jobs in one request, all or nothing:
// an answer means every job exists and runs as its own request would have;
// a refused batch (a *Problem whose Errors name each job's field as
// jobs[<index>].<field>) made no job.
func (c *Client) EnqueueBatch(ctx context.Context, batch []BatchJob, opts BatchOptions) (*BatchResult, error) {
	if len(batch) == 0 || len(batch) > MaxBatch {
		return nil, fmt.Errorf("client: a batch holds 1-%d jobs, not %d", MaxBatch, len(batch))
	}
	items := make([]json.RawMessage, len(batch))
	for i, j := range batch {
		if !segment.MatchString(j.Type) {
			return nil, fmt.Errorf("client: batch job %d: job type %q: want letters, digits, '.', '_', '~' or '-'", i, j.Type)
		}
		fields, err := jobFields(j.Args, EnqueueOptions{Key: j.Key, DuplicatePolicy: j.DuplicatePolicy, DelaySeconds: j.DelaySeconds,
			RunAt: j.RunAt, After: j.After, AfterPolicy: j.AfterPolicy})
		if err != nil {
			return nil, fmt.Errorf("client: batch job %d (%s): %w", i, j.Type, err)
		}
		if items[i], err = json.Marshal(struct {
			Type string `json:"type"`
			jobBody
		}{j.Type, fields}); err != nil {
			return nil, fmt.Errorf("client: batch job %d (%s): encode: %w", i, j.Type, err)
		}
	}
	body, err := json.Marshal(struct {
		Jobs []json.RawMessage `json:"jobs"`
	}{items})
	if err != nil {
		return nil, fmt.Errorf("client: encode the batch: %w", err)
	}
	idem, err := idempotencyKey(opts.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	r, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/batches", body: body, header: postHeader(idem, opts.CorrelationID)})
	if err != nil {
		return nil, err
	}
	res := &BatchResult{}
	if err := json.Unmarshal(r.body, res); err != nil || res.BatchID == "" || len(res.Jobs) != len(batch) {
		return nil, fmt.Errorf("client: POST /v1/batches: %d answer is not this batch's: %q", r.resp.StatusCode, r.body[:min(len(r.body), maxDetail)])
	}
	res.Replayed = r.resp.Header.Get("Idempotent-Replayed") == "true"
	res.Location = r.resp.Header.Get("Location")
	res.StatusCode, res.IdempotencyKey, res.Attempts = r.resp.StatusCode, idem, r.attempts
	return res, nil
}

// GetBatch reads a batch of this caller's with its jobs' states now; a
// batch of anyone else's is ErrNotFound.
func (c *Client) GetBatch(ctx context.Context, batchID string) (*Batch, error) {
	if _, err := uuid.Parse(batchID); err != nil {
		return nil, fmt.Errorf("client: batch id %q: want a UUID", batchID)
	}
	r, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/batches/" + batchID})
	if err != nil {
		return nil, err
	}
	b := &Batch{}
	if err := json.Unmarshal(r.body, b); err != nil || b.BatchID == "" {
		return nil, fmt.Errorf("client: GET /v1/batches/%s: %d answer is not a batch: %q", batchID, r.resp.StatusCode, r.body[:min(len(r.body), maxDetail)])
	}
	return b, nil
}

// jobBody is the JSON body of a single enqueue, and of a batch's job
// (with its type).
type jobBody struct {
	Args            any             `json:"args"`
	Key             string          `json:"key,omitempty"`
	DelaySeconds    int             `json:"delaySeconds,omitempty"`
	RunAt           string          `json:"runAt,omitempty"`
	DuplicatePolicy DuplicatePolicy `json:"duplicatePolicy,omitempty"`
	After           string          `json:"after,omitempty"`
	AfterPolicy     AfterPolicy     `json:"afterPolicy,omitempty"`
}

// jobFields checks a job's options and makes its body.
func jobFields(args any, opts EnqueueOptions) (jobBody, error) {
	if opts.DelaySeconds < 0 {
		return jobBody{}, fmt.Errorf("DelaySeconds %d is negative", opts.DelaySeconds)
	}
	runAt := ""
	if !opts.RunAt.IsZero() {
		if opts.DelaySeconds != 0 {
			return jobBody{}, errors.New("give RunAt or DelaySeconds, not both")
		}
		runAt = opts.RunAt.UTC().Format(time.RFC3339Nano)
	}
	if args == nil {
		args = struct{}{}
	}
	return jobBody{Args: args, Key: opts.Key, DelaySeconds: opts.DelaySeconds, RunAt: runAt, DuplicatePolicy: opts.DuplicatePolicy,
		After: opts.After, AfterPolicy: opts.AfterPolicy}, nil
}

// idempotencyKey is the request's Idempotency-Key: the one given, checked,
// or a new one.
func idempotencyKey(given string) (string, error) {
	if given == "" {
		return uuid.NewString(), nil
	}
	if !printableKey.MatchString(given) {
		return "", errors.New("client: IdempotencyKey must be 1-255 printable ASCII characters")
	}
	return given, nil
}

// postHeader is the header of a POST that makes jobs.
func postHeader(idem, correlationID string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Idempotency-Key", idem)
	if correlationID != "" {
		h.Set("X-Correlation-Id", correlationID)
	}
	return h
}
