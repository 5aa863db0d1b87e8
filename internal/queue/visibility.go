package queue

import (
	"context"
	"errors"
	"fmt"
	"github.com/runstwice/runstwice/engine"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/contract"
)

// MaxVisibility is SQS's largest visibility timeout (12 hours).
const MaxVisibility = engine.MaxVisibility

// maxBatchEntries is how many entries one SQS batch call takes.
const maxBatchEntries = 10

// VisibilityAPI is the part of the SQS client that postpones records.
// ChangeMessageVisibilityBatch is authorised by sqs:ChangeMessageVisibility.
type VisibilityAPI interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// VisibilityChange postpones one received record (engine.VisibilityChange).
type VisibilityChange = engine.VisibilityChange

// Visibility changes the visibility timeout of records a worker received
// from the work queues, so that a retry comes back when it is asked to
// rather than after the queue's visibility timeout.
type Visibility struct {
	client VisibilityAPI
	// urls maps a queue's name (the last part of its ARN and of its URL)
	// to its URL.
	urls map[string]string
}

// NewVisibility returns a Visibility of the work queues at urls.
func NewVisibility(client VisibilityAPI, urls map[contract.Queue]string) *Visibility {
	byName := map[string]string{}
	for _, u := range urls {
		if p, err := url.Parse(u); err == nil && p.Path != "" {
			byName[path.Base(p.Path)] = u
		}
	}
	return &Visibility{client: client, urls: byName}
}

// ChangeVisibility sets each record's visibility timeout, with one
// ChangeMessageVisibilityBatch call per source queue and ten records (the
// records of one Lambda batch come from one queue: one call). It returns
// every failure at once: a record whose change failed keeps the visibility
// timeout it had.
func (v *Visibility) ChangeVisibility(ctx context.Context, changes []VisibilityChange) error {
	byQueue := map[string][]VisibilityChange{}
	var order []string
	for _, c := range changes {
		arn := c.Message.EventSourceARN
		if _, ok := byQueue[arn]; !ok {
			order = append(order, arn)
		}
		byQueue[arn] = append(byQueue[arn], c)
	}
	var errs []error
	for _, arn := range order {
		name := arn[strings.LastIndex(arn, ":")+1:]
		u := v.urls[name]
		if u == "" {
			errs = append(errs, fmt.Errorf("queue: change visibility: no URL for the queue of %s", arn))
			continue
		}
		for batch := range slices.Chunk(byQueue[arn], maxBatchEntries) {
			if err := v.change(ctx, u, batch); err != nil {
				errs = append(errs, fmt.Errorf("queue: change visibility on %s: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (v *Visibility) change(ctx context.Context, queueURL string, batch []VisibilityChange) error {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
	for i, c := range batch {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(c.Message.ReceiptHandle),
			VisibilityTimeout: VisibilitySeconds(c.Timeout),
		}
	}
	out, err := v.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err != nil {
		return err
	}
	var failed []string
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		id := aws.ToString(f.Id)
		if err == nil && i >= 0 && i < len(batch) {
			id = batch[i].Message.MessageId
		}
		failed = append(failed, id+" ("+aws.ToString(f.Code)+")")
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d records refused: %s", len(failed), len(batch), strings.Join(failed, ", "))
	}
	return nil
}

// VisibilitySeconds is d as an SQS visibility timeout (engine.VisibilitySeconds).
func VisibilitySeconds(d time.Duration) int32 { return engine.VisibilitySeconds(d) }
