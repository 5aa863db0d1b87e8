// Package sqsqueue is the engine's Parker, DeadLetterer and Backoff on SQS.
//
// The Sender parks a job whose switch is off by re-sending its body to its
// work queue with a delay under the same messageId (so it neither runs nor
// burns its receive count), and dead-letters a job that can never succeed
// by sending it straight to the dead-letter queue with its reason in the
// message attributes. The Visibility postpones transient retries with
// ChangeMessageVisibilityBatch; when SQS refuses some entries it returns
// an *engine.VisibilityError naming those records only. The function's role needs sqs:SendMessage
// on the queues and sqs:ChangeMessageVisibility on the work queues.
//
// Every message it sends carries the message attributes type and
// correlationId, so queues can be inspected and filtered without decoding
// bodies.
package sqsqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/engine"
)

// DelaySeconds is d as SQS DelaySeconds: whole seconds, rounded up, so a
// message never becomes visible before it is due (a delay of 0.4 s is 1 s,
// never 0), between 0 and MaxDelay. Every message the sender sends (a new
// job, a park, a fan-out's job, a redrive) goes through it.
func DelaySeconds(d time.Duration) int32 {
	d = min(max(d, 0), engine.MaxDelay)
	return int32((d + time.Second - 1) / time.Second)
}

// MaxReason bounds the reason attribute of a dead letter.
const MaxReason = 1024

// SQSAPI is the part of the SQS client the sender uses.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Message is one job message for a work queue.
type Message struct {
	Queue engine.Queue
	// Body is the encoded envelope; its messageId is the job id.
	Body          string
	Type          string
	CorrelationID string
	// Delay postpones delivery (at most MaxDelay), rounded up to whole
	// seconds (DelaySeconds).
	Delay time.Duration
	// TraceHeader is the X-Ray trace header to carry to the worker (the
	// AWSTraceHeader system attribute), "" for none.
	TraceHeader string
}

// Sender sends job messages. Its zero value is not usable; call New.
type Sender struct {
	client API
	urls   map[engine.Queue]string
	dlqURL string
}

// New returns a sender to the work queues at urls and the dead-letter queue
// at dlqURL ("" for a sender that never dead-letters, such as enqueue's).
func New(client API, urls map[engine.Queue]string, dlqURL string) *Sender {
	return &Sender{client: client, urls: urls, dlqURL: dlqURL}
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// Attributes are the message attributes every job message carries: its
// type and correlation id (each left out when empty).
func Attributes(jobType, correlationID string) map[string]types.MessageAttributeValue {
	attrs := map[string]types.MessageAttributeValue{}
	if jobType != "" {
		attrs[engine.AttrType] = stringAttr(jobType)
	}
	if correlationID != "" {
		attrs[engine.AttrCorrelationID] = stringAttr(correlationID)
	}
	return attrs
}

// BodyAttributes are the Attributes of a message whose body is body: the
// type and correlationId it carries (a job envelope, a tick), none of
// either when it is not a JSON object. It is what a message that reaches a
// queue without the sender's attributes (a schedule's input) is sent with
// by the local scheduler.
func BodyAttributes(body string) map[string]types.MessageAttributeValue {
	var fields struct {
		Type          string `json:"type"`
		CorrelationID string `json:"correlationId"`
	}
	_ = json.Unmarshal([]byte(body), &fields) // not an object: no attributes
	return Attributes(fields.Type, fields.CorrelationID)
}

// Send sends m to its work queue.
func (s *Sender) Send(ctx context.Context, m Message) error {
	url := s.urls[m.Queue]
	if url == "" {
		return fmt.Errorf("queue: no URL for queue %q", m.Queue)
	}
	attrs := Attributes(m.Type, m.CorrelationID)
	in := &sqs.SendMessageInput{
		QueueUrl:          aws.String(url),
		MessageBody:       aws.String(m.Body),
		DelaySeconds:      DelaySeconds(m.Delay),
		MessageAttributes: attrs,
	}
	in.MessageSystemAttributes = traceAttribute(m.TraceHeader)
	_, err := s.client.SendMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("queue: send to %s: %w", m.Queue, err)
	}
	return nil
}

// traceAttribute is the AWSTraceHeader system attribute of an X-Ray trace
// header, nil for "".
func traceAttribute(header string) map[string]types.MessageSystemAttributeValue {
	if header == "" {
		return nil
	}
	return map[string]types.MessageSystemAttributeValue{
		string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(header)},
	}
}

// Park re-sends a disabled job's body unchanged (so under the same job id) to
// its queue after delay: it neither runs nor burns its receive count.
func (s *Sender) Park(ctx context.Context, queue engine.Queue, env engine.Envelope, body string, delay time.Duration) error {
	err := s.Send(ctx, Message{Queue: queue, Body: body, Type: env.Type, CorrelationID: env.CorrelationID, Delay: delay,
		TraceHeader: engine.TraceHeader(ctx)})
	if err != nil {
		return fmt.Errorf("park %s: %w", env.MessageID, err)
	}
	return nil
}

// DeadLetter sends the raw body of msg to the dead-letter queue with the
// reason, the source queue and the receive count as message attributes (and
// the type and correlation id when the message carried them), and the
// job's trace as its AWSTraceHeader: the trace the runner gave the record
// (engine.TraceHeader of ctx), else the record's own, so the letter, the
// dlq function's span and a redrive stay in the job's trace. The reason
// must carry no personal data: it is stored and shown.
func (s *Sender) DeadLetter(ctx context.Context, msg events.SQSMessage, reason string) error {
	if s.dlqURL == "" {
		return fmt.Errorf("queue: dead-letter %s: no DLQ URL", msg.MessageId)
	}
	if len(reason) > MaxReason {
		reason = reason[:MaxReason]
	}
	attrs := map[string]types.MessageAttributeValue{
		engine.AttrReason:       stringAttr(reason),
		engine.AttrReceiveCount: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(engine.ReceiveCount(msg)))},
	}
	if msg.EventSourceARN != "" {
		attrs[engine.AttrSourceQueue] = stringAttr(msg.EventSourceARN)
	}
	for _, name := range []string{engine.AttrType, engine.AttrCorrelationID} {
		if a, ok := msg.MessageAttributes[name]; ok && a.StringValue != nil && *a.StringValue != "" {
			attrs[name] = stringAttr(*a.StringValue)
		}
	}
	body := msg.Body
	if body == "" {
		body = "(empty body)" // SQS refuses an empty message; the reason says what happened
	}
	_, err := s.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(s.dlqURL), MessageBody: aws.String(body), MessageAttributes: attrs,
		MessageSystemAttributes: traceAttribute(cmp.Or(engine.TraceHeader(ctx), engine.RecordTraceHeader(msg))),
	})
	if err != nil {
		return fmt.Errorf("queue: dead-letter %s: %w", msg.MessageId, err)
	}
	return nil
}
