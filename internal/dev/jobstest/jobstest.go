// Package jobstest is the shared fixture of the tests that need the jobs
// table for real: a jobs table and a markers table on the test binary's moto
// server, the stores on them, one settable clock and a call counter.
package jobstest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/mine"
	"github.com/runstwice/runstwice/internal/jobs/sweepindex"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/message"
)

// World is a jobs table and a markers table with their stores, on one clock.
type World struct {
	Client       *dynamodb.Client
	JobsTable    string
	MarkersTable string
	Store        *jobs.Store
	Recorder     *jobs.Recorder
	Markers      *dynamostore.Store
	Clock        *enginetest.Clock
	Counter      *testenv.CallCounter
}

// New creates the tables on moto (testenv.Moto) and the stores on them.
func New(t *testing.T) *World {
	t.Helper()
	w := &World{Counter: testenv.NewCallCounter(), Clock: enginetest.NewClock(time.Now().UTC().Truncate(time.Millisecond))}
	w.Client = testenv.DynamoDB(t, w.Counter.Option)
	w.JobsTable = NewJobsTable(t, w.Client)
	w.MarkersTable = testenv.NewTable(t, w.Client, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey)
	w.Markers = marker.NewStore(w.Client, w.MarkersTable)
	w.Markers.Now = w.Clock.Now
	w.Store = jobs.NewStore(w.Client, w.JobsTable, w.Markers)
	w.Store.Now = w.Clock.Now
	w.Store.Index = sweepindex.New(w.Client, w.JobsTable)
	w.Recorder = jobs.NewRecorder(w.Client, w.JobsTable)
	w.Recorder.Now = w.Clock.Now
	w.Counter.Reset()
	return w
}

// Job returns a new job of typ for caller under key, as the enqueue
// function builds it, running delay after the clock's now.
func (w *World) Job(typ, caller, key string, delay time.Duration) jobs.Job {
	now := w.Clock.Now()
	return jobs.Job{ID: message.NewMessageID(), Caller: caller, Type: typ, Key: key, Queue: string(contract.QueueDefault),
		CorrelationID: "c-" + key, Message: `{"v":1}`, CreatedAt: now, RunAt: now.Add(delay)}
}

// Enqueue reserves and promotes a new job, as the enqueue function does.
func (w *World) Enqueue(t *testing.T, typ, caller, key string) jobs.Job {
	t.Helper()
	return Enqueue(t, w.Store, w.Job(typ, caller, key, 0))
}

// Enqueue reserves and promotes j in store, as the enqueue function does,
// and returns the job reserved.
func Enqueue(t *testing.T, store *jobs.Store, j jobs.Job) jobs.Job {
	t.Helper()
	r := Reserve(t, store, j)
	if err := store.Promote(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Reserve reserves the new job j (Pending: the enqueue function has not
// sent it yet), failing t unless it is reserved.
func (w *World) Reserve(t *testing.T, j jobs.Job) jobs.Job {
	t.Helper()
	return Reserve(t, w.Store, j)
}

// Reserve reserves the new job j in store, failing t unless it is reserved,
// and returns the job reserved.
func Reserve(t *testing.T, store *jobs.Store, j jobs.Job) jobs.Job {
	t.Helper()
	d, err := store.Reserve(context.Background(), j, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve %s: %v %v", j.Key, d.Outcome, err)
	}
	return d.Job
}

// Failed enqueues a job and marks it Failed, as the dlq function does.
func (w *World) Failed(t *testing.T, typ, caller, key string) jobs.Job {
	t.Helper()
	j := w.Enqueue(t, typ, caller, key)
	if err := w.Recorder.MarkFailed(context.Background(), j.ID, jobs.Failure{Class: "max-receives", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	return j
}

// Get reads job id through the store (its derived state), failing t on an
// error.
func (w *World) Get(t *testing.T, id string) jobs.Job {
	t.Helper()
	return Get(t, w.Store, id)
}

// Get reads job id through store, failing t on an error.
func Get(t *testing.T, store *jobs.Store, id string) jobs.Job {
	t.Helper()
	j, err := store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// NewJobsTable creates a jobs table as template.yaml declares it: hash key
// pk, the index byCaller (hash key caller, range key createdAt, every
// attribute projected) that GET /v1/jobs queries, and the sparse index
// sweep (hash key sweep, range key pk, keys only) the sweeps page.
func NewJobsTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	name := testenv.Name(t, "jobs")
	_, err := client.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(jobs.AttrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("caller"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String("createdAt"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(jobs.AttrSweep), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(jobs.AttrPK), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(mine.Index),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("caller"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("createdAt"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}, {
			IndexName: aws.String(sweepindex.Name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(jobs.AttrSweep), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(jobs.AttrPK), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}
