package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/client"
)

const batchID = "4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f"

var batchAccepted = answer{status: 202, header: map[string]string{"Content-Type": "application/json", "Location": "/v1/batches/" + batchID},
	body: `{"batchId":"` + batchID + `","jobs":[{"index":0,"jobId":"j-0","state":"Enqueued","deduplicated":false},` +
		`{"index":1,"jobId":"j-1","state":"AwaitingContinuation","deduplicated":false}]}`}

// A batch goes out as {"jobs":[…]}, each job its type and the fields of a
// single enqueue, under one Idempotency-Key; the answer is read in order.
func TestEnqueueBatchSendsEveryJob(t *testing.T) {
	f := newFakeAPI(t, answer{status: 503, header: problemJSON, body: problem(503, "unavailable", "")}, batchAccepted)
	at := time.Date(2026, 12, 10, 9, 0, 0, 0, time.UTC)
	res, err := fast(t, f).EnqueueBatch(context.Background(), []client.BatchJob{
		{Type: client.TypeWelcome, Args: client.WelcomeArgs{UserID: "u-1"}, Key: "k-0", RunAt: at},
		{Type: client.TypePasswordReset, Args: client.PasswordResetArgs{UserID: "u-1", CountryCode: "DE"}, After: client.BatchRef(0), AfterPolicy: client.OnAnyEnd},
	}, client.BatchOptions{IdempotencyKey: "idem-b", CorrelationID: "c-b"})
	if err != nil {
		t.Fatal(err)
	}
	reqs, bodies := f.received()
	if len(reqs) != 2 || bodies[0] != bodies[1] || reqs[0].Header.Get("Idempotency-Key") != "idem-b" || reqs[1].Header.Get("Idempotency-Key") != "idem-b" {
		t.Fatalf("%d requests %v; want the same batch twice under idem-b (a retry of a 503)", len(reqs), bodies)
	}
	r := reqs[0]
	if r.Method != "POST" || r.URL.Path != "/v1/batches" || r.Header.Get("X-Correlation-Id") != "c-b" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %s %v", r.Method, r.URL, r.Header)
	}
	want := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"},"key":"k-0","runAt":"2026-12-10T09:00:00Z"},` +
		`{"type":"email.password-reset.v1","args":{"userId":"u-1","countryCode":"DE"},"after":"#0","afterPolicy":"OnAnyEnd"}]}`
	if bodies[0] != want {
		t.Fatalf("body %s\nwant %s", bodies[0], want)
	}
	if res.BatchID != batchID || len(res.Jobs) != 2 || res.Jobs[1].JobID != "j-1" || res.Jobs[1].State != client.StateAwaitingContinuation ||
		res.StatusCode != 202 || res.Attempts != 2 || res.Location != "/v1/batches/"+batchID || res.IdempotencyKey != "idem-b" {
		t.Fatalf("result %+v", res)
	}
}

// A refused batch is a *Problem naming each job's field; nothing is
// retried.
func TestEnqueueBatchRefused(t *testing.T) {
	f := newFakeAPI(t, answer{status: 400, header: problemJSON,
		body: problem(400, "validation-error", `,"errors":[{"field":"jobs[1].after","reason":"must name an earlier job"}]`)})
	_, err := fast(t, f).EnqueueBatch(context.Background(), []client.BatchJob{{Type: client.TypeWelcome}, {Type: client.TypeWelcome, After: "#1"}}, client.BatchOptions{})
	var p *client.Problem
	if !errors.As(err, &p) || p.Status != 400 || len(p.Errors) != 1 || p.Errors[0].Field != "jobs[1].after" {
		t.Fatalf("error %v; want the validation problem with jobs[1].after", err)
	}
	if reqs, _ := f.received(); len(reqs) != 1 {
		t.Fatalf("%d requests; a 400 is final", len(reqs))
	}
}

func TestEnqueueBatchBadInput(t *testing.T) {
	f := newFakeAPI(t, batchAccepted)
	c := fast(t, f)
	ctx := context.Background()
	for name, batch := range map[string][]client.BatchJob{
		"empty":             nil,
		"101 jobs":          make([]client.BatchJob, client.MaxBatch+1),
		"a bad type":        {{Type: "email/welcome"}},
		"negative delay":    {{Type: client.TypeWelcome, DelaySeconds: -1}},
		"runAt and a delay": {{Type: client.TypeWelcome, DelaySeconds: 5, RunAt: time.Now()}},
	} {
		if _, err := c.EnqueueBatch(ctx, batch, client.BatchOptions{}); err == nil || !strings.HasPrefix(err.Error(), "client: ") {
			t.Errorf("%s: error %v; want the client's", name, err)
		}
	}
	if _, err := c.EnqueueBatch(ctx, []client.BatchJob{{Type: client.TypeWelcome}}, client.BatchOptions{IdempotencyKey: "é"}); err == nil {
		t.Error("a non-ASCII Idempotency-Key was sent")
	}
	if _, err := c.GetBatch(ctx, "../jobs"); err == nil {
		t.Error("GetBatch took a batch id that is no UUID")
	}
	if reqs, _ := f.received(); len(reqs) != 0 {
		t.Fatalf("%d requests sent for bad input", len(reqs))
	}
	// An answer with another number of jobs is not this batch's.
	if _, err := c.EnqueueBatch(ctx, []client.BatchJob{{Type: client.TypeWelcome}}, client.BatchOptions{}); err == nil {
		t.Fatal("a 2-job answer to a 1-job batch was taken")
	}
}

func TestGetBatch(t *testing.T) {
	f := newFakeAPI(t, answer{status: 200, header: map[string]string{"Content-Type": "application/json"},
		body: `{"batchId":"` + batchID + `","state":"Accepted","jobs":[{"index":0,"jobId":"j-0","state":"Succeeded","deduplicated":true}],"counts":{"Succeeded":1}}`},
		answer{status: 404, header: problemJSON, body: problem(404, "not-found", "")})
	c := fast(t, f)
	b, err := c.GetBatch(context.Background(), batchID)
	if err != nil || b.State != client.BatchAccepted || b.Counts[client.StateSucceeded] != 1 || !b.Jobs[0].Deduplicated {
		t.Fatalf("batch %+v, %v", b, err)
	}
	if reqs, _ := f.received(); reqs[0].Method != "GET" || reqs[0].URL.Path != "/v1/batches/"+batchID {
		t.Fatalf("request %s %s", reqs[0].Method, reqs[0].URL)
	}
	if _, err := c.GetBatch(context.Background(), batchID); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("error %v; want ErrNotFound", err)
	}
}
