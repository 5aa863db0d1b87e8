package devstack

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// backlogAttributes are the counts a queue's backlog adds up: visible, in
// flight and delayed messages.
var backlogAttributes = []sqstypes.QueueAttributeName{
	sqstypes.QueueAttributeNameApproximateNumberOfMessages,
	sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
}

// Backlog counts the messages in the queues at urls: visible, in flight
// and delayed. Zero means the workers have nothing left to do.
func Backlog(ctx context.Context, client *sqs.Client, urls []string) (int, error) {
	total := 0
	for _, u := range urls {
		out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: backlogAttributes})
		if err != nil {
			return 0, fmt.Errorf("devstack: the backlog of %s: %w", u, err)
		}
		for _, name := range backlogAttributes {
			n, _ := strconv.Atoi(out.Attributes[string(name)])
			total += n
		}
	}
	return total, nil
}

// WorkQueueURLs are the URLs of the stack's work queues and its DLQ: where
// a job waits while the workers have it.
func (l *Local) WorkQueueURLs() []string {
	var urls []string
	for _, id := range append(slices.Sorted(maps.Values(l.Stack.Template().WorkQueueIDs())), "DeadLetterQueue") {
		if p, ok := l.Stack.Physical(id); ok && p.URL != "" {
			urls = append(urls, p.URL)
		}
	}
	return urls
}
