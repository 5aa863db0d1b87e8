package sqsqueue

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/engine"
)

// maxBatchEntries is how many entries one SQS batch call takes.
const maxBatchEntries = 10

// VisibilityAPI is the part of the SQS client that postpones records.
// ChangeMessageVisibilityBatch is authorised by sqs:ChangeMessageVisibility.
type VisibilityAPI interface {
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

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
func NewVisibility(client VisibilityAPI, urls map[string]string) *Visibility {
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
// records of one Lambda batch come from one queue: one call). One refused
// entry never drops the others: SQS answers per entry, and an entry that
// failed on SQS's side (not the sender's fault: an internal error) is
// tried once more on its own call. It returns nil when every change was
// made, else an *engine.VisibilityError naming each record whose change
// failed, by message id, with SQS's error code (never its message): those
// records keep the visibility timeout they had, the others are changed.
func (v *Visibility) ChangeVisibility(ctx context.Context, changes []engine.VisibilityChange) error {
	byQueue := map[string][]engine.VisibilityChange{}
	var order []string
	for _, c := range changes {
		arn := c.Message.EventSourceARN
		if _, ok := byQueue[arn]; !ok {
			order = append(order, arn)
		}
		byQueue[arn] = append(byQueue[arn], c)
	}
	failed := map[string]error{}
	for _, arn := range order {
		name := arn[strings.LastIndex(arn, ":")+1:]
		u := v.urls[name]
		if u == "" {
			for _, c := range byQueue[arn] {
				failed[c.Message.MessageId] = fmt.Errorf("queue: change visibility: no URL for the queue of %s", arn)
			}
			continue
		}
		for batch := range slices.Chunk(byQueue[arn], maxBatchEntries) {
			refused, retry, split := v.change(ctx, u, batch)
			if split {
				// The call was refused for what one entry asked: each on
				// its own call, so the others are made.
				refused, retry = map[string]error{}, nil
				for _, c := range batch {
					one, _, _ := v.change(ctx, u, []engine.VisibilityChange{c})
					maps.Copy(refused, one)
				}
			}
			if len(retry) > 0 {
				for _, c := range retry {
					delete(refused, c.Message.MessageId)
				}
				again, _, _ := v.change(ctx, u, retry)
				maps.Copy(refused, again)
			}
			for id, err := range refused {
				failed[id] = fmt.Errorf("queue: change visibility on %s: %w", name, err)
			}
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return &engine.VisibilityError{Failed: failed}
}

// change makes one ChangeMessageVisibilityBatch call for batch. refused
// are the records whose change failed, by message id (every record when
// the call itself failed); retry are those of them SQS failed on its own
// side, which a second call may make; split reports a call of several
// entries refused as a whole for what an entry asked (moto refuses the
// whole call for one entry past 12 h), which each entry on its own call
// tells apart.
func (v *Visibility) change(ctx context.Context, queueURL string, batch []engine.VisibilityChange) (refused map[string]error, retry []engine.VisibilityChange, split bool) {
	refused = map[string]error{}
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
	for i, c := range batch {
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(c.Message.ReceiptHandle),
			VisibilityTimeout: engine.VisibilitySeconds(c.Timeout),
		}
	}
	out, err := v.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err != nil {
		for _, c := range batch {
			refused[c.Message.MessageId] = err
		}
		return refused, nil, len(batch) > 1 && entryRefusal(err)
	}
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(batch) {
			// An id we did not send: no record to name, so every record
			// of the call is in doubt.
			for _, c := range batch {
				refused[c.Message.MessageId] = fmt.Errorf("SQS answered for an unknown entry %q", aws.ToString(f.Id))
			}
			return refused, nil, false
		}
		c := batch[i]
		refused[c.Message.MessageId] = &entryError{code: aws.ToString(f.Code), senderFault: f.SenderFault}
		if !f.SenderFault {
			retry = append(retry, c)
		}
	}
	return refused, retry, false
}

// entryRefusal reports an error of a whole call that one entry's request
// can cause: a timeout past the limit, a receipt handle no longer valid.
func entryRefusal(err error) bool {
	switch engine.ErrorCode(err) {
	case "InvalidParameterValue", "ReceiptHandleIsInvalid", "AWS.SimpleQueueService.MessageNotInflight", "MessageNotInflight":
		return true
	}
	return false
}

// entryError is one refused entry of a batch call: SQS's code, without its
// message.
type entryError struct {
	code        string
	senderFault bool
}

func (e *entryError) Error() string {
	if e.senderFault {
		return "refused: " + e.code
	}
	return "failed on SQS's side: " + e.code
}

// Redacted marks the text as ours (engine.Redact keeps it): a code, no
// provider message.
func (e *entryError) Redacted() bool { return true }
