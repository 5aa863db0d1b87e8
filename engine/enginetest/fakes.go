package enginetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
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
	// Queue is the name of the queue it came from and goes back to (the
	// last part of its EventSourceARN).
	Queue string
	Body  string
	// Attributes are its message attributes, kept as they were.
	Attributes map[string]events.SQSMessageAttribute
	Delay      time.Duration
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
func (q *Queues) Park(_ context.Context, msg events.SQSMessage, delay time.Duration) error {
	q.trace("park")
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ParkErr != nil {
		return q.ParkErr
	}
	queue := msg.EventSourceARN[strings.LastIndexByte(msg.EventSourceARN, ':')+1:]
	q.parked = append(q.parked, Parked{Queue: queue, Body: msg.Body, Attributes: msg.MessageAttributes, Delay: delay})
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

var sqsSeq atomic.Int64

// RawRecord is an SQS record of any body, from a queue named jobs.
func RawRecord(body string, receiveCount int) events.SQSMessage {
	return events.SQSMessage{
		MessageId:      fmt.Sprintf("sqs-%d", sqsSeq.Add(1)),
		Body:           body,
		Attributes:     map[string]string{"ApproximateReceiveCount": fmt.Sprint(receiveCount)},
		EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:jobs",
	}
}
