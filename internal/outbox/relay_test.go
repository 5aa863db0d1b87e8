package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// fakeAPI plays the enqueue path: it answers each request as told by the
// request's idempotency key, and records what it was asked.
type fakeAPI struct {
	mu       sync.Mutex
	asked    []enqueue.Request
	answerOf func(enqueue.Request) enqueue.Answer
}

func (f *fakeAPI) EnqueueFor(_ context.Context, r enqueue.Request) enqueue.Answer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r)
	if f.answerOf != nil {
		return f.answerOf(r)
	}
	return enqueue.Answer{Status: http.StatusAccepted, JobID: message.DeriveMessageID(r.Caller, r.IdempotencyKey), State: "Enqueued"}
}

type fakeLetters struct {
	mu   sync.Mutex
	recs map[string]deadletter.Record
	ids  map[string]bool
	err  error
}

func (f *fakeLetters) SaveDelivery(_ context.Context, rec deadletter.Record, id string) (deadletter.Saved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return deadletter.Saved{}, f.err
	}
	if f.ids[id] {
		return deadletter.Saved{Status: f.recs[rec.ID].Status}, nil
	}
	f.ids[id] = true
	f.recs[rec.ID] = rec
	return deadletter.Saved{New: true, Status: rec.Status}, nil
}

func s(v string) events.DynamoDBAttributeValue { return events.NewStringAttribute(v) }

// image is a valid outbox item of a welcome job for userID.
func image(producer, key, userID string) map[string]events.DynamoDBAttributeValue {
	return map[string]events.DynamoDBAttributeValue{
		"pk": s(producer + "#" + key), "producer": s(producer), "idempotencyKey": s(key),
		"type": s("email.welcome.v1"), "args": events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"userId": s(userID)}),
		"expiresAt": events.NewNumberAttribute("1900000000"),
	}
}

var seq int

func record(name string, img map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	seq++
	return events.DynamoDBEventRecord{EventID: fmt.Sprintf("ev-%d", seq), EventName: name, EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{NewImage: img, SequenceNumber: fmt.Sprint(1000 + seq), StreamViewType: "NEW_IMAGE"}}
}

type harness struct {
	api     *fakeAPI
	letters *fakeLetters
	logs    *testkit.Buffer
	metrics *testkit.Buffer
	relay   *outbox.Relay
}

func newHarness() *harness {
	h := &harness{api: &fakeAPI{}, letters: &fakeLetters{recs: map[string]deadletter.Record{}, ids: map[string]bool{}},
		logs: &testkit.Buffer{}, metrics: &testkit.Buffer{}}
	h.relay = &outbox.Relay{Enqueuer: h.api, DeadLetters: h.letters, Logger: obs.NewLogger(h.logs, "debug"), Metrics: engine.NewMetrics(h.metrics, obs.Namespace)}
	return h
}

func (h *harness) handle(t *testing.T, recs ...events.DynamoDBEventRecord) []string {
	t.Helper()
	resp, err := h.relay.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatalf("Handle returned an error (it must report failures per record): %v", err)
	}
	var out []string
	for _, f := range resp.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// INSERT and MODIFY are relayed for caller outbox:<producer> with the
// item's key and its request as the API's body; REMOVE is ignored.
func TestRelayEventNames(t *testing.T) {
	h := newHarness()
	ins, mod, rem := record("INSERT", image("signup", "k-1", "u-1")), record("MODIFY", image("signup", "k-1", "u-1")), record("REMOVE", nil)
	if failed := h.handle(t, ins, mod, rem); len(failed) != 0 {
		t.Fatalf("failures %v; want none", failed)
	}
	if len(h.api.asked) != 2 {
		t.Fatalf("asked %d times; want INSERT and MODIFY relayed, REMOVE ignored", len(h.api.asked))
	}
	for _, r := range h.api.asked {
		if r.Caller != "outbox:signup" || r.IdempotencyKey != "k-1" || r.Type != "email.welcome.v1" || string(r.Body) != `{"args":{"userId":"u-1"}}` {
			t.Fatalf("request %+v (body %s)", r, r.Body)
		}
	}
}

// The relay and the API agree on the job id: the one an item will have is
// the API's derivation for caller outbox:<producer> and the item's key.
func TestItemJobIDIsTheAPIs(t *testing.T) {
	it, err := contract.DecodeOutboxItem(outbox.Values(image("signup", "k-7", "u-7")))
	if err != nil {
		t.Fatal(err)
	}
	if want := message.DeriveMessageID("outbox:signup", "k-7"); it.JobID() != want {
		t.Fatalf("job id %s; want the API's %s", it.JobID(), want)
	}
}

// A poison item among good ones: the good ones are relayed, the bad one is
// a dead letter with its reason, source outbox, counted once.
func TestPoisonItemAmongGoodOnes(t *testing.T) {
	h := newHarness()
	bad := image("signup", "k-bad", "u-2")
	bad["args"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"email": s("a@b.c")})
	h.api.answerOf = func(r enqueue.Request) enqueue.Answer {
		if r.IdempotencyKey == "k-bad" {
			return enqueue.Answer{Status: http.StatusBadRequest, Problem: "validation-error", Detail: "the body is invalid: args.email is not an argument"}
		}
		return enqueue.Answer{Status: http.StatusAccepted}
	}
	badRec := record("INSERT", bad)
	recs := []events.DynamoDBEventRecord{record("INSERT", image("signup", "k-a", "u-a")), badRec, record("INSERT", image("signup", "k-b", "u-b"))}
	for range 2 { // relayed twice: still one dead letter, counted once
		if failed := h.handle(t, recs...); len(failed) != 0 {
			t.Fatalf("failures %v; a bad item never blocks the shard", failed)
		}
	}
	if len(h.api.asked) != 6 {
		t.Fatalf("asked %d; want all three items tried on each run", len(h.api.asked))
	}
	jobID := message.DeriveMessageID("outbox:signup", "k-bad")
	dl, ok := h.letters.recs[outbox.LetterID(jobID)]
	if !ok || dl.SourceQueue != outbox.SourceOutbox || !strings.Contains(dl.Reason, "args.email") || dl.JobID != jobID || dl.Type != "email.welcome.v1" {
		t.Fatalf("dead letter %+v (%v); want the bad item with its reason, source outbox", dl, ok)
	}
	if n := obstest.Count(h.metrics.String(), "email.welcome.v1", engine.DeadLetters); n != 1 {
		t.Fatalf("DeadLetters counted %d times; want 1", n)
	}
}

// The outbox's own rules: each broken one is a dead letter naming it, never
// a call to the API.
func TestItemRules(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(map[string]events.DynamoDBAttributeValue)
		want   string
	}{
		{"producer with capitals", func(m map[string]events.DynamoDBAttributeValue) {
			m["producer"], m["pk"] = s("SignUp"), s("SignUp#k")
		}, "producer"},
		{"producer too long", func(m map[string]events.DynamoDBAttributeValue) {
			p := strings.Repeat("a", 65)
			m["producer"], m["pk"] = s(p), s(p+"#k")
		}, "producer"},
		{"pk not producer#key", func(m map[string]events.DynamoDBAttributeValue) { m["pk"] = s("other#k") }, "pk must be"},
		{"key with a control character", func(m map[string]events.DynamoDBAttributeValue) {
			m["idempotencyKey"], m["pk"] = s("k\n1"), s("signup#k\n1")
		}, "idempotencyKey"},
		{"no type", func(m map[string]events.DynamoDBAttributeValue) { delete(m, "type") }, "type is required"},
		{"args not a map", func(m map[string]events.DynamoDBAttributeValue) { m["args"] = s("u-1") }, "args must be a map"},
		{"an arg not a string", func(m map[string]events.DynamoDBAttributeValue) {
			m["args"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"userId": events.NewNumberAttribute("1")})
		}, "args.userId must be a string"},
		{"delay not a number", func(m map[string]events.DynamoDBAttributeValue) { m["delaySeconds"] = s("10") }, "delaySeconds"},
		{"unknown attribute", func(m map[string]events.DynamoDBAttributeValue) { m["email"] = s("x@y.z") }, "unknown attributes email"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			img := image("signup", "k", "u-1")
			tc.mutate(img)
			if failed := h.handle(t, record("INSERT", img)); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			if len(h.api.asked) != 0 {
				t.Fatal("an item that breaks the outbox's rules reached the API")
			}
			if len(h.letters.recs) != 1 {
				t.Fatalf("%d dead letters; want 1", len(h.letters.recs))
			}
			for _, dl := range h.letters.recs {
				if !strings.Contains(dl.Reason, tc.want) || dl.SourceQueue != outbox.SourceOutbox {
					t.Fatalf("reason %q; want it to name %q", dl.Reason, tc.want)
				}
			}
		})
	}
}

// A transient failure stops the batch at its record: it and the records
// after it are retried, in order; the ones before it are done.
func TestTransientFailureRetriesFromItsRecord(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answer  enqueue.Answer
		saveErr bool
	}{
		{"the queue is down", enqueue.Answer{Status: http.StatusServiceUnavailable, Problem: "unavailable"}, false},
		{"another request holds the key", enqueue.Answer{Status: http.StatusConflict, Problem: "request-in-flight"}, false},
		{"the dead letter cannot be written", enqueue.Answer{Status: http.StatusBadRequest, Problem: "validation-error"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			if tc.saveErr {
				h.letters.err = errors.New("DynamoDB throttled")
			}
			h.api.answerOf = func(r enqueue.Request) enqueue.Answer {
				if r.IdempotencyKey == "k-2" {
					return tc.answer
				}
				return enqueue.Answer{Status: http.StatusAccepted}
			}
			first, second, third := record("INSERT", image("p", "k-1", "u-1")), record("INSERT", image("p", "k-2", "u-2")), record("INSERT", image("p", "k-3", "u-3"))
			failed := h.handle(t, first, second, third)
			if !slices.Equal(failed, []string{second.Change.SequenceNumber}) {
				t.Fatalf("failures %v; want the second record's sequence number", failed)
			}
			if len(h.api.asked) != 2 {
				t.Fatalf("asked %d; want the third left for the retry", len(h.api.asked))
			}
		})
	}
}

// A job refused by its duplicate policy is a final answer: done, not a
// dead letter, not retried.
func TestDuplicatePolicyRefusalIsDone(t *testing.T) {
	h := newHarness()
	h.api.answerOf = func(enqueue.Request) enqueue.Answer {
		return enqueue.Answer{Status: http.StatusConflict, Problem: "duplicate-job-rejected", Detail: "job … is Succeeded and duplicatePolicy RejectAlways rejects a new one"}
	}
	if failed := h.handle(t, record("INSERT", image("p", "k", "u-1"))); len(failed) != 0 || len(h.letters.recs) != 0 {
		t.Fatalf("failures %v, letters %d; want done", failed, len(h.letters.recs))
	}
}

// An item whose natural key an active job already holds dedups onto that
// job, as a request would: done, and the log names the job it went to.
func TestItemDedupedOntoTheActiveJob(t *testing.T) {
	h := newHarness()
	h.api.answerOf = func(enqueue.Request) enqueue.Answer {
		return enqueue.Answer{Status: http.StatusOK, JobID: "0b6d7c3e-0000-4000-8000-000000000001", State: "Enqueued"}
	}
	if failed := h.handle(t, record("INSERT", image("p", "k-2", "u-1"))); len(failed) != 0 || len(h.letters.recs) != 0 {
		t.Fatalf("failures %v, letters %d; want done", failed, len(h.letters.recs))
	}
	if !strings.Contains(h.logs.String(), `"dedupedOnto":"0b6d7c3e-0000-4000-8000-000000000001"`) {
		t.Fatalf("the log does not name the job the item deduplicated onto: %s", h.logs)
	}
}

// A bad rewrite of an item whose job already failed (and has its own dead
// letter under the job id, the one a redrive sends) is a dead letter of its
// own: the job's letter is left as it was, so the job can still be
// redriven.
func TestBadRewriteKeepsTheJobsOwnDeadLetter(t *testing.T) {
	h := newHarness()
	jobID := message.DeriveMessageID("outbox:signup", "k-1")
	own := deadletter.Record{ID: jobID, JobID: jobID, Type: "email.welcome.v1", Body: `{"v":1}`, Reason: "failed on its final attempt (5)",
		SourceQueue: "arn:aws:sqs:us-east-1:000000000000:default", Status: deadletter.StatusDead}
	h.letters.recs[jobID] = own
	h.api.answerOf = func(enqueue.Request) enqueue.Answer {
		return enqueue.Answer{Status: http.StatusBadRequest, Problem: "validation-failed", Detail: "args.userId: looks like an e-mail address"}
	}
	bad := image("signup", "k-1", "someone@example.com")
	if failed := h.handle(t, record("MODIFY", bad)); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if got := h.letters.recs[jobID]; !reflect.DeepEqual(got, own) {
		t.Fatalf("the job's own dead letter became %+v; want it untouched", got)
	}
	if dl, ok := h.letters.recs[outbox.LetterID(jobID)]; !ok || dl.JobID != jobID || dl.SourceQueue != outbox.SourceOutbox {
		t.Fatalf("the rewrite's letter %+v (%v); want one under %s naming the job", dl, ok, outbox.LetterID(jobID))
	}
}

// An item whose job the schedule quota refuses is a dead letter with that
// reason, not a transient failure the stream retries until its limits.
func TestScheduleQuotaIsADeadLetterNotARetry(t *testing.T) {
	h := newHarness()
	h.api.answerOf = func(enqueue.Request) enqueue.Answer {
		return enqueue.Answer{Status: http.StatusServiceUnavailable, Problem: enqueue.ProblemScheduleQuota, Detail: "the schedule quota is reached"}
	}
	if failed := h.handle(t, record("INSERT", image("signup", "k-1", "u-1"))); len(failed) != 0 {
		t.Fatalf("failures %v; want the item dead-lettered, the shard going on", failed)
	}
	dl, ok := h.letters.recs[outbox.LetterID(message.DeriveMessageID("outbox:signup", "k-1"))]
	if !ok || !strings.Contains(dl.Reason, enqueue.ProblemScheduleQuota) {
		t.Fatalf("dead letter %+v (%v); want one naming the quota", dl, ok)
	}
}

// An item after a job that is not there yet (its own item, written in the
// same transaction, not yet relayed) is retried while it is young, and is a
// dead letter once ParentWait has passed; an item whose parent already has
// too many continuations is a dead letter at once. The item carries after
// and afterPolicy to the API's body.
func TestItemAfterAParentNotYetThere(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	parent := message.DeriveMessageID("outbox:signup", "k-parent")
	for _, tc := range []struct {
		name     string
		age      time.Duration
		problem  string
		status   int
		retried  bool
		lettered bool
	}{
		{"young, parent not found", time.Second, enqueue.ProblemNotFound, http.StatusNotFound, true, false},
		{"old, parent not found", outbox.ParentWait + time.Second, enqueue.ProblemNotFound, http.StatusNotFound, false, true},
		{"too many continuations", time.Second, enqueue.ProblemTooManyContinuations, http.StatusConflict, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			h.relay.Now = func() time.Time { return now }
			h.api.answerOf = func(enqueue.Request) enqueue.Answer {
				return enqueue.Answer{Status: tc.status, Problem: tc.problem, Detail: "after: job " + parent + " is not found"}
			}
			img := image("signup", "k-child", "u-2")
			img["after"], img["afterPolicy"] = s(parent), s("OnAnyEnd")
			rec := record("INSERT", img)
			rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: now.Add(-tc.age)}
			failed := h.handle(t, rec)
			if (len(failed) == 1) != tc.retried {
				t.Fatalf("failures %v; want retried %t", failed, tc.retried)
			}
			_, lettered := h.letters.recs[outbox.LetterID(message.DeriveMessageID("outbox:signup", "k-child"))]
			if lettered != tc.lettered {
				t.Fatalf("dead-lettered %t; want %t", lettered, tc.lettered)
			}
			var body map[string]any
			if err := json.Unmarshal(h.api.asked[0].Body, &body); err != nil || body["after"] != parent || body["afterPolicy"] != "OnAnyEnd" {
				t.Fatalf("the API's body %s; want after and afterPolicy", h.api.asked[0].Body)
			}
		})
	}
}

// An item whose expiresAt has passed (its TTL not yet applied: that can
// take days) is gone, as every read here treats an expired item: it is a
// dead letter with the reason, never relayed (its stored decision may be
// gone too, so it could make a second job).
func TestExpiredItemIsADeadLetterNotAJob(t *testing.T) {
	h := newHarness()
	now := time.Unix(1900000000, 0).Add(time.Hour)
	h.relay.Now = func() time.Time { return now }
	if failed := h.handle(t, record("MODIFY", image("signup", "k-old", "u-1"))); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	if len(h.api.asked) != 0 {
		t.Fatalf("an expired item was relayed: %+v", h.api.asked)
	}
	dl, ok := h.letters.recs[outbox.LetterID(message.DeriveMessageID("outbox:signup", "k-old"))]
	if !ok || !strings.Contains(dl.Reason, "expired") {
		t.Fatalf("dead letter %+v (%v); want one saying the item expired", dl, ok)
	}
}
