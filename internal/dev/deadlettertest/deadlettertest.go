// Package deadlettertest is the shared fixture of the tests that redrive dead
// letters for real (the dead-letter redrive tests and jobctl's): a stage's
// jobs, markers and dead-letters tables and its work queues on the test
// binary's moto server, the stores on them, and failed jobs with their dead
// letters made as the enqueue and dlq functions make them.
package deadlettertest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/message"
)

// Names are a world's table names; its work queues are named QueuePrefix
// plus the queue's name.
type Names struct {
	Jobs, Markers, DeadLetters, QueuePrefix string
}

// Unique returns names no other test uses.
func Unique(t *testing.T) Names {
	t.Helper()
	return Names{
		Jobs: testenv.Name(t, "jobs"), Markers: testenv.Name(t, "markers"),
		DeadLetters: testenv.Name(t, "dead-letters"), QueuePrefix: testenv.Name(t, "q") + "-",
	}
}

// World is a stage's tables and queues, and the stores on them, on the real
// clock. Its clients count their calls on Counter.
type World struct {
	Names
	Counter *testenv.CallCounter
	DB      *dynamodb.Client
	SQS     *sqs.Client
	testenv.WorkQueues
	Jobs     *jobs.Store
	Recorder *jobs.Recorder
	Markers  *dynamostore.Store
	Letters  *deadletter.Store
}

// New creates the tables and the queues (which redrive nowhere) under names.
func New(t *testing.T, names Names) *World {
	t.Helper()
	w := &World{Names: names, Counter: testenv.NewCallCounter()}
	cfg := testenv.Moto(t).Config(w.Counter.Option)
	w.DB, w.SQS = dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	testenv.CreateTable(t, w.DB, names.Jobs, jobs.AttrPK, "")
	testenv.CreateTable(t, w.DB, names.Markers, dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	testenv.CreateTable(t, w.DB, names.DeadLetters, deadletter.AttrPK, "")
	w.WorkQueues = testenv.CreateWorkQueues(t, w.SQS, names.QueuePrefix, 0)
	w.Markers = marker.NewStore(w.DB, names.Markers)
	w.Jobs = jobs.NewStore(w.DB, names.Jobs, w.Markers)
	w.Recorder = jobs.NewRecorder(w.DB, names.Jobs)
	w.Letters = deadletter.NewStore(w.DB, names.DeadLetters)
	return w
}

// Enqueue creates an Enqueued job of typ for caller under key, on the
// default queue, whose message is a real envelope, as the enqueue function
// does.
func (w *World) Enqueue(t *testing.T, typ, caller, key string) message.Envelope {
	t.Helper()
	return w.EnqueueWith(t, typ, caller, key, map[string]string{"userId": "u-1"}, contract.QueueDefault)
}

// EnqueueWith is Enqueue of a job with these args on queue q.
func (w *World) EnqueueWith(t *testing.T, typ, caller, key string, args map[string]string, q message.Queue) message.Envelope {
	t.Helper()
	now := time.Now()
	env := message.Envelope{V: message.Version, MessageID: message.NewMessageID(), Type: typ, Key: key,
		CorrelationID: "corr-" + key, Args: args, EnqueuedAt: now.UTC()}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	jobstest.Enqueue(t, w.Jobs, jobs.Job{ID: env.MessageID, Caller: caller, Type: typ, Key: key,
		Queue: string(q), CorrelationID: env.CorrelationID, Message: string(body), CreatedAt: now, RunAt: now})
	return env
}

// Letter enqueues a job, marks it Failed and stores its dead letter with
// reason, last seen at seen, as the dlq function does.
func (w *World) Letter(t *testing.T, typ, caller, key, reason string, seen time.Time) message.Envelope {
	t.Helper()
	return w.DeadLetter(t, w.Enqueue(t, typ, caller, key), reason, seen)
}

// DeadLetter marks env's job Failed and stores its dead letter with
// reason, last seen at seen, as the dlq function does.
func (w *World) DeadLetter(t *testing.T, env message.Envelope, reason string, seen time.Time) message.Envelope {
	t.Helper()
	typ := env.Type
	ctx := context.Background()
	if err := w.Recorder.MarkFailed(ctx, env.MessageID, jobs.Failure{Class: deadletter.ClassPermanent}); err != nil {
		t.Fatal(err)
	}
	body, _ := env.Encode()
	store := *w.Letters
	store.Now = func() time.Time { return seen }
	if _, err := store.Save(ctx, deadletter.Record{ID: env.MessageID, JobID: env.MessageID, Type: typ, Body: string(body),
		Reason: reason, ReceiveCount: 1, Status: deadletter.StatusDead}, "sqs-"+env.MessageID); err != nil {
		t.Fatal(err)
	}
	return env
}

// State returns job id's derived state.
func (w *World) State(t *testing.T, id string) jobs.State {
	t.Helper()
	return jobstest.Get(t, w.Jobs, id).State
}
