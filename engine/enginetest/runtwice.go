// Package enginetest is the engine's public test kit.
//
// RunTwice lets a kind's author prove, with one call, that the
// work converges under at-least-once delivery: it drives the work
// through the real runner (with the in-memory marker store, whose rules the
// conformance suite proves equal to DynamoDB's) twice in sequence, twice
// concurrently, and with a crash at each step boundary followed by a
// redelivery, and checks how often the effect happened in each case.
//
// RunStore is the conformance suite of an engine.Store: the in-memory and
// the DynamoDB stores pass it, and so must a store of your own.
package enginetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

// Case is one kind of job to prove.
type Case[T any] struct {
	// Kind is the kind's declaration.
	Kind engine.Kind[T]
	// Work is its work, wired to fakes the test owns.
	Work func(context.Context, engine.Job[T]) error
	// New returns a payload whose key (Kind.Key) is key: each scenario
	// runs its own job under a fresh key (a random UUID).
	New func(key string) T
	// Encode turns a payload into a record's body (nil: encoding/json);
	// Kind.Decode must read it back.
	Encode func(T) ([]byte, error)
	// Effects reports how often the effect of the job with key happened
	// so far (e.g. the mails a fake sender sent for that key).
	Effects func(key string) int
	// ExactlyOnce makes the kit strict: every scenario, the crash between
	// effect and claim included, must show exactly one effect. Without it
	// that crash may show two (the runner repeats an effect whose claim it
	// never wrote: duplicates over loss), so work that is not idempotent
	// on its own passes. Set it for work that must be: one whose effect
	// carries a key its provider dedups by (the job's key as an
	// Idempotency-Key), or that checks before it acts. It is for
	// effect-then-claim kinds: under claim-then-effect the crash between
	// claim and effect loses the effect by design, which strict mode fails.
	ExactlyOnce bool
	// Source is where the records come from: SQS (the default), a Kinesis
	// stream (the body is the record's data), or a DynamoDB stream (the
	// body, a JSON object, is the record's new image).
	Source Source
}

// Source is a batch source a Case is delivered from.
type Source int

// The sources.
const (
	SQS Source = iota
	Kinesis
	DynamoDB
)

// A scenario is one way a job is delivered, and the effects it may cause.
type scenario struct {
	name string
	// crash is the step the first delivery dies at ("" for none).
	crash string
	// concurrent delivers the job twice at the same time.
	concurrent bool
	// maxEffects is the most effects allowed (at least one is always
	// required): two only where a crash fell between effect and claim.
	maxEffects int
}

// The crash points: the process dies right after that step, so neither the
// claim nor the batch response happen; SQS redelivers once the lease (the
// invocation's deadline) has passed.
const (
	crashAfterLease  = "after lease"
	crashAfterEffect = "after effect, before claim"
	crashAfterClaim  = "after claim, before the response"
)

var scenarios = []scenario{
	{name: "twice in sequence", maxEffects: 1},
	{name: "twice concurrently", concurrent: true, maxEffects: 1},
	{name: "crash " + crashAfterLease + ", then redelivery", crash: crashAfterLease, maxEffects: 1},
	{name: "crash " + crashAfterEffect + ", then redelivery", crash: crashAfterEffect, maxEffects: 2},
	{name: "crash " + crashAfterClaim + ", then redelivery", crash: crashAfterClaim, maxEffects: 1},
}

// RunTwice runs every scenario as a subtest and fails the one whose effect
// count is wrong. What it allows, plainly: exactly one effect in every
// scenario but one; where the process dies between effect and claim, one
// or two (duplicates over loss: a counter with no idempotency of its own
// passes), or exactly one with Case.ExactlyOnce. Under claim-then-effect a
// crash between claim and effect loses the effect instead (loss over
// duplicates), which that scenario then allows, unless ExactlyOnce.
func RunTwice[T any](t *testing.T, c Case[T]) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if err := check(c, sc); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check runs every scenario and returns an error naming each one whose
// effect count is wrong, or nil.
func Check[T any](c Case[T]) error {
	var errs []error
	for _, sc := range scenarios {
		if err := check(c, sc); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func check[T any](c Case[T], sc scenario) error {
	if c.Effects == nil || c.Work == nil || c.New == nil {
		return errors.New("enginetest: Case needs Work, New and Effects")
	}
	lo, hi := 1, sc.maxEffects
	switch {
	case c.ExactlyOnce:
		hi = 1
	case c.Kind.Bias == engine.ClaimThenEffect && sc.crash == crashAfterClaim:
		lo, hi = 0, 1 // the crash fell between claim and effect: lost, never repeated
	}
	key := uuid.NewString() // fresh, and of a shape any key function takes
	p := c.New(key)
	encode := c.Encode
	if encode == nil {
		encode = func(v T) ([]byte, error) { return json.Marshal(v) }
	}
	body, err := encode(p)
	if err != nil {
		return fmt.Errorf("enginetest: encode: %w", err)
	}
	if got, err := c.Kind.Key(p); err != nil || got != key {
		return fmt.Errorf("enginetest: New(%q) gave a payload whose key is %q (%v)", key, got, err)
	}
	w, err := newWorld(c, sc.crash)
	if err != nil {
		return err
	}
	w.source = c.Source
	w.deliver(string(body), sc)
	if got := c.Effects(key); got < lo || got > hi {
		return fmt.Errorf("%s: the effect happened %d times; want %s", sc.name, got, want(lo, hi))
	}
	return nil
}

func want(lo, hi int) string {
	if lo == hi {
		return fmt.Sprintf("exactly %d", lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// world is one handler on the kit's fakes with a crash point and a clock.
type world struct {
	clock   *Clock
	store   *memstore.Store
	handle  func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)
	kinesis func(context.Context, events.KinesisEvent) (events.KinesisEventResponse, error)
	dynamo  func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)
	source  Source
	crash   *crashes
}

func newWorld[T any](c Case[T], crash string) (*world, error) {
	w := &world{clock: NewClock(time.Now()), store: memstore.New()}
	w.store.Now = w.clock.Now
	w.crash = &crashes{at: crash}
	on := &Switches{} // a fail-closed kind is proved switched on
	on.Set(c.Kind.Name, true)
	work := func(ctx context.Context, job engine.Job[T]) error {
		err := c.Work(ctx, job)
		if err == nil {
			w.crash.here(crashAfterEffect)
		}
		return err
	}
	h, err := engine.NewHandler(c.Kind, work, engine.Options{
		Store: crashingMarkers{Store: w.store, crash: w.crash}, Switch: on,
		Parker: &Queues{}, DeadLetterer: &Queues{},
		Logger: engine.NewLogger(io.Discard, "error"), Now: w.clock.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("enginetest: %w", err)
	}
	w.handle, w.kinesis, w.dynamo = h.HandleSQS, h.HandleKinesis, h.HandleDynamoDB
	return w, nil
}

// deliver plays the scenario: the first delivery (with its crash, or a
// concurrent twin), then the redelivery SQS makes after the visibility
// timeout, by when every lease has expired.
func (w *world) deliver(body string, sc scenario) {
	first := RawRecord(body, 1)
	if sc.concurrent {
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { w.invoke(first) })
		}
		wg.Wait()
	} else {
		w.invoke(first)
	}
	w.crash.disarm()
	w.clock.Advance(2 * invocationTimeout)
	w.invoke(RawRecord(body, 2))
	// A last delivery of what may still be failing (a twin's busy retry).
	w.clock.Advance(2 * invocationTimeout)
	w.invoke(RawRecord(body, 3))
}

// invocationTimeout is the deadline of every invocation: the leases last
// until then.
const invocationTimeout = time.Minute

// invoke runs one invocation from the case's source; a crashed
// invocation's response is lost.
func (w *world) invoke(msg events.SQSMessage) {
	ctx, cancel := context.WithDeadline(context.Background(), w.clock.Now().Add(invocationTimeout))
	defer cancel()
	switch w.source {
	case Kinesis:
		_, _ = w.kinesis(ctx, events.KinesisEvent{Records: []events.KinesisEventRecord{{
			EventID: "shardId-000000000000:" + msg.MessageId, EventSourceArn: "arn:aws:kinesis:us-east-1:123456789012:stream/jobs",
			Kinesis: events.KinesisRecord{SequenceNumber: msg.MessageId, Data: []byte(msg.Body), PartitionKey: "p"},
		}}})
	case DynamoDB:
		image, err := Image([]byte(msg.Body))
		if err != nil {
			panic("enginetest: a DynamoDB case's body must be a JSON object: " + err.Error())
		}
		_, _ = w.dynamo(ctx, events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{
			EventName: "INSERT", EventSourceArn: "arn:aws:dynamodb:us-east-1:123456789012:table/jobs/stream/1",
			Change: events.DynamoDBStreamRecord{SequenceNumber: msg.MessageId, NewImage: image},
		}}})
	default:
		_, _ = w.handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
	}
}

// crashes kills the current invocation's record at the armed step, once.
type crashes struct {
	mu sync.Mutex
	at string
}

// here ends the calling record's goroutine when step is the armed crash
// point: what comes after it (the claim, the response) never happens.
func (c *crashes) here(step string) {
	c.mu.Lock()
	hit := c.at == step
	if hit {
		c.at = ""
	}
	c.mu.Unlock()
	if hit {
		runtime.Goexit()
	}
}

func (c *crashes) disarm() { c.mu.Lock(); c.at = ""; c.mu.Unlock() }

type crashingMarkers struct {
	*memstore.Store
	crash *crashes
}

func (m crashingMarkers) Lease(ctx context.Context, k engine.Key, mk engine.Mark) (engine.Record, error) {
	r, err := m.Store.Lease(ctx, k, mk)
	if err == nil {
		m.crash.here(crashAfterLease)
	}
	return r, err
}

func (m crashingMarkers) Claim(ctx context.Context, k engine.Key, mk engine.Mark) (bool, error) {
	won, err := m.Store.Claim(ctx, k, mk)
	if err == nil {
		m.crash.here(crashAfterClaim)
	}
	return won, err
}
