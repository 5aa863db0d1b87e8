package enginetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
)

// Switches is the kill switch in memory: a type's value, else its default.
// It is safe for concurrent use.
type Switches struct {
	mu sync.Mutex
	m  map[string]bool
}

// Set switches jobType on or off.
func (s *Switches) Set(jobType string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]bool{}
	}
	s.m[jobType] = on
}

// IsJobEnabled implements engine.Switch.
func (s *Switches) IsJobEnabled(_ context.Context, jobType string, def bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.m[jobType]; ok {
		return v
	}
	return def
}

// Parked is one parked message.
type Parked struct {
	Queue engine.Queue
	Body  string
	Delay time.Duration
}

// Queues records parks and dead letters (engine.Parker and
// engine.DeadLetterer); ParkErr and DeadErr make them fail. It records
// "park" and "dead-letter" on Trace when set.
type Queues struct {
	Trace   *Trace
	ParkErr error
	DeadErr error

	mu     sync.Mutex
	parked []Parked
	dead   map[string]string // SQS message id → reason
}

// Park implements engine.Parker.
func (q *Queues) Park(_ context.Context, queue engine.Queue, _ engine.Envelope, body string, delay time.Duration) error {
	q.trace("park")
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ParkErr != nil {
		return q.ParkErr
	}
	q.parked = append(q.parked, Parked{queue, body, delay})
	return nil
}

// DeadLetter implements engine.DeadLetterer.
func (q *Queues) DeadLetter(_ context.Context, msg events.SQSMessage, reason string) error {
	q.trace("dead-letter")
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.DeadErr != nil {
		return q.DeadErr
	}
	if q.dead == nil {
		q.dead = map[string]string{}
	}
	q.dead[msg.MessageId] = reason
	return nil
}

func (q *Queues) trace(op string) {
	if q.Trace != nil {
		q.Trace.Add(op)
	}
}

// ParkedMessages returns what was parked.
func (q *Queues) ParkedMessages() []Parked {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.parked)
}

// DeadReason returns the reason a message was dead-lettered with, by SQS
// message id.
func (q *Queues) DeadReason(sqsMessageID string) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.dead[sqsMessageID]
	return r, ok
}

// DeadCount is how many messages were dead-lettered.
func (q *Queues) DeadCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.dead)
}

var seq atomic.Int64

// Envelope returns a valid envelope of jobType with args, a fresh job id,
// key and correlation id.
func Envelope(jobType string, args map[string]string) engine.Envelope {
	n := seq.Add(1)
	return engine.Envelope{
		V: engine.Version, MessageID: engine.DeriveMessageID("enginetest", fmt.Sprint(n, time.Now().UnixNano())), Type: jobType,
		Key: fmt.Sprintf("k-%d", n), CorrelationID: fmt.Sprintf("c-%d", n), Args: args,
		EnqueuedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
}

// ValidArgs returns args valid for jt: every declared arg with its format's
// example value.
func ValidArgs(jt engine.JobType) map[string]string {
	args := make(map[string]string, len(jt.Args))
	for _, a := range jt.Args {
		args[a.Name] = a.Format.Example()
	}
	return args
}

// EnvelopeFor returns a valid envelope of jt.
func EnvelopeFor(jt engine.JobType) engine.Envelope { return Envelope(jt.Name, ValidArgs(jt)) }

// Record wraps env as the SQS record of a delivery with the receive count.
func Record(t testing.TB, env engine.Envelope, receiveCount int) events.SQSMessage {
	t.Helper()
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return RawRecord(string(body), receiveCount)
}

var sqsSeq atomic.Int64

// RawRecord is an SQS record of any body, from the critical queue.
func RawRecord(body string, receiveCount int) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      fmt.Sprintf("sqs-%d", sqsSeq.Add(1)),
		Body:           body,
		Attributes:     map[string]string{"ApproximateReceiveCount": fmt.Sprint(receiveCount)},
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:critical",
	}
}
