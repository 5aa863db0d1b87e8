package sqsqueue

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/engine"
)

// A message that reaches its queue from a schedule carries the attributes
// of its body, as a sent one does.
func TestBodyAttributes(t *testing.T) {
	for _, tc := range []struct {
		name, body, typ, corr string
	}{
		{"envelope", `{"v":1,"messageId":"m","type":"email.welcome.v1","correlationId":"c-1","args":{}}`, "email.welcome.v1", "c-1"},
		{"tick", `{"v":1,"type":"tick.v1","schedule":"s","correlationId":"c-2"}`, "tick.v1", "c-2"},
		{"no correlation id", `{"type":"t"}`, "t", ""},
		{"not an object", `[1,2]`, "", ""},
		{"not JSON", `hello`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := BodyAttributes(tc.body)
			want := map[string]string{AttrType: tc.typ, AttrCorrelationID: tc.corr}
			for name, v := range want {
				a, ok := attrs[name]
				if v == "" {
					if ok {
						t.Errorf("%s = %v, want none", name, aws.ToString(a.StringValue))
					}
					continue
				}
				if !ok || aws.ToString(a.StringValue) != v || aws.ToString(a.DataType) != "String" {
					t.Errorf("%s = %+v, want String %q", name, a, v)
				}
			}
			if len(attrs) > 2 {
				t.Errorf("attrs %v: more than type and correlationId", attrs)
			}
		})
	}
}

// sentAPI records what was sent.
type sentAPI struct{ in []*sqs.SendMessageInput }

func (a *sentAPI) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	a.in = append(a.in, in)
	return &sqs.SendMessageOutput{}, nil
}

// A dead letter keeps its job's trace as its AWSTraceHeader: the one the
// runner gave the record (a scheduled job's, from its envelope), else the
// record's own; a record without one sends none.
func TestDeadLetterKeepsTheTrace(t *testing.T) {
	const recordHeader = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	const runnerHeader = "Root=1-67891233-abcdef012345678912345678;Parent=463ac35c9f6413ad;Sampled=1"
	api := &sentAPI{}
	s := New(api, nil, "https://sqs/dlq")
	traced := events.SQSMessage{MessageId: "m-1", Body: "{}", Attributes: map[string]string{"AWSTraceHeader": recordHeader}}
	for _, tc := range []struct {
		ctx  context.Context
		msg  events.SQSMessage
		want string
	}{
		{context.Background(), traced, recordHeader},
		{engine.WithTraceHeader(context.Background(), runnerHeader), events.SQSMessage{MessageId: "m-2", Body: "{}"}, runnerHeader},
		{context.Background(), events.SQSMessage{MessageId: "m-3", Body: "{}"}, ""},
	} {
		if err := s.DeadLetter(tc.ctx, tc.msg, "permanent: test"); err != nil {
			t.Fatal(err)
		}
		in := api.in[len(api.in)-1]
		got := aws.ToString(in.MessageSystemAttributes["AWSTraceHeader"].StringValue)
		if got != tc.want || (tc.want == "" && in.MessageSystemAttributes != nil) {
			t.Errorf("%s: AWSTraceHeader %q; want %q", tc.msg.MessageId, got, tc.want)
		}
	}
}
