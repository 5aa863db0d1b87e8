package engine_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/runstwice/runstwice/engine/memstore"
	"io"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/testkit"
)

// A job type is its declaration and its handler, side by side. The handler
// loads what its effect needs and does it; the runner does the rest (kill
// switch, peek, lease, claim, parking, retries, the DLQ). Delivered twice,
// the effect happens once.
func Example() {
	invoice := contract.JobType{
		Name:  "billing.invoice-ready.v1",
		Args:  []contract.ArgSpec{{Name: "invoiceId", Format: contract.FormatID, Required: true}},
		Queue: contract.QueueDefault, EnabledByDefault: true, Lease: true,
		KeyPrefix: "invoice-ready", KeyArgs: []string{"invoiceId"},
	}
	notify := engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
		fmt.Println("notifying about invoice", job.Envelope.Args["invoiceId"])
		return nil
	})
	reg, _ := contract.NewRegistry(invoice)
	q := &testkit.Queues{}
	r, err := engine.New(engine.Config{
		Registry: reg, Handlers: map[string]engine.Handler{invoice.Name: notify},
		Toggles: &testkit.Switches{}, Markers: memstore.New(), Parker: q, DeadLetterer: q,
		Logger: obs.NewLogger(io.Discard, "error"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := testkit.Envelope(invoice.Name, map[string]string{"invoiceId": "inv-42"}).Encode()
	msg := testkit.RawRecord(string(body), 1)
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
// retried until SQS gives up. (Each example declares its job type and builds
// its runner again, on purpose: the docs show every example whole.)
func ExamplePermanent() {
	invoice := contract.JobType{
		Name:  "billing.invoice-ready.v1",
		Args:  []contract.ArgSpec{{Name: "invoiceId", Format: contract.FormatID, Required: true}},
		Queue: contract.QueueDefault, EnabledByDefault: true, KeyPrefix: "invoice-ready", KeyArgs: []string{"invoiceId"},
	}
	notify := engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
		return engine.Permanent(errors.New("invoice " + job.Envelope.Args["invoiceId"] + " has no customer"))
	})
	reg, _ := contract.NewRegistry(invoice)
	q := &testkit.Queues{}
	r, _ := engine.New(engine.Config{
		Registry: reg, Handlers: map[string]engine.Handler{invoice.Name: notify},
		Toggles: &testkit.Switches{}, Markers: memstore.New(), Parker: q, DeadLetterer: q,
		Logger: obs.NewLogger(io.Discard, "error"),
	})
	body, _ := testkit.Envelope(invoice.Name, map[string]string{"invoiceId": "inv-7"}).Encode()
	msg := testkit.RawRecord(string(body), 1)
	resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}})
	reason, _ := q.DeadReason(msg.MessageId)
	fmt.Println("retry:", len(resp.BatchItemFailures))
	fmt.Println("dead-lettered:", reason)
	// Output:
	// retry: 0
	// dead-lettered: permanent: invoice inv-7 has no customer
}
