//go:build integration

package enqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// batchBody is the JSON of a batch answer.
type batchBody struct {
	BatchID string `json:"batchId"`
	State   string `json:"state"`
	Jobs    []struct {
		Index        int    `json:"index"`
		JobID        string `json:"jobId"`
		State        string `json:"state"`
		Deduplicated bool   `json:"deduplicated"`
	} `json:"jobs"`
	Counts map[string]int `json:"counts"`
}

func decodeBatch(t *testing.T, resp events.APIGatewayV2HTTPResponse, status int) batchBody {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d; want %d: %s", resp.StatusCode, status, resp.Body)
	}
	var b batchBody
	if err := json.Unmarshal([]byte(resp.Body), &b); err != nil {
		t.Fatalf("%s: %v", resp.Body, err)
	}
	return b
}

// welcomes is a batch body of n welcome mails for users u-<first>…, the
// i-th after "#<i-1>" when chained.
func welcomes(first, n int, chained bool) string {
	parts := make([]string, n)
	for i := range n {
		after := ""
		if chained && i > 0 {
			after = fmt.Sprintf(`,"after":"#%d"`, i-1)
		}
		parts[i] = fmt.Sprintf(`{"type":%q,"args":{"userId":"u-%d"}%s}`, welcome, first+i, after)
	}
	return `{"jobs":[` + strings.Join(parts, ",") + `]}`
}

// A batch of 100 is accepted in one request: every job exists with the id
// derived from the batch's key and its index, each message sent once; a job
// whose key an active job holds is answered as that job, deduplicated; the
// retry replays; GET counts the states. A batched job costs fewer DynamoDB
// writes than a single enqueue's three.
func TestIntegrationBatchAcceptsEveryJob(t *testing.T) {
	s := newStack(t)
	existing := mustBody(t, call(t, s.h, post(welcome, "single", `{"args":{"userId":"u-0"}}`)), http.StatusAccepted)
	s.receive(t, contract.QueueDefault)
	s.counter.Reset()
	req := postBatch("b-1", welcomes(0, 100, false))
	resp := call(t, s.h, req)
	b := decodeBatch(t, resp, http.StatusAccepted)
	writes := s.counter.Sum(dynamoWrites...)
	t.Logf("AWS calls for a batch of 100: %s (%d DynamoDB writes, %.2f a job)", s.counter, writes, float64(writes)/100)
	if float64(writes)/100 > 0.2 {
		t.Errorf("%d DynamoDB writes for 100 jobs; want at most 0.2 a job (reservations 50 to a transaction, promotions with the answer), far under a single enqueue's 3", writes)
	}
	if b.BatchID != enqueue.BatchID(alice, "b-1") || len(b.Jobs) != 100 {
		t.Fatalf("answer %s", resp.Body)
	}
	sent := map[string]int{}
	for {
		_, envs := s.receive(t, contract.QueueDefault)
		if len(envs) == 0 {
			break
		}
		for _, e := range envs {
			sent[e.MessageID]++ // received, it stays hidden for the queue's visibility timeout
		}
	}
	for i, j := range b.Jobs {
		switch {
		case i == 0 && (j.JobID != existing.JobID || !j.Deduplicated):
			t.Fatalf("job 0 %+v; want the active welcome of u-0, deduplicated", j)
		case i > 0 && (j.JobID != enqueue.BatchJobID(alice, "b-1", i) || j.State != "Enqueued" || sent[j.JobID] != 1):
			t.Fatalf("job %d %+v, sent %d; want its derived id, Enqueued, sent once", i, j, sent[j.JobID])
		}
	}
	if len(sent) != 99 {
		t.Fatalf("%d messages; want 99 (one deduplicated)", len(sent))
	}
	if again := call(t, s.h, req); again.Headers["Idempotent-Replayed"] != "true" || again.Body != resp.Body {
		t.Fatalf("retry: %d %v", again.StatusCode, again.Headers)
	}
	g := decodeBatch(t, call(t, s.h, request(http.MethodGet, "/v1/batches/"+b.BatchID, "")), http.StatusOK)
	if g.State != "Accepted" || g.Counts["Enqueued"] != 100 || len(g.Jobs) != 100 {
		t.Fatalf("GET: %+v", g.Counts)
	}
	if r := call(t, s.h, request(http.MethodGet, "/v1/batches/"+b.BatchID, "", asCaller(bob))); r.StatusCode != http.StatusNotFound {
		t.Fatalf("another caller's GET: %d", r.StatusCode)
	}
}

// All or nothing: a batch with any bad job is refused with every problem
// named by its index, and leaves no job and no message; a job refused by
// its duplicate policy, or naming a parent the caller cannot see, refuses
// the batch as well.
func TestIntegrationBatchIsAllOrNothing(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	bad := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"}},{"type":"email.welcom.v1","args":{}},` +
		`{"type":"email.welcome.v1","args":{"userId":"a@b.c"}},{"type":"email.welcome.v1","args":{"userId":"u-4"},"after":"#3"}]}`
	p := checkProblem(t, call(t, s.h, postBatch("bad", bad)), http.StatusBadRequest)
	var fields []string
	for _, f := range p.Errors {
		fields = append(fields, f.Field)
	}
	for _, want := range []string{"jobs[1].type", "jobs[2].args.userId", "jobs[3].after"} {
		if !strings.Contains(strings.Join(fields, " "), want) {
			t.Fatalf("problems %v; want %s named", fields, want)
		}
	}
	for name, body := range map[string]string{
		"empty":      `{"jobs":[]}`,
		"101 jobs":   welcomes(0, 101, false),
		"not a list": `{"jobs":{}}`,
		"extra":      `{"jobs":[],"priority":1}`,
	} {
		checkProblem(t, call(t, s.h, postBatch("bad-"+name, body)), http.StatusBadRequest)
	}
	// A duplicate policy that refuses job 1 refuses the whole batch.
	done := mustBody(t, call(t, s.h, post(welcome, "done", `{"args":{"userId":"u-9"}}`)), http.StatusAccepted)
	if _, err := s.markers.Claim(ctx, jobs.Job{ID: done.JobID, Type: welcome}.MarkerKey(), engine.Mark{Owner: "w", Expires: engine.SettledUntil(s.clock.Now(), s.clock.Now(), engine.DefaultRetention)}); err != nil {
		t.Fatal(err)
	}
	s.receive(t, contract.QueueDefault)
	refused := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-8"}},{"type":"email.welcome.v1","args":{"userId":"u-9"},"duplicatePolicy":"RejectAlways"}]}`
	if p := checkProblem(t, call(t, s.h, postBatch("refused", refused)), http.StatusConflict); !strings.Contains(p.Detail, "jobs[1]") {
		t.Fatalf("problem %+v; want jobs[1] named", p)
	}
	orphan := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-7"}},{"type":"email.welcome.v1","args":{"userId":"u-6"},"after":"5f6b7c1e-8d4e-4a3b-9c2d-1e0f9a8b7c6d"}]}`
	checkProblem(t, call(t, s.h, postBatch("orphan", orphan)), http.StatusNotFound)
	for _, key := range []string{"bad", "refused", "orphan"} {
		for i := range 4 {
			if _, err := s.jobs.Get(ctx, enqueue.BatchJobID(alice, key, i)); err == nil {
				t.Fatalf("a refused batch %s left job %d", key, i)
			}
		}
		if _, err := s.jobs.GetBatch(ctx, enqueue.BatchID(alice, key)); err == nil {
			t.Fatalf("a refused batch %s left its item", key)
		}
	}
	if msgs, _ := s.receive(t, contract.QueueDefault); len(msgs) != 0 {
		t.Fatalf("a refused batch sent %d messages", len(msgs))
	}
}

// A batch whose accept stopped after its item was written completes by
// itself: its finisher (sent first, with a delay, on the chain queue)
// reserves and sends every job, and the request's retry then answers the
// batch as accepted, with the same job ids and no second message. A
// chained job (#k) waits for the job before it.
func TestIntegrationBatchCutShortIsFinished(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	body := welcomes(10, 3, true)
	s.h.Queue = &failAfter{q: s.queue, n: 1} // the finisher; then SQS fails, job 0 first
	if r := call(t, s.h, postBatch("cut", body)); r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("accept with SQS failing: %d %s", r.StatusCode, r.Body)
	}
	q := s.h.Queue.(*failAfter)
	s.h.Queue = s.queue
	if len(q.sent) != 1 || q.sent[0].Queue != string(contract.QueueChain) || q.sent[0].Delay != enqueue.FinishDelay {
		t.Fatalf("sent %+v; want the batch's finisher on the chain queue, delayed", q.sent)
	}
	fin, err := message.Decode([]byte(q.sent[0].Body))
	if err != nil || fin.Type != contract.BatchFinish.Name || fin.Args["batchId"] != enqueue.BatchID(alice, "cut") {
		t.Fatalf("finisher %+v %v", fin, err)
	}
	if err := s.h.FinishBatch(ctx, fin.Args["batchId"]); err != nil {
		t.Fatal(err)
	}
	b, err := s.jobs.GetBatch(ctx, enqueue.BatchID(alice, "cut"))
	if err != nil || b.State != jobs.BatchAccepted {
		t.Fatalf("after its finisher the batch is %q %v; want Accepted", b.State, err)
	}
	_, sent := s.receive(t, contract.QueueDefault)
	if len(sent) != 1 || sent[0].MessageID != enqueue.BatchJobID(alice, "cut", 0) {
		t.Fatalf("sent %v; want job 0 once (the others wait for the one before)", sent)
	}
	for i, want := range []jobs.State{jobs.StateEnqueued, jobs.StateAwaitingContinuation, jobs.StateAwaitingContinuation} {
		if j, err := s.jobs.Get(ctx, enqueue.BatchJobID(alice, "cut", i)); err != nil || j.State != want {
			t.Fatalf("job %d: %v %v; want %s", i, j.State, err, want)
		}
	}
	s.clock.Advance(jobs.DefaultPendingTimeout + 1) // the dead request's lock is over
	retry := decodeBatch(t, call(t, s.h, postBatch("cut", body)), http.StatusAccepted)
	if len(retry.Jobs) != 3 || retry.Jobs[2].State != string(jobs.StateAwaitingContinuation) {
		t.Fatalf("the retry answered %+v", retry.Jobs)
	}
	if msgs, _ := s.receive(t, contract.QueueDefault); len(msgs) != 0 {
		t.Fatalf("the retry sent %d more messages", len(msgs))
	}
	// A finisher of a batch that was never written, or is accepted, does
	// nothing.
	if err := s.h.FinishBatch(ctx, enqueue.BatchID(alice, "never")); err != nil {
		t.Fatal(err)
	}
}

// failAfter passes n sends to q (and keeps them), then fails every one.
type failAfter struct {
	mu   sync.Mutex
	q    enqueue.Queue
	n    int
	sent []sqsqueue.Message
}

func (f *failAfter) Send(ctx context.Context, m sqsqueue.Message) error {
	f.mu.Lock()
	f.n--
	n := f.n
	f.mu.Unlock()
	if n < 0 {
		return errors.New("SQS down")
	}
	f.mu.Lock()
	f.sent = append(f.sent, m)
	f.mu.Unlock()
	return f.q.Send(ctx, m)
}

// Two jobs of one batch with one natural key are one job: one is its own,
// the other deduplicated onto it, as two requests would be; GET reads it
// once and counts it twice.
func TestIntegrationBatchWithOneKeyTwice(t *testing.T) {
	s := newStack(t)
	b := decodeBatch(t, call(t, s.h, postBatch("twice", welcomes(5, 1, false)[:len(welcomes(5, 1, false))-2]+`,{"type":"email.welcome.v1","args":{"userId":"u-5"}}]}`)), http.StatusAccepted)
	if len(b.Jobs) != 2 || b.Jobs[0].JobID != b.Jobs[1].JobID || b.Jobs[0].Deduplicated == b.Jobs[1].Deduplicated {
		t.Fatalf("answer %+v; want one job, one of the two deduplicated onto it", b.Jobs)
	}
	if msgs, _ := s.receive(t, contract.QueueDefault); len(msgs) != 1 {
		t.Fatalf("%d messages; want one", len(msgs))
	}
	g := decodeBatch(t, call(t, s.h, request(http.MethodGet, "/v1/batches/"+b.BatchID, "")), http.StatusOK)
	if len(g.Jobs) != 2 || g.Counts["Enqueued"] != 2 {
		t.Fatalf("GET: %+v %v", g.Jobs, g.Counts)
	}
}
