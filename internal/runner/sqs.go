package runner

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/contract"
)

// SQSAPI is the part of the SQS client the queues adapter uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Queues parks jobs on their work queues and sends permanent failures to the
// dead-letter queue. It implements Parker and DeadLetterer.
type Queues struct {
	client SQSAPI
	urls   map[contract.Queue]string
	dlqURL string
}

// NewQueues returns the adapter for the given work queue URLs and DLQ URL.
func NewQueues(client SQSAPI, urls map[contract.Queue]string, dlqURL string) *Queues {
	return &Queues{client: client, urls: urls, dlqURL: dlqURL}
}

func stringAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

// Park re-sends body to the type's queue with a delivery delay. The body is
// unchanged, so the messageId (the job id) is the same.
func (q *Queues) Park(ctx context.Context, queue contract.Queue, env contract.Envelope, body string, delay time.Duration) error {
	url, ok := q.urls[queue]
	if !ok || url == "" {
		return fmt.Errorf("runner: park: no URL for queue %q", queue)
	}
	_, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(url),
		MessageBody:  aws.String(body),
		DelaySeconds: int32(min(delay, DefaultParkDelay) / time.Second),
		MessageAttributes: map[string]types.MessageAttributeValue{
			contract.AttrType:          stringAttr(env.Type),
			contract.AttrCorrelationID: stringAttr(env.CorrelationID),
		},
	})
	if err != nil {
		return fmt.Errorf("runner: park %s on %s: %w", env.MessageID, queue, err)
	}
	return nil
}

// DeadLetter sends the raw body of msg to the DLQ with the reason, the source
// queue and the receive count as message attributes (and the type and
// correlation id when the message carried them).
func (q *Queues) DeadLetter(ctx context.Context, msg events.SQSMessage, reason string) error {
	if q.dlqURL == "" {
		return fmt.Errorf("runner: dead-letter %s: no DLQ URL", msg.MessageId)
	}
	const maxReason = 1024
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	attrs := map[string]types.MessageAttributeValue{
		contract.AttrReason:       stringAttr(reason),
		contract.AttrReceiveCount: {DataType: aws.String("Number"), StringValue: aws.String(strconv.Itoa(receiveCount(msg)))},
	}
	if msg.EventSourceARN != "" {
		attrs[contract.AttrSourceQueue] = stringAttr(msg.EventSourceARN)
	}
	for _, name := range []string{contract.AttrType, contract.AttrCorrelationID} {
		if a, ok := msg.MessageAttributes[name]; ok && a.StringValue != nil && *a.StringValue != "" {
			attrs[name] = stringAttr(*a.StringValue)
		}
	}
	body := msg.Body
	if body == "" {
		body = "(empty body)" // SQS refuses an empty message; the reason says what happened
	}
	_, err := q.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(q.dlqURL), MessageBody: aws.String(body), MessageAttributes: attrs,
	})
	if err != nil {
		return fmt.Errorf("runner: dead-letter %s: %w", msg.MessageId, err)
	}
	return nil
}
