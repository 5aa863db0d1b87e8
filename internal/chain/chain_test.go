package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/chain"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/message"
)

const (
	parentA = "6f1d2c3b-4a59-4e8d-9c7b-0a1b2c3d4e5f"
	parentB = "7a2e3d4c-5b6a-4f9e-8d7c-1b2c3d4e5f60"
	parentC = "8b3f4e5d-6c7b-4a0f-9e8d-2c3d4e5f6071" // has no continuations
)

// releases records the parents released and those taken off the sweep's
// list; fail fails the named one's release, waiting leaves a continuation
// of the named one waiting, and unlistErr fails every Unlist.
type releases struct {
	mu        sync.Mutex
	got       []string
	fail      string
	waiting   string
	unlisted  []string
	unlistErr error
}

func (r *releases) Unlist(_ context.Context, id string, version int64) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if version != 3 {
		return false, fmt.Errorf("unlist %s at version %d; want the release's, 3", id, version)
	}
	r.unlisted = append(r.unlisted, id)
	return false, r.unlistErr
}

func (r *releases) ReleaseContinuations(_ context.Context, id string, send jobs.SendFunc) (jobs.ReleaseReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, id)
	if send == nil {
		return jobs.ReleaseReport{}, errors.New("no send")
	}
	if id == r.fail {
		return jobs.ReleaseReport{}, errors.New("DynamoDB throttled")
	}
	rep := jobs.ReleaseReport{State: jobs.StateSucceeded, Version: 3, Sent: []string{"child-of-" + id}}
	if id == r.waiting {
		rep.Waiting = []string{"another-child-of-" + id}
	}
	return rep, nil
}

// Parents: every job has continuations here but parentC.
func (r *releases) Parents(_ context.Context, ids []string) ([]string, error) {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == parentC }), nil
}

func marker(seq, event, state, id string) events.DynamoDBEventRecord {
	img := map[string]events.DynamoDBAttributeValue{
		"HandlerName": events.NewStringAttribute("email.welcome.v1#" + id),
		"MessageKey":  events.NewStringAttribute(id),
	}
	if state != "" {
		img["state"] = events.NewStringAttribute(state)
	}
	return events.DynamoDBEventRecord{EventName: event, EventSource: "aws:dynamodb",
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq, NewImage: img}}
}

func send(context.Context, jobs.Job) error { return nil }

// Every settled marker (DONE, FAILED, CANCELLED) releases its job's
// continuations, each job once per batch however many of its records it
// holds, if it has any (one read says which); a lease, a REMOVE or a record
// that names no job releases nothing;
// a failed release is reported by its record's sequence number (and the
// other records of the same job too), so the stream retries it.
func TestStreamReleasesEveryEndedJobOnce(t *testing.T) {
	r := &releases{fail: parentB}
	s := &chain.Stream{Releaser: r, Send: send}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		marker("1", "INSERT", "LEASED", parentA),
		marker("2", "MODIFY", "DONE", parentA),
		marker("3", "MODIFY", "DONE", parentA), // the claim seen twice
		marker("4", "INSERT", "CANCELLED", parentB),
		marker("5", "REMOVE", "DONE", parentA),
		marker("6", "INSERT", "FAILED", "not-a-job-id"),
		marker("7", "MODIFY", "FAILED", parentB),
		marker("8", "INSERT", "", parentA),
		marker("9", "MODIFY", "DONE", parentC),
	}}
	resp, err := s.Handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	// Parents are released at once, in no order.
	if slices.Sort(r.got); !slices.Equal(r.got, []string{parentA, parentB}) {
		t.Fatalf("released %v; want each ended job once", r.got)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if !slices.Equal(failed, []string{"4", "7"}) {
		t.Fatalf("batch item failures %v; want the failed job's records 4 and 7", failed)
	}
}

// A release that left nothing waiting takes its parent off the sweep's
// list, at the version it read; one that left a continuation waiting does
// not; an Unlist that fails fails no record (the sweep takes it off).
func TestStreamUnlistsWhatNothingWaitsFor(t *testing.T) {
	for _, unlistErr := range []error{nil, errors.New("DynamoDB throttled")} {
		r := &releases{waiting: parentB, unlistErr: unlistErr}
		s := &chain.Stream{Releaser: r, Send: send}
		resp, err := s.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
			marker("1", "MODIFY", "DONE", parentA), marker("2", "MODIFY", "DONE", parentB),
		}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("unlist error %v: %v %v; want every record done", unlistErr, resp.BatchItemFailures, err)
		}
		if !slices.Equal(r.unlisted, []string{parentA}) {
			t.Fatalf("unlisted %v; want the parent nothing waits for, alone", r.unlisted)
		}
	}
}

// The function tells its two event sources apart: the markers stream's
// records go to the stream handler, the chain queue's to the runner.
func TestFunctionServesBothEventSources(t *testing.T) {
	r := &releases{}
	runner := &sqsRunner{}
	f := &chain.Function{Runner: runner, Stream: &chain.Stream{Releaser: r, Send: send}}
	stream, _ := json.Marshal(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{marker("1", "MODIFY", "DONE", parentA)}})
	out, err := f.Invoke(context.Background(), stream)
	if err != nil || !slices.Equal(r.got, []string{parentA}) || runner.n != 0 {
		t.Fatalf("a stream event: %s %v, released %v, runner %d", out, err, r.got, runner.n)
	}
	queue, _ := json.Marshal(events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", EventSource: "aws:sqs", Body: "{}"}}})
	if out, err = f.Invoke(context.Background(), queue); err != nil || runner.n != 1 {
		t.Fatalf("an SQS event: %s %v, runner %d", out, err, runner.n)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "m-1" {
		t.Fatalf("the runner's answer %s was not returned", out)
	}
	for _, bad := range []string{`"not an event"`, `{"Records":[{"eventSource":"aws:kinesis"}]}`} {
		if _, err := f.Invoke(context.Background(), []byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

type sqsRunner struct{ n int }

func (r *sqsRunner) Handle(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	r.n++
	var resp events.SQSEventResponse
	for _, m := range ev.Records {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
	}
	return resp, nil
}

type finisher struct{ got []string }

func (f *finisher) FinishBatch(_ context.Context, id string) error {
	f.got = append(f.got, id)
	if id == "broken" {
		return errors.New("DynamoDB down")
	}
	return nil
}

type sweeper struct {
	n          int
	unfinished bool
}

func (s *sweeper) SweepContinuations(context.Context, jobs.SendFunc) (jobs.ContinuationSweepReport, error) {
	s.n++
	return jobs.ContinuationSweepReport{Parents: 1, Unfinished: s.unfinished}, nil
}

// The chain queue's types are handled: a finisher finishes its batch (its
// failure fails the job, so SQS retries it), a sweep tick sweeps.
func TestHandlersOfTheChainQueue(t *testing.T) {
	f, s := &finisher{}, &sweeper{}
	hs, err := chain.Handlers(f, s, send)
	if err != nil {
		t.Fatal(err)
	}
	for _, jt := range []message.JobType{contract.BatchFinish, contract.ContinuationSweep} {
		if hs[jt.Name] == nil || jt.Queue != contract.QueueChain {
			t.Fatalf("%s: handler %v on queue %s", jt.Name, hs[jt.Name], jt.Queue)
		}
	}
	job := func(typ string, args map[string]string) runner.Job {
		return runner.Job{Envelope: message.Envelope{Type: typ, Args: args}}
	}
	if err := hs[contract.BatchFinish.Name].Handle(context.Background(), job(contract.BatchFinish.Name, map[string]string{"batchId": "b-1"})); err != nil {
		t.Fatal(err)
	}
	if err := hs[contract.BatchFinish.Name].Handle(context.Background(), job(contract.BatchFinish.Name, map[string]string{"batchId": "broken"})); err == nil {
		t.Fatal("a finish that failed did not fail its job")
	}
	if err := hs[contract.ContinuationSweep.Name].Handle(context.Background(), job(contract.ContinuationSweep.Name, nil)); err != nil || s.n != 1 {
		t.Fatalf("sweep: %v, %d sweeps", err, s.n)
	}
	// A run that stopped for time fails its tick: the retry goes on.
	s.unfinished = true
	if err := hs[contract.ContinuationSweep.Name].Handle(context.Background(), job(contract.ContinuationSweep.Name, nil)); !errors.Is(err, jobs.ErrSweepUnfinished) {
		t.Fatalf("an unfinished sweep's tick: %v; want it failed with ErrSweepUnfinished", err)
	}
	if !slices.Equal(f.got, []string{"b-1", "broken"}) {
		t.Fatalf("finished %v", f.got)
	}
	if _, err := chain.Handlers(nil, s, send); err == nil {
		t.Fatal("handlers without a finisher")
	}
}

// concurrent is a Releaser whose releases each wait (up to a second) for
// another to be in flight, and counts the most in flight at once.
type concurrent struct {
	releases
	in, most atomic.Int32
}

func (c *concurrent) ReleaseContinuations(ctx context.Context, id string, send jobs.SendFunc) (jobs.ReleaseReport, error) {
	n := c.in.Add(1)
	defer c.in.Add(-1)
	for deadline := time.Now().Add(time.Second); c.in.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if m := max(n, c.in.Load()); m > c.most.Load() {
		c.most.Store(m)
	}
	return c.releases.ReleaseContinuations(ctx, id, send)
}

// The parents of one stream batch are released at once, not one after
// another: one after another, a stream shard would release about 30
// parents a second.
func TestStreamReleasesParentsAtOnce(t *testing.T) {
	c := &concurrent{}
	s := &chain.Stream{Releaser: c, Send: send}
	if _, err := s.Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		marker("1", "MODIFY", "DONE", parentA), marker("2", "MODIFY", "DONE", parentB),
	}}); err != nil {
		t.Fatal(err)
	}
	if c.most.Load() < 2 {
		t.Fatalf("at most %d release(s) in flight; want the batch's parents released at once", c.most.Load())
	}
}
