//go:build integration

package enqueue_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/sweepindex"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// stack is the enqueue handler on moto: real tables and queues, a counted
// client and a settable clock.
type stack struct {
	h       *enqueue.Handler
	queue   *sqsqueue.Sender
	counter *testenv.CallCounter
	sqs     *sqs.Client
	urls    map[string]string
	jobs    *jobs.Store
	rec     *jobs.Recorder
	idem    *idempotency.Store
	markers *dynamostore.Store
	clock   *enginetest.Clock
	// sched is the jobs' scheduler, scheduler its client.
	sched     *schedule.Scheduler
	scheduler *scheduler.Client
	queues    testenv.WorkQueues
	dlq       testenv.Queue
	db        *dynamodb.Client
	jobsTable string
}

func newStack(t *testing.T) *stack {
	t.Helper()
	moto := testenv.Moto(t)
	counter := testenv.NewCallCounter()
	cfg := moto.Config(counter.Option)
	db, sq := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	idemTable := testenv.NewTable(t, db, "idem", idempotency.AttrPK, "")
	jobsTable := jobstest.NewJobsTable(t, db)
	markersTable := testenv.NewTable(t, db, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	wq := testenv.CreateWorkQueues(t, sq, testenv.Name(t, "q")+"-", 0)
	urls := wq.URLs()
	dlq := testenv.NewQueue(t, sq, "dlq", nil)
	sc := scheduler.NewFromConfig(cfg)
	sched := testenv.NewJobScheduler(t, sc, "jobs", wq, dlq.ARN)
	clock := enginetest.NewClock(time.Now().UTC())
	m := dynamostore.New(db, markersTable)
	m.Now = clock.Now
	js := jobs.NewStore(db, jobsTable, m)
	js.Now = clock.Now
	js.Schedules = sched
	js.Index = sweepindex.New(db, jobsTable)
	is := idempotency.NewStore(db, idemTable)
	is.Now = clock.Now
	q := sqsqueue.New(sq, urls, "")
	h := &enqueue.Handler{
		Registry: contract.Registry(), Idempotency: is, Jobs: js, Batches: js, Queue: q, Schedules: sched,
		Logger: obs.NewLogger(io.Discard, "error"), Now: clock.Now,
	}
	counter.Reset()
	rec := jobs.NewRecorder(db, jobsTable)
	rec.Now = clock.Now
	return &stack{h: h, queue: q, counter: counter, sqs: sq, urls: urls, jobs: js, rec: rec, idem: is, markers: m, clock: clock,
		sched: sched, scheduler: sc, queues: wq, dlq: dlq, db: db, jobsTable: jobsTable}
}

// receive returns the messages visible in queue q (up to 10) and their
// envelopes.
func (s *stack) receive(t *testing.T, q message.Queue) ([]sqstypes.Message, []message.Envelope) {
	t.Helper()
	msgs := testenv.Receive(t, s.sqs, s.urls[string(q)], 0)
	envs := make([]message.Envelope, len(msgs))
	for i, m := range msgs {
		env, err := message.Decode([]byte(*m.Body))
		if err != nil {
			t.Fatalf("message body %s: %v", *m.Body, err)
		}
		envs[i] = env
	}
	return msgs, envs
}

var dynamoWrites = []string{"DynamoDB.PutItem", "DynamoDB.UpdateItem", "DynamoDB.DeleteItem", "DynamoDB.TransactWriteItems", "DynamoDB.BatchWriteItem"}
var dynamoReads = []string{"DynamoDB.GetItem", "DynamoDB.BatchGetItem", "DynamoDB.Query", "DynamoDB.Scan", "DynamoDB.TransactGetItems"}

func TestIntegrationEnqueueReplayAndCost(t *testing.T) {
	s := newStack(t)
	req := post(verify, "key-1", verifyBody, withHeader("X-Correlation-Id", "corr-42"))

	resp := call(t, s.h, req)
	b := mustBody(t, resp, http.StatusAccepted)
	writes, sends := s.counter.Sum(dynamoWrites...), s.counter.Get("SQS.SendMessage")
	t.Logf("AWS calls for a new enqueue: %s (DynamoDB writes=%d reads=%d, SendMessage=%d)", s.counter, writes, s.counter.Sum(dynamoReads...), sends)
	if writes != 3 || sends != 1 || s.counter.Sum(dynamoReads...) != 0 {
		t.Fatalf("new enqueue: %s; want 3 DynamoDB writes, 1 SendMessage and no read", s.counter)
	}
	if b.JobID != message.DeriveMessageID(alice, "key-1") || b.State != "Enqueued" {
		t.Fatalf("body %+v", b)
	}

	msgs, envs := s.receive(t, contract.QueueCritical)
	if len(msgs) != 1 {
		t.Fatalf("%d messages; want 1", len(msgs))
	}
	attrs := msgs[0].MessageAttributes
	if envs[0].MessageID != b.JobID || *attrs[sqsqueue.AttrType].StringValue != verify || *attrs[sqsqueue.AttrCorrelationID].StringValue != "corr-42" {
		t.Fatalf("message %+v attrs %v", envs[0], attrs)
	}

	s.counter.Reset()
	again := call(t, s.h, req)
	t.Logf("AWS calls for a replay: %s", s.counter)
	if again.Headers["Idempotent-Replayed"] != "true" || again.Body != resp.Body || again.StatusCode != http.StatusAccepted {
		t.Fatalf("replay: %d %v %s", again.StatusCode, again.Headers, again.Body)
	}
	// The lock's conditional put fails and returns the stored response: one
	// call, nothing written, nothing sent.
	if s.counter.Total() != 1 || s.counter.Get("DynamoDB.PutItem") != 1 || s.counter.Get("SQS.SendMessage") != 0 {
		t.Fatalf("replay: %s; want 1 call (the failed conditional put), no send", s.counter)
	}

	s.counter.Reset()
	g := call(t, s.h, get(b.JobID))
	t.Logf("AWS calls for a GET: %s", s.counter)
	if g.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d %s", g.StatusCode, g.Body)
	}
	if j := decodeAccepted(t, g); j.State != "Enqueued" || j.Key != "partner-verification:u-123" {
		t.Fatalf("GET body %s", g.Body)
	}
}

// concurrently sends n welcome requests for u-1 at once, the i-th under
// Idempotency-Key key(i), and returns their responses.
func (s *stack) concurrently(t *testing.T, n int, key func(i int) string) []events.APIGatewayV2HTTPResponse {
	resps := make([]events.APIGatewayV2HTTPResponse, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { resps[i] = call(t, s.h, post(welcome, key(i), welcomeU1)) })
	}
	wg.Wait()
	return resps
}

func TestIntegrationConcurrentSameKey(t *testing.T) {
	s := newStack(t)
	resps := s.concurrently(t, 20, func(int) string { return "same-key" })
	byStatus := map[int]int{}
	for _, r := range resps {
		byStatus[r.StatusCode]++
		switch r.StatusCode {
		case http.StatusAccepted:
			if b := decodeAccepted(t, r); b.JobID != message.DeriveMessageID(alice, "same-key") {
				t.Fatalf("job id %s", b.JobID)
			}
		case http.StatusConflict:
			if r.Headers["Retry-After"] == "" {
				t.Fatal("409 without Retry-After")
			}
		default:
			t.Fatalf("unexpected %d %s", r.StatusCode, r.Body)
		}
	}
	t.Logf("20 concurrent requests with one key: statuses %v; AWS calls %s", byStatus, s.counter)
	if byStatus[http.StatusAccepted] < 1 {
		t.Fatal("no request got 202")
	}
	if msgs, _ := s.receive(t, contract.QueueDefault); len(msgs) != 1 {
		t.Fatalf("%d SQS messages; want exactly 1", len(msgs))
	}
	if _, err := s.jobs.Get(context.Background(), message.DeriveMessageID(alice, "same-key")); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationConcurrentSameNaturalKey: many keys, one natural key → one job.
func TestIntegrationConcurrentSameNaturalKey(t *testing.T) {
	s := newStack(t)
	resps := s.concurrently(t, 10, func(i int) string { return fmt.Sprintf("key-%d", i) })
	ids := map[string]bool{}
	for _, r := range resps {
		switch r.StatusCode {
		case http.StatusAccepted, http.StatusOK:
			ids[decodeAccepted(t, r).JobID] = true
		case http.StatusConflict:
		default:
			t.Fatalf("unexpected %d %s", r.StatusCode, r.Body)
		}
	}
	if msgs, _ := s.receive(t, contract.QueueDefault); len(msgs) != 1 || len(ids) != 1 {
		t.Fatalf("%d messages, job ids %v; want one job", len(msgs), ids)
	}
}

func TestIntegrationMismatchAndInFlight(t *testing.T) {
	s := newStack(t)
	mustBody(t, call(t, s.h, post(welcome, "k1", welcomeU1)), http.StatusAccepted)
	checkProblem(t, call(t, s.h, post(welcome, "k1", `{"args":{"userId":"u-2"}}`)), http.StatusUnprocessableEntity)

	// A request holding k2's lock (another Lambda instance, in flight).
	req := post(welcome, "k2", `{"args":{"userId":"u-3"}}`)
	if r, err := s.idem.Begin(context.Background(), alice, "k2", fingerprintOf(t, welcome, []byte(req.Body))); err != nil || r.Outcome != idempotency.Acquired {
		t.Fatalf("begin: %+v %v", r, err)
	}
	resp := call(t, s.h, req)
	checkProblem(t, resp, http.StatusConflict)
	if resp.Headers["Retry-After"] != "30" {
		t.Fatalf("Retry-After %q", resp.Headers["Retry-After"])
	}
}

func TestIntegrationCallerIsolation(t *testing.T) {
	s := newStack(t)
	a := mustBody(t, call(t, s.h, post(welcome, "shared", welcomeU1)), http.StatusAccepted)
	b := mustBody(t, call(t, s.h, post(welcome, "shared", welcomeU1, asCaller(bob))), http.StatusAccepted)
	if a.JobID == b.JobID || b.Deduplicated {
		t.Fatalf("bob's job %+v; alice's %+v", b, a)
	}
	checkProblem(t, call(t, s.h, get(a.JobID, asCaller(bob))), http.StatusNotFound)
	checkProblem(t, call(t, s.h, get(b.JobID)), http.StatusNotFound)
	if r := call(t, s.h, get(b.JobID, asCaller(bob))); r.StatusCode != http.StatusOK {
		t.Fatalf("bob's own GET: %d", r.StatusCode)
	}
}

// TestIntegrationDuplicatePolicyMatrix: 3 policies × the state of the key's
// last job.
func TestIntegrationDuplicatePolicyMatrix(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	setups := []struct {
		state jobs.State
		delay int
		apply func(t *testing.T, job jobs.Job)
	}{
		{jobs.StateEnqueued, 0, func(*testing.T, jobs.Job) {}},
		{jobs.StateProcessing, 0, func(t *testing.T, j jobs.Job) {
			if _, err := s.markers.Lease(ctx, j.MarkerKey(), engine.Mark{Owner: "worker-1", Until: s.clock.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}},
		{jobs.StateScheduled, 900, func(*testing.T, jobs.Job) {}},
		{jobs.StateSucceeded, 0, func(t *testing.T, j jobs.Job) {
			if _, err := s.markers.Claim(ctx, j.MarkerKey(), engine.Mark{}); err != nil {
				t.Fatal(err)
			}
		}},
		{jobs.StateFailed, 0, func(t *testing.T, j jobs.Job) {
			if err := s.rec.MarkFailed(ctx, j.ID, jobs.Failure{Class: "max-receives"}); err != nil {
				t.Fatal(err)
			}
		}},
		{jobs.StateExpired, 0, func(*testing.T, jobs.Job) { s.clock.Advance(jobs.QueueRetention + time.Hour) }},
	}
	want := map[contract.DuplicatePolicy]map[jobs.State]int{
		contract.AllowAfterFailed: {jobs.StateSucceeded: 202, jobs.StateFailed: 202, jobs.StateExpired: 202},
		contract.RejectIfFailed:   {jobs.StateSucceeded: 202, jobs.StateFailed: 409, jobs.StateExpired: 202},
		contract.RejectAlways:     {jobs.StateSucceeded: 409, jobs.StateFailed: 409, jobs.StateExpired: 409},
	}
	n := 0
	for _, policy := range contract.Policies {
		for _, setup := range setups {
			n++
			t.Run(string(policy)+"/"+string(setup.state), func(t *testing.T) {
				user := fmt.Sprintf("u-matrix-%d", n)
				first := fmt.Sprintf(`{"args":{"userId":%q},"delaySeconds":%d}`, user, setup.delay)
				a := mustBody(t, call(t, s.h, post(welcome, user+"-first", first)), http.StatusAccepted)
				setup.apply(t, jobs.Job{ID: a.JobID, Type: welcome})
				if j, err := s.jobs.Get(ctx, a.JobID); err != nil || j.State != setup.state {
					t.Fatalf("first job state %s, %v; want %s", j.State, err, setup.state)
				}
				second := `{"args":{"userId":"` + user + `"},"duplicatePolicy":"` + string(policy) + `"}`
				resp := call(t, s.h, post(welcome, user+"-second", second))
				status, ok := want[policy][setup.state]
				if !ok {
					status = http.StatusOK // an active job: deduplicated
				}
				switch status {
				case http.StatusOK:
					if b := mustBody(t, resp, http.StatusOK); b.JobID != a.JobID || !b.Deduplicated {
						t.Fatalf("want dedup of %s: %+v", a.JobID, b)
					}
				case http.StatusAccepted:
					if b := mustBody(t, resp, http.StatusAccepted); b.JobID == a.JobID || b.Deduplicated {
						t.Fatalf("want a new job: %+v", b)
					}
				case http.StatusConflict:
					if p := checkProblem(t, resp, http.StatusConflict); p.ExistingJobID != a.JobID || p.Policy != string(policy) {
						t.Fatalf("problem %+v", p)
					}
				}
			})
		}
	}
}

// crashingQueue sends, then dies before the handler can store anything:
// the request's goroutine ends there, as its process would (a panic is
// not a crash: it is recovered, and its key released).
type crashingQueue struct{ enqueue.Queue }

func (q crashingQueue) Send(ctx context.Context, m sqsqueue.Message) error {
	if err := q.Queue.Send(ctx, m); err != nil {
		return err
	}
	runtime.Goexit()
	return nil
}

func TestIntegrationCrashBetweenSendAndStore(t *testing.T) {
	s := newStack(t)
	req := post(welcome, "crash-key", welcomeU1)
	s.h.Queue = crashingQueue{s.queue}
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(t, s.h, req) // the process dies between the send and the store: no answer
	}()
	<-done
	s.h.Queue = s.queue
	// The crashed request still holds its lock...
	checkProblem(t, call(t, s.h, req), http.StatusConflict)
	// ...until it expires; then the retry completes the same job.
	s.clock.Advance(idempotency.DefaultLockTimeout + time.Second)
	b := mustBody(t, call(t, s.h, req), http.StatusAccepted)
	_, envs := s.receive(t, contract.QueueDefault)
	if len(envs) != 2 || envs[0].MessageID != b.JobID || envs[1].MessageID != b.JobID {
		t.Fatalf("messages %+v; want two with message id %s", envs, b.JobID)
	}
	if j, err := s.jobs.Get(context.Background(), b.JobID); err != nil || j.State != jobs.StateEnqueued {
		t.Fatalf("job %+v, %v", j, err)
	}
}

func TestIntegrationSQSDown(t *testing.T) {
	s := newStack(t)
	down := moto.Config("http://127.0.0.1:1", testenv.Region)
	s.h.Queue = sqsqueue.New(sqs.NewFromConfig(down), s.urls, "")
	req := post(welcome, "sqs-down", welcomeU1)
	checkProblem(t, call(t, s.h, req), http.StatusServiceUnavailable)
	if j, err := s.jobs.Get(context.Background(), message.DeriveMessageID(alice, "sqs-down")); err != nil || j.State != jobs.StatePending {
		t.Fatalf("job after failed send: %+v, %v; want Pending", j, err)
	}
	s.h.Queue = s.queue
	b := mustBody(t, call(t, s.h, req), http.StatusAccepted)
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 1 || envs[0].MessageID != b.JobID {
		t.Fatalf("messages %+v", envs)
	}
}

func TestIntegrationMalformedCatalog(t *testing.T) {
	s := newStack(t)
	for _, c := range malformedCatalog() {
		t.Run(c.name, func(t *testing.T) { checkProblem(t, call(t, s.h, c.req), c.status) })
	}
	t.Logf("AWS calls for %d malformed requests: %s", len(malformedCatalog()), s.counter)
	if w := s.counter.Sum(dynamoWrites...); w != 0 || s.counter.Get("SQS.SendMessage") != 0 {
		t.Fatalf("malformed requests wrote: %s", s.counter)
	}
}

// TestIntegrationKeyReusedForAnotherJob: a key whose request was never
// stored (its send failed) or whose record expired, sent again with another
// body, is a 422 — never the other request's job.
func TestIntegrationKeyReusedForAnotherJob(t *testing.T) {
	s := newStack(t)
	down := moto.Config("http://127.0.0.1:1", testenv.Region)
	s.h.Queue = sqsqueue.New(sqs.NewFromConfig(down), s.urls, "")
	checkProblem(t, call(t, s.h, post(welcome, "reused", welcomeU1)), http.StatusServiceUnavailable)
	s.h.Queue = s.queue
	checkProblem(t, call(t, s.h, post(welcome, "reused", `{"args":{"userId":"u-2"}}`)), http.StatusUnprocessableEntity)
	checkProblem(t, call(t, s.h, post(contract.PasswordReset.Name, "reused", `{"args":{"userId":"u-1","countryCode":"BD"}}`)), http.StatusUnprocessableEntity)
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 0 {
		t.Fatalf("the other request's job was sent: %+v", envs)
	}
	// The first request, retried as its 503 said, still goes through.
	b := mustBody(t, call(t, s.h, post(welcome, "reused", welcomeU1)), http.StatusAccepted)
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 1 || envs[0].MessageID != b.JobID || envs[0].Args["userId"] != "u-1" {
		t.Fatalf("messages %+v", envs)
	}
}
