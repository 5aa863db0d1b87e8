package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// fakeRecords is the dead-letters table in memory, with the same
// once-per-delivery rule as the DynamoDB store.
type fakeRecords struct {
	mu   sync.Mutex
	recs map[string]deadletter.Record
	err  error
}

func (f *fakeRecords) SaveDelivery(_ context.Context, rec deadletter.Record, sqsID string) (deadletter.Saved, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return deadletter.Saved{}, f.err
	}
	old, ok := f.recs[rec.ID]
	if ok && slices.Contains(old.SQSMessageIDs, sqsID) {
		return deadletter.Saved{Status: old.Status}, nil
	}
	rec.SQSMessageIDs = append(old.SQSMessageIDs, sqsID)
	rec.Occurrences = old.Occurrences + 1
	f.recs[rec.ID] = rec
	return deadletter.Saved{New: true, Status: rec.Status}, nil
}

// setStatus plays an operator's redrive or drop of a stored letter.
func (f *fakeRecords) setStatus(id string, s deadletter.Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.recs[id]
	r.Status = s
	f.recs[id] = r
}

// failedClass is the error class a job was marked Failed with, "" if none.
func (h *harness) failedClass(jobID string) string {
	f, _ := h.jobs.Failure(jobID)
	return f.Class
}

type peekFails struct{ *memstore.Store }

func (peekFails) PeekBatch(context.Context, []engine.Key) (map[engine.Key]engine.Record, error) {
	return nil, errors.New("throttled")
}

type harness struct {
	records *fakeRecords
	jobs    *testkit.Jobs
	markers *memstore.Store
	logs    *testkit.Buffer
	metrics *testkit.Buffer
	c       *deadletter.Consumer
}

func newHarness(t *testing.T, mutate func(*deadletter.Config)) *harness {
	t.Helper()
	h := &harness{
		records: &fakeRecords{recs: map[string]deadletter.Record{}}, jobs: &testkit.Jobs{},
		markers: memstore.New(), logs: &testkit.Buffer{}, metrics: &testkit.Buffer{},
	}
	h.c = testkit.Build(t, deadletter.Config{
		Records: h.records, Markers: h.markers, Jobs: h.jobs, Registry: contract.Registry(),
		Logger: obs.NewLogger(h.logs, "debug"), Metrics: engine.NewMetrics(h.metrics, obs.Namespace),
	}, mutate, deadletter.NewConsumer)
	return h
}

func (h *harness) run(t *testing.T, msgs ...events.SQSMessage) []string {
	t.Helper()
	return testkit.Run(t, context.Background(), h.c, msgs...)
}

func envelope(jobType string) message.Envelope {
	return testkit.Envelope(jobType, map[string]string{"userId": "u-1"})
}

// moved is a message the queue's redrive policy moved: no reason attribute,
// its receive count carried over plus this DLQ delivery.
func moved(t *testing.T, env message.Envelope, receiveCount int) events.SQSMessage {
	t.Helper()
	return testkit.Record(t, env, receiveCount)
}

// sent is a message a worker sent straight to the DLQ with its reason.
func sent(body, reason string) events.SQSMessage {
	msg := testkit.RawRecord(body, 1)
	msg.MessageAttributes = map[string]events.SQSMessageAttribute{
		sqsqueue.AttrReason:       {StringValue: aws.String(reason), DataType: "String"},
		sqsqueue.AttrReceiveCount: {StringValue: aws.String("1"), DataType: "Number"},
		sqsqueue.AttrSourceQueue:  {StringValue: aws.String("arn:aws:sqs:us-east-1:123456789012:critical"), DataType: "String"},
	}
	return msg
}

func TestConsumerRecordsEachKind(t *testing.T) {
	welcome := envelope(contract.Welcome.Name)
	welcomeBody, _ := welcome.Encode()
	unknown := envelope("email.nope.v1")
	for _, tc := range []struct {
		name                 string
		msg                  func(t *testing.T) events.SQSMessage
		wantID, wantType     string
		wantReason, wantBody string
		wantSource           string
		wantCount            int
		wantJobFailed        string // error class; "" for no job mark
	}{
		{
			name: "moved by redrive", msg: func(t *testing.T) events.SQSMessage { return moved(t, welcome, 6) },
			wantID: welcome.MessageID, wantType: contract.Welcome.Name, wantBody: string(welcomeBody),
			wantReason: "exceeded maxReceiveCount (5 receives)", wantSource: "default", wantCount: 5, wantJobFailed: deadletter.ClassMaxReceives,
		},
		{
			name: "poison, not JSON", msg: func(*testing.T) events.SQSMessage {
				return sent("hello, not json", "invalid: body: invalid JSON at offset 1")
			},
			wantType: deadletter.UnknownType, wantBody: "hello, not json", wantReason: "invalid JSON",
			wantSource: "arn:aws:sqs:us-east-1:123456789012:critical", wantCount: 1,
		},
		{
			name: "unknown type", msg: func(t *testing.T) events.SQSMessage {
				m := moved(t, unknown, 1)
				m.MessageAttributes = sent("", "unknown job type").MessageAttributes
				return m
			},
			wantID: unknown.MessageID, wantType: deadletter.UnknownType, wantReason: "unknown job type",
			wantSource: "arn:aws:sqs", wantCount: 1, wantJobFailed: deadletter.ClassPermanent,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			msg := tc.msg(t)
			if f := h.run(t, msg); len(f) != 0 {
				t.Fatalf("failures %v", f)
			}
			wantID := tc.wantID
			if wantID == "" {
				wantID = msg.MessageId // not an envelope: keyed by the SQS id
			}
			rec, ok := h.records.recs[wantID]
			if !ok {
				t.Fatalf("no record under %s; have %v", wantID, h.records.recs)
			}
			switch {
			case rec.Type != tc.wantType:
				t.Errorf("type %q; want %q", rec.Type, tc.wantType)
			case !strings.Contains(rec.Reason, tc.wantReason):
				t.Errorf("reason %q; want %q", rec.Reason, tc.wantReason)
			case tc.wantBody != "" && rec.Body != tc.wantBody:
				t.Errorf("body %q; want the raw body", rec.Body)
			case !strings.HasPrefix(rec.SourceQueue, tc.wantSource):
				t.Errorf("source %q; want %q", rec.SourceQueue, tc.wantSource)
			case rec.ReceiveCount != tc.wantCount:
				t.Errorf("receive count %d; want %d", rec.ReceiveCount, tc.wantCount)
			case rec.Status != deadletter.StatusDead:
				t.Errorf("status %q", rec.Status)
			}
			if got := h.failedClass(tc.wantID); got != tc.wantJobFailed {
				t.Errorf("job marked %q; want %q", got, tc.wantJobFailed)
			}
			if obstest.Count(h.metrics.String(), tc.wantType, engine.DeadLetters) != 1 {
				want := tc.wantType + " DeadLetters=1"
				t.Errorf("metrics %s; want %s", h.metrics, want)
			}
			if n := strings.Count(h.logs.String(), `"alert":true`); n != 1 {
				t.Errorf("%d alert lines; want 1:\n%s", n, h.logs)
			}
		})
	}
}

// The consumer runs twice too: the second run on the same delivery stores,
// counts and alerts nothing more (and marking the job again is harmless).
func TestConsumerIsIdempotent(t *testing.T) {
	h := newHarness(t, nil)
	env := envelope(contract.PasswordReset.Name)
	msg := moved(t, env, 6)
	poison := sent("{", "invalid JSON")
	for range 3 {
		if f := h.run(t, msg, poison); len(f) != 0 {
			t.Fatalf("failures %v", f)
		}
	}
	if len(h.records.recs) != 2 || h.records.recs[env.MessageID].Occurrences != 1 {
		t.Fatalf("records %+v; want two, each recorded once", h.records.recs)
	}
	if n := strings.Count(h.metrics.String(), `"DeadLetters":1`); n != 2 {
		t.Fatalf("%d DeadLetters lines over three runs; want 2", n)
	}
	if n := strings.Count(h.logs.String(), `"alert":true`); n != 2 {
		t.Fatalf("%d alerts; want 2", n)
	}
	// The same job dead-lettered again after a redrive is a new occurrence.
	again := moved(t, env, 6)
	h.run(t, again)
	if h.records.recs[env.MessageID].Occurrences != 2 {
		t.Fatalf("occurrences %d; want 2 after a second DLQ delivery", h.records.recs[env.MessageID].Occurrences)
	}
}

// A message whose marker is claimed had succeeded: it is recorded as such
// and is not a dead letter (no metric, no alert, no Failed job).
func TestAlreadySucceededIsNotADeadLetter(t *testing.T) {
	h := newHarness(t, nil)
	env := envelope(contract.Welcome.Name)
	if _, err := h.markers.Claim(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID}, engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	if f := h.run(t, moved(t, env, 6)); len(f) != 0 {
		t.Fatalf("failures %v", f)
	}
	if rec := h.records.recs[env.MessageID]; rec.Status != deadletter.StatusSucceeded {
		t.Fatalf("status %q; want succeeded", rec.Status)
	}
	if strings.Contains(h.metrics.String(), "DeadLetters") || strings.Contains(h.logs.String(), `"alert":true`) || h.failedClass(env.MessageID) != "" {
		t.Fatalf("a succeeded job counted as a dead letter: metrics %s, job failed as %q", h.metrics, h.failedClass(env.MessageID))
	}
}

// A job that failed after claiming its marker (claim-then-effect) is sent to
// the DLQ with a reason: it is a dead letter although its marker is claimed.
func TestFailedAfterClaimIsADeadLetter(t *testing.T) {
	h := newHarness(t, nil)
	env := envelope(contract.Welcome.Name)
	if _, err := h.markers.Claim(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID}, engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	body, _ := env.Encode()
	if f := h.run(t, sent(string(body), "effect failed after claim (claim-then-effect): bank said no")); len(f) != 0 {
		t.Fatalf("failures %v", f)
	}
	if rec := h.records.recs[env.MessageID]; rec.Status != deadletter.StatusDead {
		t.Fatalf("status %q; want dead", rec.Status)
	}
	if obstest.Count(h.metrics.String(), env.Type, engine.DeadLetters) != 1 || h.failedClass(env.MessageID) == "" {
		t.Fatalf("not counted or job not marked Failed: metrics %s", h.metrics)
	}
}

// The alert survives a retry: a delivery stored before a later step failed
// is still counted, exactly once.
func TestDeadLetterCountedOnceAcrossRetries(t *testing.T) {
	h := newHarness(t, nil)
	msg := moved(t, envelope(contract.Welcome.Name), 6)
	h.jobs.Err = errors.New("throttled")
	if f := h.run(t, msg); len(f) != 1 {
		t.Fatalf("failures %v; want a retry while the jobs table is down", f)
	}
	h.jobs.Err = nil
	if f := h.run(t, msg); len(f) != 0 {
		t.Fatalf("failures %v", f)
	}
	if n := obstest.Count(h.metrics.String(), contract.Welcome.Name, engine.DeadLetters); n != 1 {
		t.Fatalf("DeadLetters counted %d times; want 1", n)
	}
}

func TestConsumerRetriesWhatItCouldNotRecord(t *testing.T) {
	env := envelope(contract.Welcome.Name)
	for _, tc := range []struct {
		name      string
		mutate    func(*harness)
		cfg       func(*deadletter.Config)
		wantRetry bool
	}{
		{"store down", func(h *harness) { h.records.err = errors.New("throttled") }, nil, true},
		{"jobs table down", func(h *harness) { h.jobs.Err = errors.New("throttled") }, nil, true},
		{"job has no record", func(h *harness) { h.jobs.Err = fmt.Errorf("wrapped: %w", jobs.ErrNotFound) }, nil, false},
		{"marker peek fails", nil, func(c *deadletter.Config) { c.Markers = peekFails{memstore.New()} }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.cfg)
			if tc.mutate != nil {
				tc.mutate(h)
			}
			msg := moved(t, env, 6)
			failed := h.run(t, msg, sent("x", "bad"))
			if got := slices.Contains(failed, msg.MessageId); got != tc.wantRetry {
				t.Fatalf("failures %v; want retry=%v", failed, tc.wantRetry)
			}
		})
	}
}

func TestNewConsumerRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]deadletter.Config{
		"no records":  {Markers: memstore.New()},
		"no markers":  {Records: &fakeRecords{}},
		"no registry": {Records: &fakeRecords{}, Markers: memstore.New()},
	} {
		if _, err := deadletter.NewConsumer(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Every line about a letter carries its job id, type, natural key and the
// trace its message carries, as the worker's lines do.
func TestLetterLinesCarryKeyAndTrace(t *testing.T) {
	h := newHarness(t, nil)
	env := envelope(contract.Welcome.Name)
	msg := moved(t, env, 6)
	const trace = "1-5759e988-bd862e3fe1be46a994272793"
	msg.Attributes["AWSTraceHeader"] = "Root=" + trace + ";Sampled=1"
	h.run(t, msg)
	lines := obstest.Lines(h.logs.String())
	if len(lines) == 0 {
		t.Fatal("no log lines")
	}
	for _, l := range lines {
		if l[obs.KeyJobID] != env.MessageID || l[obs.KeyMessageID] != env.MessageID || l[obs.KeyType] != env.Type || l[obs.KeyKey] != env.Key || l[obs.KeyTraceID] != trace {
			t.Errorf("line %v lacks the job id, type, key or trace id", l)
		}
	}
}

// A dead letter's job reads Failed while another copy of it may still be
// queued; the consumer marks its marker FAILED too, so that copy is
// dead-lettered by the worker, never run, until a redrive. A copy running
// right now (an active lease) decides first: the letter is retried. A
// marker that settles the job (done, cancelled) is left alone.
func TestConsumerMarksTheMarkerFailed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     func(*memstore.Store, engine.Key)
		wantState  engine.State // "" for no marker
		wantRetry  bool
		wantFailed bool // the job record marked Failed
	}{
		{"no marker", func(*memstore.Store, engine.Key) {}, engine.StateFailed, false, true},
		{"a crashed worker's expired lease", func(m *memstore.Store, k engine.Key) {
			_, _ = m.Lease(context.Background(), k, engine.Mark{Owner: "crashed", Until: time.Now().Add(-time.Second)})
		}, engine.StateFailed, false, true},
		{"another copy is running", func(m *memstore.Store, k engine.Key) {
			_, _ = m.Lease(context.Background(), k, engine.Mark{Owner: "twin", Until: time.Now().Add(time.Minute)})
		}, engine.StateLeased, true, false},
		{"cancelled", func(m *memstore.Store, k engine.Key) { _, _ = m.Tombstone(context.Background(), k, time.Time{}) }, engine.StateCancelled, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			env := envelope(contract.Welcome.Name)
			k := engine.Key{Type: env.Type, JobID: env.MessageID}
			tc.before(h.markers, k)
			failed := h.run(t, moved(t, env, 6))
			if (len(failed) == 1) != tc.wantRetry {
				t.Fatalf("failures %v; want retried: %v", failed, tc.wantRetry)
			}
			rec, ok, _ := h.markers.Peek(context.Background(), k)
			if !ok || rec.State != tc.wantState {
				t.Fatalf("marker %+v (%v); want %s", rec, ok, tc.wantState)
			}
			if got := h.failedClass(env.MessageID) != ""; got != tc.wantFailed {
				t.Fatalf("job marked Failed: %v; want %v", got, tc.wantFailed)
			}
		})
	}
}

// Suspected, settled: a delivery the consumer retries (its first run failed
// to mark the job) after an operator redrove the letter must not mark the
// job Failed again: the redrive made it active, and its message is back in
// its queue.
func TestRetryAfterARedriveLeavesTheJobActive(t *testing.T) {
	h := newHarness(t, nil)
	env := envelope(contract.Welcome.Name)
	msg := moved(t, env, 6)
	h.jobs.Err = errors.New("DynamoDB throttled")
	if failed := h.run(t, msg); len(failed) != 1 {
		t.Fatalf("failures %v; want the letter retried", failed)
	}
	// The operator redrives it meanwhile: the letter reads redriven and the
	// FAILED marker is cleared.
	h.records.setStatus(env.MessageID, deadletter.StatusRedriven)
	if err := h.markers.ResetFailed(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID}); err != nil {
		t.Fatal(err)
	}
	h.jobs.Err = nil
	if failed := h.run(t, msg); len(failed) != 0 {
		t.Fatalf("failures %v; want the retry done", failed)
	}
	if h.failedClass(env.MessageID) != "" {
		t.Fatal("the retry marked a redriven job Failed")
	}
	if _, ok, _ := h.markers.Peek(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID}); ok {
		t.Fatal("the retry marked a redriven job's marker FAILED")
	}
}
