package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
)

// order is a team's own message: its own JSON, its own key.
type order struct {
	ID     string `json:"orderId"`
	Amount int    `json:"amount"`
}

// shipKind is the kind most tests run: keyed by the order id.
var shipKind = engine.Kind[order]{
	Name: "orders.ship",
	Key:  func(o order) (string, error) { return o.ID, nil },
}

// world is a handler of one kind on the kit's fakes: the traced in-memory
// store, switches, queues, a clock, and the work's calls by key.
type world struct {
	t        *testing.T
	h        *engine.Handler[order]
	store    enginetest.Traced
	trace    *enginetest.Trace
	switches *enginetest.Switches
	queues   *enginetest.Queues
	clock    *enginetest.Clock
	logs     *bytes.Buffer

	mu    sync.Mutex
	calls map[string]int // key -> runs of the work
	seen  []string       // amounts run, "key:amount", in order
	fail  map[string]error
}

func newWorld(t *testing.T, k engine.Kind[order], opts func(*engine.Options)) *world {
	t.Helper()
	tr := &enginetest.Trace{}
	w := &world{t: t, trace: tr, switches: &enginetest.Switches{}, clock: enginetest.NewClock(time.Now()),
		logs: &bytes.Buffer{}, calls: map[string]int{}, fail: map[string]error{}}
	w.queues = &enginetest.Queues{Trace: tr}
	mem := memstore.New()
	mem.Now = w.clock.Now
	w.store = enginetest.Traced{Store: mem, Trace: tr}
	o := engine.Options{
		Store: w.store, Switch: w.switches, Parker: w.queues, DeadLetterer: w.queues,
		Logger: engine.NewLogger(&lockedWriter{w: w.logs}, "debug"), Now: w.clock.Now,
	}
	if opts != nil {
		opts(&o)
	}
	h, err := engine.NewHandler(k, w.work, o)
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	return w
}

// lockedWriter serializes the log lines of concurrent records.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (w *world) work(_ context.Context, job engine.Job[order]) error {
	w.trace.Add("work")
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls[job.Key]++
	w.seen = append(w.seen, fmt.Sprintf("%s:%d", job.Key, job.Payload.Amount))
	return w.fail[job.Key]
}

func (w *world) runs(key string) int { w.mu.Lock(); defer w.mu.Unlock(); return w.calls[key] }

// record is an SQS record of body from the orders queue, its receive count
// n, with an SQS message id of its own.
var sqsSeq int

func record(body string, n int) events.SQSMessage {
	sqsSeq++
	return events.SQSMessage{
		MessageId: fmt.Sprintf("sqs-%d", sqsSeq), Body: body, EventSourceARN: "arn:aws:sqs:eu-west-1:123456789012:orders",
		Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(n)},
	}
}

func orderBody(id string, amount int) string {
	b, _ := json.Marshal(order{ID: id, Amount: amount})
	return string(b)
}

// handle runs a batch of records with a minute's deadline and returns the
// ids SQS must retry.
func (w *world) handle(records ...events.SQSMessage) []string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := w.h.HandleSQS(ctx, events.SQSEvent{Records: records})
	if err != nil {
		w.t.Fatalf("HandleSQS returned %v; it never returns an error", err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// The seed's three invariants, on any payload: a record whose key is done
// does nothing (no work, no claim, no lease); the happy path runs the work,
// then claims; a failed work never claims, and the failure propagates.
func TestSeedInvariants(t *testing.T) {
	t.Run("done does nothing", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		if _, err := w.store.Store.Claim(context.Background(), engine.Key{Type: "orders.ship", JobID: "o-1"}, engine.Mark{}); err != nil {
			t.Fatal(err)
		}
		if failed := w.handle(record(orderBody("o-1", 12), 2)); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
		if got := w.trace.String(); got != "peek" {
			t.Fatalf("calls %q; want the peek alone", got)
		}
	})
	t.Run("work then claim", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		w.handle(record(orderBody("o-1", 12), 1))
		if got := w.trace.String(); got != "peek work claim" {
			t.Fatalf("calls %q; want peek work claim, in that order", got)
		}
	})
	t.Run("failed work never claims", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		w.fail["o-1"] = errors.New("carrier down")
		msg := record(orderBody("o-1", 12), 1)
		if failed := w.handle(msg); len(failed) != 1 || failed[0] != msg.MessageId {
			t.Fatalf("failures %v; want the record retried", failed)
		}
		if w.trace.Has("claim") {
			t.Fatalf("calls %q; a failed work claimed", w.trace)
		}
	})
}

// A body the kind cannot decode, or a payload without a key, is a
// permanent failure whose work never runs: dead-lettered with its reason,
// or, with no dead-letterer, reported for the queue's redrive policy.
func TestNoGuardNoRun(t *testing.T) {
	keyErr := engine.Kind[order]{Name: "orders.ship", Key: func(order) (string, error) { return "", errors.New("no order id") }}
	for _, tc := range []struct {
		name   string
		kind   engine.Kind[order]
		body   string
		reason string
	}{
		{"undecodable body", shipKind, `{"orderId":`, "the body does not decode"},
		{"wrong type", shipKind, `{"orderId":7}`, "the body does not decode"},
		{"empty key", shipKind, `{"amount":3}`, "the payload has no key"},
		{"key error", keyErr, orderBody("o-1", 3), "no order id"},
		{"key too long", shipKind, orderBody(strings.Repeat("k", engine.MaxKeyBytes+1), 3), "bytes; at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.kind, nil)
			msg := record(tc.body, 1)
			if failed := w.handle(msg); len(failed) != 0 {
				t.Fatalf("failures %v; a dead-lettered record is done with", failed)
			}
			reason, ok := w.queues.DeadReason(msg.MessageId)
			if !ok || !strings.Contains(reason, tc.reason) || !strings.Contains(reason, "malformed") {
				t.Fatalf("dead-letter reason %q (%v); want it to say %q", reason, ok, tc.reason)
			}
			if w.trace.Has("work") || w.trace.Has("claim") || w.trace.Has("lease") {
				t.Fatalf("calls %q; an unguarded record ran", w.trace)
			}
			if !strings.Contains(w.logs.String(), `"type":"orders.ship"`) {
				t.Errorf("the failure is not logged under its kind:\n%s", w.logs)
			}
		})
	}
	t.Run("no dead-letterer", func(t *testing.T) {
		w := newWorld(t, shipKind, func(o *engine.Options) { o.DeadLetterer = nil })
		msg := record(`not json`, 1)
		if failed := w.handle(msg); len(failed) != 1 {
			t.Fatalf("failures %v; want it left to the queue's redrive policy", failed)
		}
	})
}

// Two records of one key run the work once: in one batch (one at a time,
// the second a duplicate), and in batches one after another.
func TestOneKeyRunsOnce(t *testing.T) {
	t.Run("one batch", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		if failed := w.handle(record(orderBody("o-1", 12), 1), record(orderBody("o-2", 5), 1), record(orderBody("o-1", 12), 1)); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
		if w.runs("o-1") != 1 || w.runs("o-2") != 1 {
			t.Fatalf("runs %v; want each key once", w.calls)
		}
		if n := w.trace.Count("peek"); n != 1 {
			t.Errorf("%d peeks; want the batch peeked with one read", n)
		}
	})
	t.Run("one long batch", func(t *testing.T) {
		// A batch longer than an SQS batch (a stream's) finds its keys'
		// lanes another way: each key still runs once, its twins settled.
		w := newWorld(t, shipKind, func(o *engine.Options) { o.Concurrency = 4 })
		var recs []events.SQSMessage
		for i := range 40 {
			recs = append(recs, record(orderBody(fmt.Sprintf("o-%d", i%13), 12), 1))
		}
		if failed := w.handle(recs...); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
		for i := range 13 {
			if n := w.runs(fmt.Sprintf("o-%d", i)); n != 1 {
				t.Fatalf("o-%d ran %d times; want once (runs %v)", i, n, w.calls)
			}
		}
		if n := w.trace.Count("peek"); n != 1 {
			t.Errorf("%d peeks; want the batch peeked with one read", n)
		}
	})
	t.Run("in sequence", func(t *testing.T) {
		w := newWorld(t, shipKind, nil)
		for i := range 3 {
			if failed := w.handle(record(orderBody("o-1", 12), i+1)); len(failed) != 0 {
				t.Fatalf("delivery %d: failures %v", i+1, failed)
			}
		}
		if w.runs("o-1") != 1 {
			t.Fatalf("runs %d; want once", w.runs("o-1"))
		}
	})
	t.Run("a twin in one batch waits for the first", func(t *testing.T) {
		w := newWorld(t, shipKind, func(o *engine.Options) { o.Concurrency = 10 })
		w.fail["o-1"] = errors.New("flaky")
		a, b := record(orderBody("o-1", 12), 1), record(orderBody("o-1", 12), 1)
		w.handle(a, b)
		// Both failed, one after the other: never at once (the runs of one key
		// are serial), and each is retried.
		if w.runs("o-1") != 2 {
			t.Fatalf("runs %d; a failed first leaves its twin to run (and fail) after it", w.runs("o-1"))
		}
	})
}

// Across invocations at once, a Lease makes the twin wait (it is retried,
// busy) and never run the work while the first holds it.
func TestLeaseKeepsATwinOut(t *testing.T) {
	leased := shipKind
	leased.Lease = true
	release := make(chan struct{})
	started := make(chan struct{})
	w := newWorld(t, leased, nil)
	var once sync.Once
	h, err := engine.NewHandler(leased, func(ctx context.Context, job engine.Job[order]) error {
		once.Do(func() { close(started) })
		<-release
		return w.work(ctx, job)
	}, engine.Options{Store: w.store, Logger: engine.NewLogger(&bytes.Buffer{}, "error"), Now: w.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w.h = h
	first := make(chan []string)
	go func() { first <- w.handle(record(orderBody("o-1", 12), 1)) }()
	<-started
	twin := record(orderBody("o-1", 12), 1)
	if failed := w.handle(twin); len(failed) != 1 || failed[0] != twin.MessageId {
		t.Fatalf("the twin's failures %v; want it retried while the lease is held", failed)
	}
	close(release)
	if failed := <-first; len(failed) != 0 {
		t.Fatalf("the first's failures %v", failed)
	}
	if w.runs("o-1") != 1 {
		t.Fatalf("runs %d; want once", w.runs("o-1"))
	}
	// The twin's retry finds the key done.
	if failed := w.handle(twin); len(failed) != 0 || w.runs("o-1") != 1 {
		t.Fatalf("retry: failures %v, runs %d", failed, w.runs("o-1"))
	}
}

// Work that fails runs again on the next delivery; once it succeeded, it
// never runs again for that key while its marker lives.
func TestAnErrorRunsAgainASuccessNever(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	w.fail["o-1"] = errors.New("carrier down")
	w.handle(record(orderBody("o-1", 12), 1))
	delete(w.fail, "o-1")
	w.handle(record(orderBody("o-1", 12), 2))
	w.handle(record(orderBody("o-1", 12), 3))
	if w.runs("o-1") != 2 {
		t.Fatalf("runs %d; want the failed one and the successful retry", w.runs("o-1"))
	}
}

// With a Fingerprint, the same key with other content fails as permanent
// (ErrFingerprint, naming the key), done or leased, and never runs; the
// same content is a duplicate.
func TestFingerprintRefusesOtherContent(t *testing.T) {
	fp := shipKind
	fp.Lease = true
	fp.Fingerprint = func(o order) ([]byte, error) { return json.Marshal(o) }
	t.Run("done", func(t *testing.T) {
		w := newWorld(t, fp, nil)
		w.handle(record(orderBody("o-1", 12), 1))
		same, other := record(orderBody("o-1", 12), 1), record(orderBody("o-1", 99), 1)
		if failed := w.handle(same, other); len(failed) != 0 {
			t.Fatalf("failures %v", failed)
		}
		if reason, ok := w.queues.DeadReason(other.MessageId); !ok || !strings.Contains(reason, engine.ErrFingerprint.Error()) || !strings.Contains(reason, `"o-1"`) {
			t.Fatalf("other content: reason %q (%v); want ErrFingerprint naming the key", reason, ok)
		}
		if _, ok := w.queues.DeadReason(same.MessageId); ok {
			t.Fatal("the same content was dead-lettered; it is a duplicate")
		}
		if strings.Join(w.seen, " ") != "o-1:12" {
			t.Fatalf("ran %v; want only the first", w.seen)
		}
	})
	t.Run("leased", func(t *testing.T) {
		w := newWorld(t, fp, nil)
		k := engine.Key{Type: "orders.ship", JobID: "o-2"}
		sum := w.fingerprintOf(t, fp, order{ID: "o-2", Amount: 1})
		if _, err := w.store.Store.Lease(context.Background(), k, engine.Mark{Owner: "elsewhere", Until: w.clock.Now().Add(time.Minute), Fingerprint: sum}); err != nil {
			t.Fatal(err)
		}
		other := record(orderBody("o-2", 2), 1)
		w.handle(other)
		if reason, ok := w.queues.DeadReason(other.MessageId); !ok || !errorsIsText(reason, engine.ErrFingerprint) {
			t.Fatalf("reason %q; want ErrFingerprint", reason)
		}
		if w.runs("o-2") != 0 {
			t.Fatal("it ran")
		}
	})
}

func errorsIsText(reason string, err error) bool { return strings.Contains(reason, err.Error()) }

// fingerprintOf is the fingerprint the handler keeps for o: written by a
// run of it through a scratch handler.
func (w *world) fingerprintOf(t *testing.T, k engine.Kind[order], o order) string {
	t.Helper()
	mem := memstore.New()
	h, err := engine.NewHandler(k, func(context.Context, engine.Job[order]) error { return nil }, engine.Options{Store: mem, Logger: engine.NewLogger(&bytes.Buffer{}, "error")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(o)
	if _, err := h.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(string(b), 1)}}); err != nil {
		t.Fatal(err)
	}
	r, _, _ := mem.Peek(context.Background(), engine.Key{Type: k.Name, JobID: o.ID})
	if r.Fingerprint == "" {
		t.Fatal("no fingerprint kept")
	}
	return r.Fingerprint
}

// How long a marker guards is an option: a done key runs again once its
// marker expired, and not before.
func TestRetentionIsHowLongAKeyIsGuarded(t *testing.T) {
	w := newWorld(t, shipKind, func(o *engine.Options) { o.Retention = 48 * time.Hour })
	w.handle(record(orderBody("o-1", 12), 1))
	w.clock.Advance(47 * time.Hour)
	w.handle(record(orderBody("o-1", 12), 1))
	if w.runs("o-1") != 1 {
		t.Fatalf("runs %d within the retention; want once", w.runs("o-1"))
	}
	w.clock.Advance(2 * time.Hour)
	w.handle(record(orderBody("o-1", 12), 1))
	if w.runs("o-1") != 2 {
		t.Fatalf("runs %d after the retention; want the key free again", w.runs("o-1"))
	}
}

// A cache of done keys drops a duplicate this execution environment saw
// done without reading the store; without the option it reads.
func TestDoneCacheSkipsThePeek(t *testing.T) {
	for _, size := range []int{0, 10} {
		t.Run(fmt.Sprint("cache ", size), func(t *testing.T) {
			w := newWorld(t, shipKind, func(o *engine.Options) { o.DoneCache = size })
			w.handle(record(orderBody("o-1", 12), 1))
			w.trace.Reset()
			w.handle(record(orderBody("o-1", 12), 2))
			want := "peek"
			if size > 0 {
				want = ""
			}
			if got := w.trace.String(); got != want || w.runs("o-1") != 1 {
				t.Fatalf("calls %q, runs %d; want %q and once", got, w.runs("o-1"), want)
			}
		})
	}
}

// fifo is a record of a FIFO queue's group.
func fifo(body, group string) events.SQSMessage {
	m := record(body, 1)
	m.EventSourceARN += ".fifo"
	m.Attributes["MessageGroupId"] = group
	return m
}

// In a FIFO queue, a group's records run in order, and at the first one
// that fails the rest of its group is reported failed with it, not run;
// other groups go on.
func TestFIFOStopsOnlyTheFailedGroup(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	w.fail["a-2"] = errors.New("carrier down")
	a1, a2, a3 := fifo(orderBody("a-1", 1), "A"), fifo(orderBody("a-2", 2), "A"), fifo(orderBody("a-3", 3), "A")
	b1, b2 := fifo(orderBody("b-1", 1), "B"), fifo(orderBody("b-2", 2), "B")
	failed := w.handle(a1, b1, a2, b2, a3)
	if strings.Join(failed, " ") != a2.MessageId+" "+a3.MessageId {
		t.Fatalf("failures %v; want a-2 and a-3, in order", failed)
	}
	if w.runs("a-3") != 0 {
		t.Fatal("a record after its group's failure ran")
	}
	if w.runs("b-1") != 1 || w.runs("b-2") != 1 || w.runs("a-1") != 1 {
		t.Fatalf("runs %v; the other group and the records before the failure run", w.calls)
	}
	var order []string
	for _, s := range w.seen {
		if strings.HasPrefix(s, "a-") {
			order = append(order, s)
		}
	}
	if strings.Join(order, " ") != "a-1:1 a-2:2" {
		t.Fatalf("group A ran %v; want in order", order)
	}
}

// A switched-off record parks with its original message: the body and
// message attributes it came with, back to the queue it came from. A
// dead letter keeps the original message too.
func TestParkAndDeadLetterKeepTheOriginalMessage(t *testing.T) {
	w := newWorld(t, shipKind, func(o *engine.Options) { o.ParkDelay = 30 * time.Second })
	w.switches.Set("orders.ship", false)
	msg := record(orderBody("o-1", 12), 1)
	tenant := "t-9"
	msg.MessageAttributes = map[string]events.SQSMessageAttribute{"tenant": {DataType: "String", StringValue: &tenant}}
	if failed := w.handle(msg); len(failed) != 0 {
		t.Fatalf("failures %v; a parked record is done with", failed)
	}
	parked := w.queues.ParkedMessages()
	if len(parked) != 1 || parked[0].Body != msg.Body || parked[0].Queue != "orders" || parked[0].Delay != 30*time.Second ||
		*parked[0].Attributes["tenant"].StringValue != "t-9" {
		t.Fatalf("parked %+v; want the same body and attributes on orders after 30s", parked)
	}
	if w.runs("o-1") != 0 {
		t.Fatal("a switched-off record ran")
	}
}

// FailClosed keeps a kind off while its switch has no value; Skip ends a
// switched-off record as done (claimed), never parked.
func TestSwitchSettings(t *testing.T) {
	closed := shipKind
	closed.FailClosed = true
	w := newWorld(t, closed, nil)
	w.handle(record(orderBody("o-1", 12), 1))
	if w.runs("o-1") != 0 || len(w.queues.ParkedMessages()) != 1 {
		t.Fatalf("a fail-closed kind with no switch value: runs %d, parked %d", w.runs("o-1"), len(w.queues.ParkedMessages()))
	}
	w.switches.Set("orders.ship", true)
	w.handle(record(orderBody("o-1", 12), 1))
	if w.runs("o-1") != 1 {
		t.Fatal("switched on, it did not run")
	}

	skip := shipKind
	skip.WhileOff = engine.Skip
	s := newWorld(t, skip, nil)
	s.switches.Set("orders.ship", false)
	s.handle(record(orderBody("o-2", 1), 1))
	if s.runs("o-2") != 0 || len(s.queues.ParkedMessages()) != 0 || !s.trace.Has("claim") {
		t.Fatalf("a skipping kind switched off: calls %q; want it claimed as done, not run, not parked", s.trace)
	}
}

// A kind must have a name and a key; Options a store; a kind that parks
// while off a Parker beside a Switch.
func TestNewHandlerRefusesWhatCannotWork(t *testing.T) {
	work := func(context.Context, engine.Job[order]) error { return nil }
	mem := memstore.New()
	for _, tc := range []struct {
		name string
		kind engine.Kind[order]
		o    engine.Options
	}{
		{"no store", shipKind, engine.Options{}},
		{"no name", engine.Kind[order]{Key: shipKind.Key}, engine.Options{Store: mem}},
		{"no key", engine.Kind[order]{Name: "orders.ship"}, engine.Options{Store: mem}},
		{"switch without parker", shipKind, engine.Options{Store: mem, Switch: &enginetest.Switches{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := engine.NewHandler(tc.kind, work, tc.o); err == nil {
				t.Fatal("NewHandler accepted it")
			}
		})
	}
}

// keeper is a slog.Handler that keeps every attribute slice WithAttrs is
// given, as a handler may: the slice is its own.
type keeper struct {
	mu   *sync.Mutex
	kept *[][]slog.Attr
}

func (k keeper) Enabled(context.Context, slog.Level) bool  { return true }
func (k keeper) Handle(context.Context, slog.Record) error { return nil }
func (k keeper) WithGroup(string) slog.Handler             { return k }
func (k keeper) WithAttrs(as []slog.Attr) slog.Handler {
	k.mu.Lock()
	defer k.mu.Unlock()
	*k.kept = append(*k.kept, as)
	return k
}

// Each record's logger keeps attributes of its own, even when its kind's
// LogAttrs hands out one slice with room to spare and the log handler keeps
// what it is given: no record's attributes are appended over another's.
func TestEachRecordLogsItsOwnAttributes(t *testing.T) {
	shared := make([]slog.Attr, 1, 8)
	shared[0] = slog.String("team", "shipping")
	k := shipKind
	k.LogAttrs = func(order) []slog.Attr { return shared[:1] }
	var kept [][]slog.Attr
	w := newWorld(t, k, func(o *engine.Options) { o.Logger = slog.New(keeper{mu: &sync.Mutex{}, kept: &kept}) })
	recs := []events.SQSMessage{record(orderBody("o-1", 1), 1), record(orderBody("o-2", 2), 1), record(orderBody("o-3", 3), 1)}
	if failed := w.handle(recs...); len(failed) != 0 {
		t.Fatalf("failed %v", failed)
	}
	ids := map[string]bool{}
	for _, as := range kept {
		for _, a := range as {
			if a.Key == "sqsMessageId" {
				ids[a.Value.String()] = true
			}
		}
	}
	for _, r := range recs {
		if !ids[r.MessageId] {
			t.Fatalf("the loggers kept sqsMessageId %v; want each record's own (%s missing)", ids, r.MessageId)
		}
	}
	if len(shared[:cap(shared)][1].Key) != 0 {
		t.Fatalf("the kind's slice was written past its length: %v", shared[:2])
	}
}
