//go:build integration

package deadletter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/message"
)

// refusingSender refuses every mail for good.
type refusingSender struct{}

func (refusingSender) Send(context.Context, email.Message) error {
	return engine.Permanent(errors.New("the provider refused the address"))
}

// TestDeadLetterKeepsItsJobsTrace: a job sent with an AWSTraceHeader and
// refused for good is sent to the DLQ by the worker with that header; the
// dlq function keeps it on the letter, and the redrive sends it again, so
// the redriven job is still in its trace.
func TestDeadLetterKeepsItsJobsTrace(t *testing.T) {
	const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	w := newWorld(t)
	w.PutUser(t, email.User{ID: "u-traced", Email: "traced@example.com", DisplayName: "T"})
	env := message.Envelope{V: 1, MessageID: message.NewMessageID(), Type: contract.Welcome.Name, Key: "welcome:u-traced",
		CorrelationID: "corr-traced", Args: map[string]string{"userId": "u-traced"}, EnqueuedAt: time.Now().UTC()}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	workQ := w.Queues[contract.QueueDefault]
	if _, err := w.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(workQ.URL), MessageBody: aws.String(string(body)),
		MessageSystemAttributes: map[string]sqstypes.MessageSystemAttributeValue{
			"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String(header)}}}); err != nil {
		t.Fatal(err)
	}
	if n := poll(t, w, workQ, w.worker(t, refusingSender{}).Handle); n != 1 {
		t.Fatalf("received %d", n)
	}
	dlqMsgs := testenv.Receive(t, w.SQS, w.DLQ.URL, 0)
	if len(dlqMsgs) != 1 || dlqMsgs[0].Attributes["AWSTraceHeader"] != header {
		t.Fatalf("DLQ %+v; want the letter with the job's AWSTraceHeader %s", dlqMsgs, header)
	}
	if resp, _ := w.consumer.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{toEvent(dlqMsgs[0], w.DLQ.ARN)}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	rec, err := w.store.Get(context.Background(), env.MessageID)
	if err != nil || rec.TraceHeader != header {
		t.Fatalf("letter %+v (%v); want its trace header kept", rec, err)
	}
	if _, err := w.redriver.Redrive(context.Background(), env.MessageID); err != nil {
		t.Fatal(err)
	}
	back := testenv.Receive(t, w.SQS, workQ.URL, 0)
	if len(back) != 1 || aws.ToString(back[0].Body) != string(body) || back[0].Attributes["AWSTraceHeader"] != header {
		t.Fatalf("redriven %+v; want the body with the job's AWSTraceHeader", back)
	}
}
