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
package sqsqueue

import (
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/queue"
)

// API is the part of the SQS client (*sqs.Client) the sender uses.
type API = queue.SQSAPI

// Sender parks and dead-letters (engine.Parker, engine.DeadLetterer).
type Sender = queue.Sender

// VisibilityAPI is the part of the SQS client the back-off uses.
type VisibilityAPI = queue.VisibilityAPI

// Visibility postpones retries (engine.Backoff).
type Visibility = queue.Visibility

// New returns a sender to the work queues at urls (by the engine's queue
// names) and the dead-letter queue at dlqURL.
func New(client API, urls map[engine.Queue]string, dlqURL string) *Sender {
	return queue.New(client, urls, dlqURL)
}

// NewVisibility returns the back-off on the work queues at urls.
func NewVisibility(client VisibilityAPI, urls map[engine.Queue]string) *Visibility {
	return queue.NewVisibility(client, urls)
}

var (
	_ engine.Parker       = (*Sender)(nil)
	_ engine.DeadLetterer = (*Sender)(nil)
	_ engine.Backoff      = (*Visibility)(nil)
)
