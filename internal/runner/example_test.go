package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
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

func (queues) Park(_ context.Context, msg events.SQSMessage, delay time.Duration) error {
	env, _ := message.Decode([]byte(msg.Body))
	fmt.Println("parked", env.Type, "for", delay)
	return nil
}

func (queues) DeadLetter(_ context.Context, _ events.SQSMessage, reason string) error {
	fmt.Println("dead-lettered:", reason)
	return nil
}

// invoice is the job type of the examples.
var invoice = message.JobType{
	Name:  "billing.invoice-ready.v1",
	Args:  []message.ArgSpec{{Name: "invoiceId", Format: message.FormatID, Required: true}},
	Queue: "default", EnabledByDefault: true, Lease: true,
	KeyPrefix: "invoice-ready", KeyArgs: []string{"invoiceId"},
}

// newRunner is a runner of invoice with h as its handler.
func newRunner(h runner.Handler, sw switches) *runner.Runner {
	reg, err := message.NewRegistry(invoice)
	if err != nil {
		panic(err)
	}
	r, err := runner.New(runner.Config{
		Registry: reg, Handlers: map[string]runner.Handler{invoice.Name: h},
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
	env := message.Envelope{V: message.Version, MessageID: message.DeriveMessageID("example", invoiceID), Type: invoice.Name,
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
	notify := runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
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
	notify := runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
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
	notify := runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
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
	notify := runner.Typed(func(ctx context.Context, job runner.Job, a invoiceArgs) error {
		fmt.Println("invoice", a.InvoiceID)
		return nil
	})
	_, _ = newRunner(notify, nil).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record("inv-9")}})

	type wrongArgs struct {
		ID string `arg:"id"`
	}
	reg, _ := message.NewRegistry(invoice)
	_, err := runner.New(runner.Config{Registry: reg, Switch: switches{}, Markers: memstore.New(), Parker: queues{},
		Handlers: map[string]runner.Handler{invoice.Name: runner.Typed(func(context.Context, runner.Job, wrongArgs) error { return nil })}})
	fmt.Println(err != nil)
	// Output:
	// invoice inv-9
	// true
}

// While its kill switch is off, a job of a Park type is parked: re-sent with
// a delay, its handler not called, the record a success.
func ExampleRunner_Handle_parked() {
	notify := runner.HandlerFunc(func(ctx context.Context, job runner.Job) error {
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
	env, err := message.Decode([]byte(record("inv-11").Body))
	fmt.Println(env.Type, env.Args["invoiceId"], err)
	_, err = message.Decode([]byte(`{"v":1}`))
	fmt.Println(errors.Is(err, message.ErrMalformed))
	// Output:
	// billing.invoice-ready.v1 inv-11 <nil>
	// true
}

// The same caller and idempotency key always name the same job.
func ExampleDeriveMessageID() {
	a := message.DeriveMessageID("shop", "order-1-paid")
	b := message.DeriveMessageID("shop", "order-1-paid")
	c := message.DeriveMessageID("shop", "order-2-paid")
	fmt.Println(a == b, a == c)
	// Output: true false
}

// The hook at each step boundary: a test (or a fault-injection build) sees
// where a record is.
func ExampleConfig_atStep() {
	reg, _ := message.NewRegistry(invoice)
	r, _ := runner.New(runner.Config{
		Registry: reg, Switch: switches{}, Markers: memstore.New(), Parker: queues{},
		Handlers: map[string]runner.Handler{invoice.Name: runner.HandlerFunc(func(context.Context, runner.Job) error { return nil })},
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
