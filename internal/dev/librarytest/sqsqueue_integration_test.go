//go:build integration

package librarytest_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// What the sender puts on the wire: the body unchanged, the type and
// correlation id as attributes, the delay, the trace header as a system
// attribute; a dead letter carries its reason, receive count and source.
func TestSender(t *testing.T) {
	client := testenv.SQS(t)
	work := testenv.NewQueue(t, client, "work", nil)
	dlq := testenv.NewQueue(t, client, "dlq", nil)
	s := sqsqueue.New(client, map[string]string{"default": work.URL}, dlq.URL)
	ctx := context.Background()

	const trace = "Root=1-5759e988-bd862e3fe1be46a994272793"
	if err := s.Send(ctx, sqsqueue.Message{Queue: "default", Body: `{"v":1}`, Type: "email.welcome.v1", CorrelationID: "c-1", TraceHeader: trace}); err != nil {
		t.Fatal(err)
	}
	got := testenv.Receive(t, client, work.URL, time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != `{"v":1}` || aws.ToString(got[0].MessageAttributes[sqsqueue.AttrType].StringValue) != "email.welcome.v1" ||
		aws.ToString(got[0].MessageAttributes[sqsqueue.AttrCorrelationID].StringValue) != "c-1" || got[0].Attributes["AWSTraceHeader"] != trace {
		t.Fatalf("sent %+v", got)
	}

	// A park is delayed: nothing is visible at once. It goes back to the
	// queue the record came from, with the record's own attributes.
	rec := events.SQSMessage{MessageId: "sqs-0", Body: `{"v":2}`, EventSourceARN: work.ARN,
		MessageAttributes: map[string]events.SQSMessageAttribute{"tenant": {DataType: "String", StringValue: aws.String("t-9")}}}
	if err := s.Park(ctx, rec, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Receive(t, client, work.URL, 0); len(got) != 0 {
		t.Fatalf("a parked message was visible at once: %+v", got)
	}
	if got := testenv.Receive(t, client, work.URL, 5*time.Second); len(got) != 1 || aws.ToString(got[0].Body) != `{"v":2}` ||
		aws.ToString(got[0].MessageAttributes["tenant"].StringValue) != "t-9" {
		t.Fatalf("parked message after its delay: %+v", got)
	}

	msg := events.SQSMessage{MessageId: "sqs-1", Body: "", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:critical",
		Attributes:        map[string]string{"ApproximateReceiveCount": "3"},
		MessageAttributes: map[string]events.SQSMessageAttribute{sqsqueue.AttrType: {DataType: "String", StringValue: aws.String("email.welcome.v1")}}}
	if err := s.DeadLetter(ctx, msg, "permanent: bad args"); err != nil {
		t.Fatal(err)
	}
	got = testenv.Receive(t, client, dlq.URL, time.Second)
	if len(got) != 1 {
		t.Fatalf("%d dead letters", len(got))
	}
	a := got[0].MessageAttributes
	if aws.ToString(a[sqsqueue.AttrReason].StringValue) != "permanent: bad args" || aws.ToString(a[sqsqueue.AttrReceiveCount].StringValue) != strconv.Itoa(3) ||
		aws.ToString(a[sqsqueue.AttrSourceQueue].StringValue) != msg.EventSourceARN || aws.ToString(a[sqsqueue.AttrType].StringValue) != "email.welcome.v1" ||
		aws.ToString(got[0].Body) != "(empty body)" {
		t.Fatalf("dead letter %+v %v", got[0], a)
	}
	if err := s.Send(ctx, sqsqueue.Message{Queue: "bulk", Body: "x"}); err == nil {
		t.Fatal("sent to a queue with no URL")
	}
}

// ChangeVisibility hides each received record for its own timeout, with
// one batch call for the batch, and names the records SQS refused.
func TestChangeVisibility(t *testing.T) {
	client := testenv.SQS(t)
	counter := testenv.NewCallCounter()
	counted := sqs.NewFromConfig(testenv.Moto(t).Config(counter.Option))
	work := testenv.NewQueue(t, client, "work", map[string]string{"VisibilityTimeout": "1"})
	s := sqsqueue.New(client, map[string]string{"default": work.URL}, "")
	ctx := context.Background()
	for _, body := range []string{"soon", "late"} {
		if err := s.Send(ctx, sqsqueue.Message{Queue: "default", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	var got []sqstypes.Message
	for len(got) < 2 {
		more := testenv.Receive(t, client, work.URL, time.Second)
		if len(more) == 0 {
			t.Fatalf("received %d of 2 messages", len(got))
		}
		got = append(got, more...)
	}
	timeouts := map[string]time.Duration{"soon": 0, "late": 30 * time.Second}
	var changes []engine.VisibilityChange
	for _, m := range got {
		rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), EventSourceARN: work.ARN}
		changes = append(changes, engine.VisibilityChange{Message: rec, Timeout: timeouts[aws.ToString(m.Body)]})
	}
	v := sqsqueue.NewVisibility(counted, map[string]string{"default": work.URL})
	if err := v.ChangeVisibility(ctx, changes); err != nil {
		t.Fatal(err)
	}
	if n := counter.Get("SQS.ChangeMessageVisibilityBatch"); n != 1 {
		t.Errorf("%d ChangeMessageVisibilityBatch calls for one batch, want 1 (%s)", n, counter)
	}
	// The queue's own timeout (1 s) has passed: only the record set to 0
	// is back, the one set to 30 s is still hidden.
	time.Sleep(1500 * time.Millisecond)
	back := testenv.Receive(t, client, work.URL, time.Second)
	if len(back) != 1 || aws.ToString(back[0].Body) != "soon" {
		t.Fatalf("visible after the change: %d messages (%v), want only soon", len(back), back)
	}

	// A record of a queue the sender has no URL for, and a stale receipt
	// handle: both named, neither silent.
	stale := changes[0]
	stale.Message.ReceiptHandle = "not-a-receipt-handle"
	err := v.ChangeVisibility(ctx, []engine.VisibilityChange{stale, {Message: events.SQSMessage{MessageId: "x", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:elsewhere"}}})
	if err == nil || !strings.Contains(err.Error(), "elsewhere") || !strings.Contains(err.Error(), stale.Message.MessageId) {
		t.Fatalf("error %v; want both refusals named", err)
	}
}

// On moto, as on SQS, a visibility change past 12 h is refused per entry
// (moto counts the 12 h from the send, SQS from the receipt: either way
// exactly 12 h right after a receive is refused). The refusal names that
// record only; the others of the same batch call are hidden as asked, and
// engine.MaxBackoff, the longest a back-off asks, is accepted.
func TestChangeVisibilityPastTwelveHoursRefusesOnlyThatRecord(t *testing.T) {
	client := testenv.SQS(t)
	work := testenv.NewQueue(t, client, "work", map[string]string{"VisibilityTimeout": "1"})
	s := sqsqueue.New(client, map[string]string{"default": work.URL}, "")
	ctx := context.Background()
	bodies := []string{"short", "twelve-hours", "max-backoff"}
	for _, body := range bodies {
		if err := s.Send(ctx, sqsqueue.Message{Queue: "default", Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	var got []sqstypes.Message
	for len(got) < len(bodies) {
		more := testenv.Receive(t, client, work.URL, time.Second)
		if len(more) == 0 {
			t.Fatalf("received %d of %d messages", len(got), len(bodies))
		}
		got = append(got, more...)
	}
	timeouts := map[string]time.Duration{"short": 30 * time.Second, "twelve-hours": engine.MaxVisibility, "max-backoff": engine.MaxBackoff}
	var changes []engine.VisibilityChange
	ids := map[string]string{}
	for _, m := range got {
		rec := events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), EventSourceARN: work.ARN}
		changes = append(changes, engine.VisibilityChange{Message: rec, Timeout: timeouts[aws.ToString(m.Body)]})
		ids[aws.ToString(m.Body)] = rec.MessageId
	}
	time.Sleep(10 * time.Millisecond) // moto counts from the send: let a little time pass
	err := sqsqueue.NewVisibility(client, map[string]string{"default": work.URL}).ChangeVisibility(ctx, changes)
	var ve *engine.VisibilityError
	if !errors.As(err, &ve) || len(ve.Failed) != 1 || ve.Failed[ids["twelve-hours"]] == nil {
		t.Fatalf("error %v; want only the 12 h change (%s) refused", err, ids["twelve-hours"])
	}
	// The queue's own timeout (1 s) has passed: the refused record is back,
	// the two others are still hidden.
	time.Sleep(1500 * time.Millisecond)
	back := testenv.Receive(t, client, work.URL, time.Second)
	if len(back) != 1 || aws.ToString(back[0].Body) != "twelve-hours" {
		var names []string
		for _, m := range back {
			names = append(names, aws.ToString(m.Body))
		}
		t.Fatalf("visible after the changes: %v; want only twelve-hours", names)
	}
}
