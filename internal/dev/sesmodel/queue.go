package sesmodel

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
)

// simMessage is one message of a simulated queue.
type simMessage struct {
	id        string
	body      string
	jobType   string
	receives  int
	visibleAt time.Time
	receipt   string // the last receive's handle
	gone      bool   // deleted, or moved to the dead-letter queue
}

// queue is an SQS standard queue on the bubble's clock: visibility timeout,
// delays, receive counts, and the redrive policy's move to the dead-letter
// queue when a message is received past its maxReceiveCount. Every call
// takes the model's SQS latency.
type queue struct {
	name        string
	arn         string
	visibility  time.Duration
	maxReceives int
	latency     time.Duration

	mu       sync.Mutex
	msgs     []*simMessage // in send order; gone ones are dropped now and then
	byHandle map[string]*simMessage
	seq      int
	changed  chan struct{} // closed and replaced whenever a message is sent
	moved    []*simMessage // moved by the redrive policy
	live     int
}

func newQueue(name string, visibility time.Duration, maxReceives int, latency time.Duration) *queue {
	return &queue{name: name, arn: "arn:aws:sqs:us-east-1:123456789012:model-" + name, visibility: visibility,
		maxReceives: maxReceives, latency: latency, byHandle: map[string]*simMessage{}, changed: make(chan struct{})}
}

// send adds a message visible after delay (SQS's DelaySeconds: whole
// seconds, at most 15 minutes).
func (q *queue) send(body, jobType string, delay time.Duration) {
	time.Sleep(q.latency)
	delay = time.Duration(min(max(delay, 0), engine.MaxDelay)/time.Second) * time.Second
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.msgs = append(q.msgs, &simMessage{id: fmt.Sprintf("%s-%d", q.name, q.seq), body: body, jobType: jobType, visibleAt: time.Now().Add(delay)})
	q.live++
	close(q.changed)
	q.changed = make(chan struct{})
}

// receive takes up to n visible messages, oldest first, and hides each for
// the visibility timeout. A message whose receive count has reached
// maxReceiveCount is moved to the dead-letter queue instead, as SQS's
// redrive policy does. It also returns when the next message becomes
// visible (zero when none is waiting) and a channel closed at the next
// send.
func (q *queue) receive(n int) (got []events.SQSMessage, next time.Time, changed <-chan struct{}) {
	time.Sleep(q.latency)
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	kept := q.msgs[:0]
	for _, m := range q.msgs {
		if m.gone {
			continue
		}
		kept = append(kept, m)
		if m.visibleAt.After(now) {
			if next.IsZero() || m.visibleAt.Before(next) {
				next = m.visibleAt
			}
			continue
		}
		if len(got) == n {
			continue
		}
		if m.receives >= q.maxReceives {
			m.gone = true
			q.live--
			q.moved = append(q.moved, m)
			continue
		}
		m.receives++
		m.visibleAt = now.Add(q.visibility)
		q.seq++
		m.receipt = strconv.Itoa(q.seq)
		q.byHandle[m.receipt] = m
		got = append(got, events.SQSMessage{
			MessageId: m.id, ReceiptHandle: m.receipt, Body: m.body, EventSourceARN: q.arn,
			Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives)},
			MessageAttributes: map[string]events.SQSMessageAttribute{
				"type": {DataType: "String", StringValue: &m.jobType},
			},
		})
	}
	q.msgs = kept
	return got, next, q.changed
}

// visible counts the messages visible now.
func (q *queue) visible() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	now, n := time.Now(), 0
	for _, m := range q.msgs {
		if !m.gone && !m.visibleAt.After(now) {
			n++
		}
	}
	return n
}

// remaining counts the messages not deleted or moved.
func (q *queue) remaining() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.live
}

// deleteReceived deletes the messages of these receipts (a batch's
// successes), unless a later receive gave the message a new one.
func (q *queue) deleteReceived(receipts []string) {
	if len(receipts) == 0 {
		return
	}
	time.Sleep(q.latency)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, h := range receipts {
		if m, ok := q.byHandle[h]; ok && m.receipt == h && !m.gone {
			m.gone = true
			q.live--
		}
		delete(q.byHandle, h)
	}
}

// changeVisibility is ChangeMessageVisibilityBatch: each named message is
// hidden for its timeout from now.
func (q *queue) changeVisibility(_ context.Context, changes []engine.VisibilityChange) error {
	time.Sleep(q.latency)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range changes {
		if m, ok := q.byHandle[c.Message.ReceiptHandle]; ok && m.receipt == c.Message.ReceiptHandle && !m.gone {
			m.visibleAt = time.Now().Add(c.Timeout)
		}
	}
	return nil
}

// movedToDLQ is how many messages the redrive policy moved.
func (q *queue) movedToDLQ() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.moved)
}
