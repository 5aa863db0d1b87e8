package enqueue

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/contract"
)

// SQSAPI is the part of the SQS client the queue uses.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SQSQueue sends job messages to the work queues.
type SQSQueue struct {
	Client SQSAPI
	// URLs maps each work queue to its queue URL.
	URLs map[contract.Queue]string
}

// Send sends m to its queue with the message attributes type and
// correlationId and m.Delay as DelaySeconds.
func (q SQSQueue) Send(ctx context.Context, m Message) error {
	url := q.URLs[m.Queue]
	if url == "" {
		return fmt.Errorf("enqueue: no URL for queue %q", m.Queue)
	}
	_, err := q.Client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(url),
		MessageBody:  aws.String(m.Body),
		DelaySeconds: int32(m.Delay.Seconds()),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			contract.AttrType:          {DataType: aws.String("String"), StringValue: aws.String(m.Type)},
			contract.AttrCorrelationID: {DataType: aws.String("String"), StringValue: aws.String(m.CorrelationID)},
		},
	})
	if err != nil {
		return fmt.Errorf("enqueue: send to %s queue: %w", m.Queue, err)
	}
	return nil
}
