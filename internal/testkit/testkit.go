// Package testkit is the shared kit of the worker tests: in-memory fakes of
// the runner's ports (switches, queues, job records), builders of envelopes
// and SQS records, and a harness that runs the real runner on them with the
// traced in-memory marker store. The runner, e-mail and dead-letter tests
// use it instead of copies; production code never imports it.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// The fakes of the engine's ports and the builders of records are
// the public test kit's (engine/enginetest): the bundle's tests
// share them under these names.
type (
	// Switches is the kill switch in memory (enginetest.Switches).
	Switches = enginetest.Switches
	// Parked is one parked message (enginetest.Parked).
	Parked = enginetest.Parked
	// Queues records parks and dead letters (enginetest.Queues).
	Queues = enginetest.Queues
)

var seq atomic.Int64

// Envelope returns a valid envelope of jobType with args, a fresh job id,
// key and correlation id.
func Envelope(jobType string, args map[string]string) message.Envelope {
	n := seq.Add(1)
	return message.Envelope{
		V: message.Version, MessageID: message.DeriveMessageID("testkit", fmt.Sprint(n, time.Now().UnixNano())), Type: jobType,
		Key: fmt.Sprintf("k-%d", n), CorrelationID: fmt.Sprintf("c-%d", n), Args: args,
		EnqueuedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
	}
}

// ValidArgs returns args valid for jt: every declared arg with its format's
// example value.
func ValidArgs(jt message.JobType) map[string]string {
	args := make(map[string]string, len(jt.Args))
	for _, a := range jt.Args {
		args[a.Name] = a.Format.Example()
	}
	return args
}

// EnvelopeFor returns a valid envelope of jt.
func EnvelopeFor(jt message.JobType) message.Envelope { return Envelope(jt.Name, ValidArgs(jt)) }

// Record wraps env as the SQS record of a delivery with the receive count.
func Record(t testing.TB, env message.Envelope, receiveCount int) events.SQSMessage {
	t.Helper()
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return RawRecord(string(body), receiveCount)
}

// RawRecord is an SQS record of any body (enginetest.RawRecord).
func RawRecord(body string, receiveCount int) events.SQSMessage {
	return enginetest.RawRecord(body, receiveCount)
}

// Jobs records what workers write on job records (engine.JobRecorder, and
// deadletter.JobFailer). States gives MarkParked the state a job's record
// has (Enqueued when absent); Err makes every call fail.
type Jobs struct {
	Trace *enginetest.Trace
	Err   error

	mu       sync.Mutex
	states   map[string]jobs.State
	parked   map[string]int
	failed   map[string]jobs.Failure
	outcomes map[string][2]string
}

func (j *Jobs) init() {
	if j.states == nil {
		j.states, j.parked, j.failed, j.outcomes = map[string]jobs.State{}, map[string]int{}, map[string]jobs.Failure{}, map[string][2]string{}
	}
}

// SetState sets the stored state of a job's record.
func (j *Jobs) SetState(jobID string, s jobs.State) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.init()
	j.states[jobID] = s
}

// MarkParked implements engine.JobRecorder with the state machine's rule.
func (j *Jobs) MarkParked(_ context.Context, jobID string) (prev jobs.State, err error) {
	err = j.call("mark-parked", func() error {
		var terr error
		if prev, terr = j.transition(jobID, jobs.EventParked); terr != nil {
			return terr
		}
		j.parked[jobID]++
		return nil
	})
	return prev, err
}

// MarkFailed implements engine.JobRecorder.
func (j *Jobs) MarkFailed(_ context.Context, jobID string, f jobs.Failure) error {
	return j.call("mark-failed", func() error {
		j.failed[jobID] = f
		j.states[jobID] = jobs.StateFailed
		return nil
	})
}

// RecordOutcome implements engine.JobRecorder.
func (j *Jobs) RecordOutcome(_ context.Context, jobID, outcome, reason string) error {
	return j.call("record-outcome", func() error {
		j.outcomes[jobID] = [2]string{outcome, reason}
		return nil
	})
}

// MarkUnclaimed implements engine.JobRecorder with the state machine's
// rule.
func (j *Jobs) MarkUnclaimed(_ context.Context, jobID, reason string) error {
	return j.call("mark-unclaimed", func() error {
		if _, err := j.transition(jobID, jobs.EventUnclaimed); err != nil {
			return err
		}
		j.outcomes[jobID] = [2]string{jobs.OutcomeClaimFailed, reason}
		return nil
	})
}

// transition moves job jobID's state by ev as the state machine allows (a
// job never seen is Enqueued) and returns the state it had; a refused event
// is ErrConflict. Callers hold mu.
func (j *Jobs) transition(jobID string, ev jobs.Event) (prev jobs.State, err error) {
	prev, ok := j.states[jobID]
	if !ok {
		prev = jobs.StateEnqueued
	}
	to, allowed := jobs.Transition(prev, ev)
	if !allowed {
		return prev, fmt.Errorf("%w: %s is %s", jobs.ErrConflict, jobID, prev)
	}
	j.states[jobID] = to
	return prev, nil
}

// call records op on the trace and, unless Err fails every call, runs write
// on the records under the lock.
func (j *Jobs) call(op string, write func() error) error {
	j.trace(op)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.init()
	if j.Err != nil {
		return j.Err
	}
	return write()
}

func (j *Jobs) trace(op string) {
	if j.Trace != nil {
		j.Trace.Add(op)
	}
}

// Failure returns what MarkFailed recorded for a job.
func (j *Jobs) Failure(jobID string) (jobs.Failure, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	f, ok := j.failed[jobID]
	return f, ok
}

// Outcome returns the last outcome and reason recorded for a job.
func (j *Jobs) Outcome(jobID string) (outcome, reason string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	o := j.outcomes[jobID]
	return o[0], o[1]
}

// State is the state a job's record was last given, if any.
func (j *Jobs) State(jobID string) (jobs.State, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	s, ok := j.states[jobID]
	return s, ok
}

// Parks is how often a job was marked parked.
func (j *Jobs) Parks(jobID string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.parked[jobID]
}

// BatchHandler is a function's batch handler: the runner, the DLQ consumer.
type BatchHandler interface {
	Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)
}

// Run handles one batch and returns the SQS message ids to retry. A
// returned error fails t: failures belong in the batch response.
func Run(t testing.TB, ctx context.Context, h BatchHandler, msgs ...events.SQSMessage) []string {
	t.Helper()
	resp, err := h.Handle(ctx, events.SQSEvent{Records: msgs})
	if err != nil {
		t.Fatalf("Handle returned an error: %v (failures belong in the batch response)", err)
	}
	ids := make([]string, 0, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// Buffer is a log or metrics sink safe for concurrent writers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Reset forgets everything written.
func (l *Buffer) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Reset()
}
