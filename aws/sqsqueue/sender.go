// Package sqsqueue is the engine's Parker, DeadLetterer and Backoff on SQS.
//
// The Sender parks a received record whose switch is off (or that snoozed)
// by re-sending it, its body and message attributes unchanged, to the
// queue it came from with a delay, so it neither runs nor burns its
// receive count; and it dead-letters a record that can never succeed by
// sending it, unchanged, straight to the dead-letter queue with its
// reason, its source queue and its receive count as message attributes
// (a FIFO record keeps its group). The Visibility postpones transient
// retries with ChangeMessageVisibilityBatch; when SQS refuses some entries
// it returns an *engine.VisibilityError naming those records only. The
// function's role needs sqs:SendMessage on the queues and the dead-letter
// queue and sqs:ChangeMessageVisibility on the queues it consumes.
//
// Send sends a new message (Message), with the message attributes type
// and correlationId when it names them, so queues can be inspected and
// filtered without decoding bodies.
package sqsqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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

// The message attributes a job message carries (Attributes): its type and
// correlation id, so queues can be inspected and filtered without decoding
// bodies.
const (
	AttrType          = "type"
	AttrCorrelationID = "correlationId"
)

// The message attributes DeadLetter adds to a letter. A message moved to
// the dead-letter queue by the queue's redrive policy has none of them.
const (
	AttrReason       = "reason"       // why the message can never succeed
	AttrSourceQueue  = "sourceQueue"  // ARN of the queue it came from
	AttrReceiveCount = "receiveCount" // deliveries before it was dead-lettered
)

// maxAttributes is SQS's limit of message attributes on one message.
const maxAttributes = 10

// SQSAPI is the part of the SQS client the sender uses.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Message is one job message for a work queue.
type Message struct {
	// Queue is the queue's name, a key of the URLs the Sender was given.
	Queue string
	// Body is the message's body.
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
	urls   map[string]string
	dlqURL string
}

// New returns a sender to the work queues whose URLs urls maps by name, and
// to the dead-letter queue at dlqURL ("" for a sender that never
// dead-letters). A park goes back to the queue a record came from: the URL
// among urls whose queue its EventSourceARN names.
func New(client API, urls map[string]string, dlqURL string) *Sender {
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
		attrs[AttrType] = stringAttr(jobType)
	}
	if correlationID != "" {
		attrs[AttrCorrelationID] = stringAttr(correlationID)
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

// Park re-sends a received record unchanged (its body and message
// attributes, so under the same job) to the queue it came from after
// delay: it neither runs nor burns its receive count. The copy keeps the
// job's trace (engine.TraceHeader of ctx, else the record's own). The
// queue's URL must be among the Sender's URLs.
func (s *Sender) Park(ctx context.Context, msg events.SQSMessage, delay time.Duration) error {
	url, err := s.urlOf(msg.EventSourceARN)
	if err != nil {
		return fmt.Errorf("park %s: %w", msg.MessageId, err)
	}
	in := &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String(msg.Body), DelaySeconds: DelaySeconds(delay),
		MessageAttributes:       copyAttributes(msg.MessageAttributes, nil),
		MessageSystemAttributes: traceAttribute(cmp.Or(engine.TraceHeader(ctx), engine.RecordTraceHeader(msg))),
	}
	if _, err := s.client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("park %s: queue: send: %w", msg.MessageId, err)
	}
	return nil
}

// urlOf finds the URL of the queue an event source ARN names
// (arn:aws:sqs:<region>:<account>:<name>) among the Sender's URLs.
func (s *Sender) urlOf(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[5] == "" {
		return "", fmt.Errorf("queue: %q is not an SQS queue ARN", arn)
	}
	account, name := parts[4], parts[5]
	for _, u := range s.urls {
		segs := strings.Split(strings.TrimRight(u, "/"), "/")
		if len(segs) >= 2 && segs[len(segs)-1] == name && segs[len(segs)-2] == account {
			return u, nil
		}
	}
	return "", fmt.Errorf("queue: no URL for queue %s of account %s among the sender's", name, account)
}

// copyAttributes converts a received record's message attributes into
// what SendMessage takes, after first (which win), at most SQS's ten.
// Attributes named in first come first; the record's own follow in name
// order.
func copyAttributes(own map[string]events.SQSMessageAttribute, first map[string]types.MessageAttributeValue) map[string]types.MessageAttributeValue {
	out := make(map[string]types.MessageAttributeValue, len(first)+len(own))
	maps.Copy(out, first)
	for _, name := range slices.Sorted(maps.Keys(own)) {
		if len(out) >= maxAttributes {
			break
		}
		if _, taken := out[name]; taken {
			continue
		}
		a := own[name]
		v := types.MessageAttributeValue{DataType: aws.String(a.DataType), StringValue: a.StringValue, BinaryValue: a.BinaryValue}
		if a.DataType == "" {
			v.DataType = aws.String("String")
		}
		out[name] = v
	}
	return out
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
		AttrReason:       stringAttr(reason),
		AttrReceiveCount: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(engine.ReceiveCount(msg)))},
	}
	if msg.EventSourceARN != "" {
		attrs[AttrSourceQueue] = stringAttr(msg.EventSourceARN)
	}
	attrs = copyAttributes(msg.MessageAttributes, attrs)
	body := msg.Body
	if body == "" {
		body = "(empty body)" // SQS refuses an empty message; the reason says what happened
	}
	in := &sqs.SendMessageInput{
		QueueUrl: aws.String(s.dlqURL), MessageBody: aws.String(body), MessageAttributes: attrs,
		MessageSystemAttributes: traceAttribute(cmp.Or(engine.TraceHeader(ctx), engine.RecordTraceHeader(msg))),
	}
	if group := msg.Attributes["MessageGroupId"]; group != "" {
		// A FIFO queue's dead-letter queue is FIFO too: the letter keeps
		// its group, and its SQS message id dedups a repeated send.
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(group), aws.String(msg.MessageId)
	}
	_, err := s.client.SendMessage(ctx, in)
	if err != nil {
		return fmt.Errorf("queue: dead-letter %s: %w", msg.MessageId, err)
	}
	return nil
}
