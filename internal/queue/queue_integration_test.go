//go:build integration

package queue_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/queue"
)

// What the sender puts on the wire: the body unchanged, the type and
// correlation id as attributes, the delay, the trace header as a system
// attribute; a dead letter carries its reason, receive count and source.
func TestSender(t *testing.T) {
	client := testenv.SQS(t)
	work := testenv.NewQueue(t, client, "work", nil)
	dlq := testenv.NewQueue(t, client, "dlq", nil)
	s := queue.New(client, map[contract.Queue]string{contract.QueueDefault: work.URL}, dlq.URL)
	ctx := context.Background()

	const trace = "Root=1-5759e988-bd862e3fe1be46a994272793"
	if err := s.Send(ctx, queue.Message{Queue: contract.QueueDefault, Body: `{"v":1}`, Type: "email.welcome.v1", CorrelationID: "c-1", TraceHeader: trace}); err != nil {
		t.Fatal(err)
	}
	got := testenv.Receive(t, client, work.URL, time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != `{"v":1}` || aws.ToString(got[0].MessageAttributes[contract.AttrType].StringValue) != "email.welcome.v1" ||
		aws.ToString(got[0].MessageAttributes[contract.AttrCorrelationID].StringValue) != "c-1" || got[0].Attributes["AWSTraceHeader"] != trace {
		t.Fatalf("sent %+v", got)
	}

	// A park is delayed: nothing is visible at once.
	env := contract.Envelope{MessageID: "m-1", Type: "email.welcome.v1", CorrelationID: "c-2"}
	if err := s.Park(ctx, contract.QueueDefault, env, `{"v":2}`, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := testenv.Receive(t, client, work.URL, 0); len(got) != 0 {
		t.Fatalf("a parked message was visible at once: %+v", got)
	}
	if got := testenv.Receive(t, client, work.URL, 5*time.Second); len(got) != 1 || aws.ToString(got[0].Body) != `{"v":2}` {
		t.Fatalf("parked message after its delay: %+v", got)
	}

	msg := events.SQSMessage{MessageId: "sqs-1", Body: "", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:critical",
		Attributes:        map[string]string{"ApproximateReceiveCount": "3"},
		MessageAttributes: map[string]events.SQSMessageAttribute{contract.AttrType: {DataType: "String", StringValue: aws.String("email.welcome.v1")}}}
	if err := s.DeadLetter(ctx, msg, "permanent: bad args"); err != nil {
		t.Fatal(err)
	}
	got = testenv.Receive(t, client, dlq.URL, time.Second)
	if len(got) != 1 {
		t.Fatalf("%d dead letters", len(got))
	}
	a := got[0].MessageAttributes
	if aws.ToString(a[contract.AttrReason].StringValue) != "permanent: bad args" || aws.ToString(a[contract.AttrReceiveCount].StringValue) != strconv.Itoa(3) ||
		aws.ToString(a[contract.AttrSourceQueue].StringValue) != msg.EventSourceARN || aws.ToString(a[contract.AttrType].StringValue) != "email.welcome.v1" ||
		aws.ToString(got[0].Body) != "(empty body)" {
		t.Fatalf("dead letter %+v %v", got[0], a)
	}
	if err := s.Send(ctx, queue.Message{Queue: contract.QueueBulk, Body: "x"}); err == nil {
		t.Fatal("sent to a queue with no URL")
	}
}
