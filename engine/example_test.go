package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

// The examples use only the engine's public API, as a function of your own
// would; their fakes below stand in for SSM and SQS (package ssmswitch and
// sqsqueue in a Lambda).

// switches is a kill switch held in memory: every type is on unless listed.
type switches map[string]bool

func (s switches) IsJobEnabled(_ context.Context, jobType string, _ bool) bool {
	on, set := s[jobType]
	return on || !set
}

// queues prints what the runner parks and dead-letters.
type queues struct{}

func (queues) Park(_ context.Context, _ engine.Queue, env engine.Envelope, _ string, delay time.Duration) error {
	fmt.Println("parked", env.Type, "for", delay)
	return nil
}

func (queues) DeadLetter(_ context.Context, _ events.SQSMessage, reason string) error {
	fmt.Println("dead-lettered:", reason)
	return nil
}

// invoice is the job type of the examples.
var invoice = engine.JobType{
	Name:  "billing.invoice-ready.v1",
	Args:  []engine.ArgSpec{{Name: "invoiceId", Format: engine.FormatID, Required: true}},
	Queue: "default", EnabledByDefault: true, Lease: true,
	KeyPrefix: "invoice-ready", KeyArgs: []string{"invoiceId"},
}

// newRunner is a runner of invoice with h as its handler.
func newRunner(h engine.Handler, sw switches) *engine.Runner {
	reg, err := engine.NewRegistry(invoice)
	if err != nil {
		panic(err)
	}
	r, err := engine.New(engine.Config{
		Registry: reg, Handlers: map[string]engine.Handler{invoice.Name: h},
		Switch: sw, Markers: memstore.New(), Parker: queues{}, DeadLetterer: queues{},
		Logger: engine.NewLogger(io.Discard, "error"),
	})
	if err != nil {
		panic(err)
	}
	return r
}

// record is the SQS record of an invoice job for invoiceID.
func record(invoiceID string) events.SQSMessage {
	args := map[string]string{"invoiceId": invoiceID}
	env := engine.Envelope{V: engine.Version, MessageID: engine.DeriveMessageID("example", invoiceID), Type: invoice.Name,
		Key: invoice.DeriveKey(args), CorrelationID: "c-1", Args: args, EnqueuedAt: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)}
	body, err := env.Encode()
	if err != nil {
		panic(err)
	}
	return events.SQSMessage{MessageId: "sqs-" + invoiceID, Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

// A job type is its declaration and its handler, side by side. The handler
// loads what its effect needs and does it; the runner does the rest (kill
// switch, peek, lease, claim, parking, retries, the DLQ). Delivered twice,
// the effect happens once.
func Example() {
	notify := engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
		fmt.Println("notifying about invoice", job.Envelope.Args["invoiceId"])
		return nil
	})
	r := newRunner(notify, nil)
	msg := record("inv-42")
	for range 2 { // at-least-once: the same message, twice
		resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
		fmt.Println("retry:", len(resp.BatchItemFailures))
	}
	// Output:
	// notifying about invoice inv-42
	// retry: 0
	// retry: 0
}

// A failure no retry can fix is returned as Permanent: the message goes
// straight to the dead-letter queue with the reason, instead of being
// retried until SQS gives up.
func ExamplePermanent() {
	notify := engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
		return engine.Permanent(errors.New("invoice " + job.Envelope.Args["invoiceId"] + " has no customer"))
	})
	resp, _ := newRunner(notify, nil).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-7")}})
	fmt.Println("retry:", len(resp.BatchItemFailures))
	// Output:
	// dead-lettered: permanent: invoice inv-7 has no customer
	// retry: 0
}

// Work that turns out unnecessary is a NoOp: a success, counted by its
// kind, whose marker is claimed so a redelivery does nothing either.
func ExampleNoOpKind() {
	calls := 0
	notify := engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
		calls++
		return engine.NoOpKind("paid", "the invoice is paid already")
	})
	r := newRunner(notify, nil)
	for range 2 {
		resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-8")}})
		fmt.Println("retry:", len(resp.BatchItemFailures))
	}
	fmt.Println("handler calls:", calls)
	// Output:
	// retry: 0
	// retry: 0
	// handler calls: 1
}

// Typed args arrive in a struct of string fields; New refuses a struct
// that disagrees with the type's declared args.
func ExampleTyped() {
	type invoiceArgs struct {
		InvoiceID string `arg:"invoiceId"`
	}
	notify := engine.Typed(func(ctx context.Context, job engine.Job, a invoiceArgs) error {
		fmt.Println("invoice", a.InvoiceID)
		return nil
	})
	_, _ = newRunner(notify, nil).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-9")}})

	type wrongArgs struct {
		ID string `arg:"id"`
	}
	reg, _ := engine.NewRegistry(invoice)
	_, err := engine.New(engine.Config{Registry: reg, Switch: switches{}, Markers: memstore.New(), Parker: queues{},
		Handlers: map[string]engine.Handler{invoice.Name: engine.Typed(func(context.Context, engine.Job, wrongArgs) error { return nil })}})
	fmt.Println(err != nil)
	// Output:
	// invoice inv-9
	// true
}

// While its kill switch is off, a job of a Park type is parked: re-sent with
// a delay, its handler not called, the record a success.
func ExampleRunner_Handle_parked() {
	notify := engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
		fmt.Println("must not run")
		return nil
	})
	r := newRunner(notify, switches{invoice.Name: false})
	resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-10")}})
	fmt.Println("retry:", len(resp.BatchItemFailures))
	// Output:
	// parked billing.invoice-ready.v1 for 15m0s
	// retry: 0
}

// Decode checks an envelope's own fields; Registry.Validate checks its args
// against the type.
func ExampleDecode() {
	env, err := engine.Decode([]byte(record("inv-11").Body))
	fmt.Println(env.Type, env.Args["invoiceId"], err)
	_, err = engine.Decode([]byte(`{"v":1}`))
	fmt.Println(errors.Is(err, engine.ErrMalformed))
	// Output:
	// billing.invoice-ready.v1 inv-11 <nil>
	// true
}

// The same caller and idempotency key always name the same job.
func ExampleDeriveMessageID() {
	a := engine.DeriveMessageID("shop", "order-1-paid")
	b := engine.DeriveMessageID("shop", "order-1-paid")
	c := engine.DeriveMessageID("shop", "order-2-paid")
	fmt.Println(a == b, a == c)
	// Output: true false
}

// The hook at each step boundary: a test (or a fault-injection build) sees
// where a record is.
func ExampleConfig_atStep() {
	reg, _ := engine.NewRegistry(invoice)
	r, _ := engine.New(engine.Config{
		Registry: reg, Switch: switches{}, Markers: memstore.New(), Parker: queues{},
		Handlers: map[string]engine.Handler{invoice.Name: engine.HandlerFunc(func(context.Context, engine.Job) error { return nil })},
		Logger:   engine.NewLogger(io.Discard, "error"),
		AtStep:   func(s engine.Step) { fmt.Println(s) },
	})
	_, _ = r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-12")}})
	// Output:
	// after-decode
	// after-lease
	// after-effect
	// after-claim
	// before-response
}

// A store answers a write that finds a settled marker with the matching
// error.
func ExampleRecord_Conflict() {
	fmt.Println(engine.Record{State: engine.StateDone}.Conflict())
	fmt.Println(engine.Record{State: engine.StateLeased}.Conflict())
	// Output:
	// marker: already processed
	// marker: lease held by another worker
}
