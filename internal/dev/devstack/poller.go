package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	smithytime "github.com/aws/smithy-go/time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client a poller uses. It has the form of
// the stores' client interfaces on purpose: each consumer names the calls
// it makes.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Poller is an event source mapping: it long-polls one queue, gathers a
// batch the way Lambda does (until BatchSize records or the batching window
// ends), hands it to a function, deletes the records that succeeded and
// leaves the batch item failures to the visibility timeout, so the queue's
// redrive policy works as in AWS.
type Poller struct {
	Client   SQSAPI
	QueueURL string
	QueueARN string
	Region   string
	Function Invoker
	// BatchSize is the most records per invocation (1–10).
	BatchSize int32
	// Window is MaximumBatchingWindowInSeconds: how long to keep gathering
	// records, from the first one, before invoking with a partial batch.
	Window time.Duration
	// IdleWait is how long one receive waits for a first record (20 s, the
	// longest long poll, when zero).
	IdleWait time.Duration
	Logger   *slog.Logger
}

// shortPoll is the pause between empty receives in the last second of a
// batching window (a long poll waits whole seconds).
const shortPoll = 50 * time.Millisecond

// Run polls until ctx is done.
func (p *Poller) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := p.Once(ctx); err != nil && ctx.Err() == nil {
			p.Logger.Warn("poller", "queue", p.QueueARN, "error", err)
			_ = smithytime.SleepWithContext(ctx, time.Second)
		}
	}
}

// Once gathers one batch, invokes the function with it and deletes the
// successes. It returns the number of records handed over (0 when none
// came within the idle wait).
func (p *Poller) Once(ctx context.Context) (int, error) {
	msgs, err := p.gather(ctx)
	if len(msgs) == 0 || ctx.Err() != nil {
		// Records received when ctx ended return after their visibility
		// timeout, as when a poller stops in AWS.
		return 0, err
	}
	if err != nil {
		p.Logger.Warn("poller: invoking with a partial batch", "queue", p.QueueARN, "error", err)
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	for i, m := range msgs {
		ev.Records[i] = p.record(m)
	}
	respBody, err := invoke(ctx, p.Function, ev)
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
	for i, m := range msgs {
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

// gather receives records until the batch is full or the batching window,
// counted from the first record, ends. A receive under way is never cut
// short (its records would be lost until their visibility timeout): near
// the end of the window it short-polls instead.
func (p *Poller) gather(ctx context.Context) ([]types.Message, error) {
	size := min(max(p.BatchSize, 1), 10)
	idle := p.IdleWait
	if idle <= 0 {
		idle = 20 * time.Second
	}
	msgs, err := p.receive(ctx, size, min(max(int32(idle/time.Second), 1), 20))
	if err != nil || len(msgs) == 0 || p.Window <= 0 {
		return msgs, err
	}
	end := time.Now().Add(p.Window)
	for int32(len(msgs)) < size {
		left := time.Until(end)
		if left <= 0 || ctx.Err() != nil {
			break
		}
		wait := int32(min(left/time.Second, 20))
		more, err := p.receive(ctx, size-int32(len(msgs)), wait)
		msgs = append(msgs, more...)
		if err != nil {
			return msgs, err
		}
		if len(more) == 0 && wait == 0 {
			_ = smithytime.SleepWithContext(ctx, min(left, shortPoll))
		}
	}
	return msgs, nil
}

func (p *Poller) receive(ctx context.Context, n, waitSeconds int32) ([]types.Message, error) {
	out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         n,
		WaitTimeSeconds:             waitSeconds,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
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
