package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client a poller uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Poller is an event source mapping: it long-polls one queue, hands batches
// to a function, deletes the records that succeeded and leaves the batch item
// failures to the visibility timeout, so the queue's redrive policy works as
// in AWS.
type Poller struct {
	Client   SQSAPI
	QueueURL string
	QueueARN string
	Region   string
	Function Invoker
	// BatchSize is the most records per invocation (1–10).
	BatchSize int32
	// Window is the batching window: how long to gather records before
	// invoking with a partial batch.
	Window time.Duration
	Logger *slog.Logger
}

// Run polls until ctx is done.
func (p *Poller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := p.Once(ctx); err != nil && ctx.Err() == nil {
			p.Logger.Warn("poller", "queue", p.QueueARN, "error", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}
}

// Once receives one batch (waiting up to the batching window, at least one
// second), invokes the function and deletes the successes. It returns the
// number of records handed over.
func (p *Poller) Once(ctx context.Context) (int, error) {
	wait := max(int32(p.Window/time.Second), 1)
	out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         min(max(p.BatchSize, 1), 10),
		WaitTimeSeconds:             min(wait, 20),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil || len(out.Messages) == 0 {
		return 0, err
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(out.Messages))}
	for i, m := range out.Messages {
		ev.Records[i] = p.record(m)
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		return 0, err
	}
	respBody, err := p.Function.Invoke(ctx, payload)
	if err != nil {
		// The whole batch failed: every record returns after its visibility
		// timeout, as with a function error in AWS.
		return len(ev.Records), fmt.Errorf("invoke: %w", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(respBody, &resp); err != nil {
		return len(ev.Records), fmt.Errorf("function response %q: %w", truncate(string(respBody)), err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	var del []types.DeleteMessageBatchRequestEntry
	for i, m := range out.Messages {
		if !failed[aws.ToString(m.MessageId)] {
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
		}
	}
	if len(del) > 0 {
		if _, err := p.Client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: del}); err != nil {
			return len(ev.Records), fmt.Errorf("delete: %w", err)
		}
	}
	return len(ev.Records), nil
}

// record converts a received message to the event record Lambda builds.
func (p *Poller) record(m types.Message) events.SQSMessage {
	attrs := map[string]events.SQSMessageAttribute{}
	for k, v := range m.MessageAttributes {
		dt := aws.ToString(v.DataType)
		a := events.SQSMessageAttribute{DataType: dt, StringValue: v.StringValue, BinaryValue: v.BinaryValue}
		attrs[k] = a
	}
	return events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             m.Attributes,
		MessageAttributes:      attrs,
		EventSourceARN:         p.QueueARN,
		EventSource:            "aws:sqs",
		AWSRegion:              p.Region,
	}
}

func truncate(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return strings.TrimSpace(s)
}
