//go:build integration

package deadletter_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/catalog"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/queue"
)

// opsWorld is what an operator's redrive touches, on moto: the jobs,
// markers and dead-letters tables and the work queues.
type opsWorld struct {
	db        *dynamodb.Client
	sqs       *sqs.Client
	counter   *testenv.CallCounter
	jobs      *jobs.Store
	rec       *jobs.Recorder
	markers   *marker.Dynamo
	markersT  string
	store     *deadletter.Store
	queues    map[contract.Queue]testenv.Queue
	redriver  *deadletter.Redriver
	lifecycle *jobs.Lifecycle
}

func newOpsWorld(t *testing.T) *opsWorld {
	t.Helper()
	w := &opsWorld{counter: testenv.NewCallCounter(), queues: map[contract.Queue]testenv.Queue{}}
	cfg := testenv.Moto(t).Config(w.counter.Option)
	w.db, w.sqs = dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	jobsT, deadT := testenv.Name(t, "jobs"), testenv.Name(t, "dead-letters")
	w.markersT = testenv.Name(t, "markers")
	testenv.CreateTable(t, w.db, jobsT, jobs.AttrPK, "")
	testenv.CreateTable(t, w.db, w.markersT, marker.AttrHandler, marker.AttrMessageKey)
	testenv.CreateTable(t, w.db, deadT, deadletter.AttrPK, "")
	urls := map[contract.Queue]string{}
	for _, q := range contract.Queues {
		w.queues[q] = testenv.CreateQueue(t, w.sqs, testenv.Name(t, string(q)), nil)
		urls[q] = w.queues[q].URL
	}
	w.markers = marker.NewDynamo(w.db, w.markersT)
	w.jobs = jobs.NewStore(w.db, jobsT, w.markers)
	w.rec = jobs.NewRecorder(w.db, jobsT)
	w.store = deadletter.NewStore(w.db, deadT)
	w.lifecycle = jobs.NewLifecycle(w.db, jobsT)
	w.redriver = deadletter.NewRedriver(w.store, queue.New(w.sqs, urls, ""), catalog.Registry())
	w.redriver.Jobs, w.redriver.Markers = w.lifecycle, w.markers
	return w
}

// failedJob enqueues a welcome job for caller and key, fails it, and stores
// its dead letter with reason, as the enqueue and dlq functions do.
func (w *opsWorld) failedJob(t *testing.T, caller, key, reason string) contract.Envelope {
	t.Helper()
	ctx := context.Background()
	env := w.enqueue(t, caller, key)
	if err := w.rec.MarkFailed(ctx, env.MessageID, jobs.Failure{Class: deadletter.ClassPermanent}); err != nil {
		t.Fatal(err)
	}
	body, _ := env.Encode()
	now := time.Now()
	if _, err := w.store.Save(ctx, deadletter.Record{
		ID: env.MessageID, JobID: env.MessageID, Type: env.Type, Body: string(body), Reason: reason,
		ReceiveCount: 1, Status: deadletter.StatusDead, FirstSeen: now, LastSeen: now,
	}, "sqs-"+env.MessageID); err != nil {
		t.Fatal(err)
	}
	return env
}

func (w *opsWorld) enqueue(t *testing.T, caller, key string) contract.Envelope {
	t.Helper()
	env := contract.Envelope{V: 1, MessageID: contract.NewMessageID(), Type: email.Welcome.Name, Key: key,
		CorrelationID: "corr-" + key, Args: map[string]string{"userId": "u-1"}, EnqueuedAt: time.Now().UTC()}
	body, _ := env.Encode()
	now := time.Now()
	d, err := w.jobs.Reserve(context.Background(), jobs.Job{ID: env.MessageID, Caller: caller, Type: env.Type, Key: key,
		Queue: string(contract.QueueDefault), CorrelationID: env.CorrelationID, Message: string(body), CreatedAt: now, RunAt: now},
		jobs.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve: %v %v", d.Outcome, err)
	}
	if err := w.jobs.Promote(context.Background(), d.Job); err != nil {
		t.Fatal(err)
	}
	return env
}

func (w *opsWorld) state(t *testing.T, id string) jobs.State {
	t.Helper()
	j, err := w.jobs.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

func (w *opsWorld) queued(t *testing.T) []string {
	t.Helper()
	var bodies []string
	for _, m := range testenv.Receive(t, w.sqs, w.queues[contract.QueueDefault].URL, 0) {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	return bodies
}

// putFailedMarker writes what a claim-then-effect job leaves when its effect
// failed after its claim.
func (w *opsWorld) putFailedMarker(t *testing.T, env contract.Envelope) {
	t.Helper()
	if _, err := w.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(w.markersT), Item: map[string]ddbtypes.AttributeValue{
		marker.AttrHandler:    &ddbtypes.AttributeValueMemberS{Value: env.Type},
		marker.AttrMessageKey: &ddbtypes.AttributeValueMemberS{Value: env.MessageID},
		marker.AttrState:      &ddbtypes.AttributeValueMemberS{Value: "FAILED"},
		marker.AttrExpiresAt:  &ddbtypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)},
	}}); err != nil {
		t.Fatal(err)
	}
}

// TestRedriveMakesFailedJobActive: the redriven job reads Enqueued, its
// FAILED marker is cleared, its message is back under the same id, and an
// enqueue of the same key dedups onto it instead of admitting a twin.
func TestRedriveMakesFailedJobActive(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	env := w.failedJob(t, "caller-a", "welcome:u-1", "permanent: provider refused")
	w.putFailedMarker(t, env)
	if got := w.state(t, env.MessageID); got != jobs.StateFailed {
		t.Fatalf("before: %s", got)
	}
	w.counter.Reset()
	res, err := w.redriver.Redrive(ctx, env.MessageID)
	if err != nil || res.Outcome != deadletter.Redrove || res.JobState != jobs.StateFailed {
		t.Fatalf("redrive = %+v, %v", res, err)
	}
	t.Logf("AWS calls for one redrive that reactivates its job: %s", w.counter)
	if got := w.state(t, env.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("job after redrive: %s; want Enqueued", got)
	}
	if _, ok, err := w.markers.Peek(ctx, marker.Key{Handler: env.Type, MessageKey: env.MessageID}); ok || err != nil {
		t.Fatalf("FAILED marker still there after the redrive (%v)", err)
	}
	body, _ := env.Encode()
	if got := w.queued(t); len(got) != 1 || got[0] != string(body) {
		t.Fatalf("queue holds %q; want the stored body once", got)
	}
	twin := contract.Envelope{MessageID: contract.NewMessageID()}
	now := time.Now()
	d, err := w.jobs.Reserve(ctx, jobs.Job{ID: twin.MessageID, Caller: "caller-a", Type: email.Welcome.Name, Key: "welcome:u-1",
		Queue: string(contract.QueueDefault), Message: "{}", CreatedAt: now, RunAt: now}, jobs.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != env.MessageID {
		t.Fatalf("AllowAfterFailed enqueue of the redriven key = %v (%s), %v; want Duplicate of the redriven job", d.Outcome, d.Job.ID, err)
	}
	if rec, _ := w.store.Get(ctx, env.MessageID); rec.Status != deadletter.StatusRedriven {
		t.Fatalf("letter %s; want redriven", rec.Status)
	}
}

// TestRedriveSupersededLeftAloneUnlessForced: a newer job took the key; the
// letter is reported superseded and nothing is sent or written, until
// --force, which redrives it and leaves the key with the newer job.
func TestRedriveSupersededLeftAloneUnlessForced(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	old := w.failedJob(t, "caller-a", "welcome:u-2", "exceeded maxReceiveCount (5 receives)")
	newer := w.enqueue(t, "caller-a", "welcome:u-2")
	w.counter.Reset()
	res, err := w.redriver.Redrive(ctx, old.MessageID)
	if err != nil || res.Outcome != deadletter.Superseded || res.SupersededBy != newer.MessageID {
		t.Fatalf("redrive = %+v, %v; want superseded by %s", res, err, newer.MessageID)
	}
	if n := w.counter.Sum("SQS.SendMessage", "DynamoDB.UpdateItem", "DynamoDB.PutItem", "DynamoDB.DeleteItem", "DynamoDB.TransactWriteItems"); n != 0 {
		t.Fatalf("a superseded letter was touched: %s", w.counter)
	}
	if got := w.state(t, old.MessageID); got != jobs.StateFailed {
		t.Fatalf("superseded job reads %s; want Failed", got)
	}
	res, err = w.redriver.RedriveWith(ctx, old.MessageID, deadletter.Options{Force: true})
	if err != nil || res.Outcome != deadletter.Redrove {
		t.Fatalf("forced redrive = %+v, %v", res, err)
	}
	if got := w.state(t, old.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("forced: job reads %s; want Enqueued", got)
	}
	if rv, _ := w.lifecycle.Inspect(ctx, old.MessageID); rv.SupersededBy != newer.MessageID {
		t.Fatalf("the forced redrive took the key from the newer job: %+v", rv)
	}
	if got := w.queued(t); len(got) != 1 {
		t.Fatalf("%d messages after the forced redrive; want 1", len(got))
	}
}

// TestDryRunChangesNothing: a dry run of redrive and drop reads, and neither
// sends nor writes.
func TestDryRunChangesNothing(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	a := w.failedJob(t, "caller-a", "welcome:u-3", "permanent: bounced")
	w.putFailedMarker(t, a)
	b := w.failedJob(t, "caller-a", "welcome:u-4", "exceeded maxReceiveCount (5 receives)")
	w.enqueue(t, "caller-a", "welcome:u-4") // b is superseded
	recs, err := w.store.Select(ctx, deadletter.Filter{Status: deadletter.StatusDead})
	if err != nil || len(recs) != 2 {
		t.Fatalf("select %d, %v", len(recs), err)
	}
	w.counter.Reset()
	for _, rec := range recs {
		for _, force := range []bool{false, true} {
			res, err := w.redriver.RedriveRecord(ctx, rec, deadletter.Options{DryRun: true, Force: force})
			if err != nil || (res.Outcome != deadletter.WouldRedrive && res.Outcome != deadletter.Superseded) {
				t.Fatalf("dry run %s = %+v, %v", rec.ID, res, err)
			}
		}
		if res, err := w.redriver.Drop(ctx, rec, deadletter.Options{DryRun: true}); err != nil || res.Outcome != deadletter.WouldDrop {
			t.Fatalf("dry drop %s = %+v, %v", rec.ID, res, err)
		}
	}
	t.Logf("AWS calls of the dry runs: %s", w.counter)
	if n := w.counter.Sum("SQS.SendMessage", "DynamoDB.UpdateItem", "DynamoDB.PutItem", "DynamoDB.DeleteItem", "DynamoDB.TransactWriteItems", "DynamoDB.BatchWriteItem"); n != 0 {
		t.Fatalf("a dry run wrote or sent: %s", w.counter)
	}
	if w.counter.Get("DynamoDB.GetItem") == 0 {
		t.Fatalf("the dry run did not even read: %s", w.counter)
	}
	for _, env := range []contract.Envelope{a, b} {
		if got := w.state(t, env.MessageID); got != jobs.StateFailed {
			t.Fatalf("job %s after dry runs; want Failed", got)
		}
	}
	if _, ok, _ := w.markers.Peek(ctx, marker.Key{Handler: a.Type, MessageKey: a.MessageID}); !ok {
		t.Fatal("a dry run cleared a FAILED marker")
	}
	if got := w.queued(t); len(got) != 0 {
		t.Fatalf("a dry run sent %d messages", len(got))
	}
}

// downSQS fails every send, as an SQS outage would.
type downSQS struct{}

func (downSQS) Send(context.Context, queue.Message) error {
	return errors.New("sqs: service unavailable")
}

// TestRedriveSendFailureAndCrash: a failed send puts the job back to Failed
// (the record never claims a message that is not in the queue); a redrive
// that died after reactivating leaves Pending, which the next enqueue of the
// key resumes (re-sending the stored message) and a rerun completes.
func TestRedriveSendFailureAndCrash(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	env := w.failedJob(t, "caller-a", "welcome:u-5", "permanent: bounced")
	failing := deadletter.NewRedriver(w.store, downSQS{}, catalog.Registry())
	failing.Jobs, failing.Markers = w.lifecycle, w.markers
	if _, err := failing.Redrive(ctx, env.MessageID); err == nil {
		t.Fatal("a redrive whose send failed reported success")
	}
	if got := w.state(t, env.MessageID); got != jobs.StateFailed {
		t.Fatalf("after a failed send the job reads %s; want Failed", got)
	}
	if rec, _ := w.store.Get(ctx, env.MessageID); rec.Status != deadletter.StatusDead {
		t.Fatalf("letter %s after a failed send; want still dead", rec.Status)
	}

	// The crash: steps 1–3 done, the process died before the send.
	rv, err := w.lifecycle.Inspect(ctx, env.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.lifecycle.Reactivate(ctx, rv, false); err != nil {
		t.Fatal(err)
	}
	if got := w.state(t, env.MessageID); got != jobs.StatePending {
		t.Fatalf("after a crash before the send the job reads %s; want Pending (never Enqueued with nothing queued)", got)
	}
	store := *w.jobs
	store.Now = func() time.Time { return time.Now().Add(jobs.DefaultPendingTimeout + time.Second) }
	now := time.Now()
	d, err := store.Reserve(ctx, jobs.Job{ID: contract.NewMessageID(), Caller: "caller-a", Type: email.Welcome.Name, Key: "welcome:u-5",
		Queue: string(contract.QueueDefault), Message: "{}", CreatedAt: now, RunAt: now}, jobs.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Resume || d.Job.ID != env.MessageID {
		t.Fatalf("enqueue of the key after the pending timeout = %v (%s), %v; want Resume of the redriven job", d.Outcome, d.Job.ID, err)
	}
	// The operator runs the redrive again: it completes.
	res, err := w.redriver.Redrive(ctx, env.MessageID)
	if err != nil || res.Outcome != deadletter.Redrove || res.JobState != jobs.StatePending {
		t.Fatalf("rerun = %+v, %v", res, err)
	}
	if got := w.state(t, env.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("after the rerun: %s; want Enqueued", got)
	}
	if got := w.queued(t); len(got) != 1 {
		t.Fatalf("%d messages; want 1", len(got))
	}
}

// TestDrop: a dropped letter keeps its reason, its job reads Failed (also
// one left Pending by an unfinished redrive), and only dead letters drop.
func TestDrop(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	env := w.failedJob(t, "caller-a", "welcome:u-6", "permanent: mailbox does not exist")
	rv, _ := w.lifecycle.Inspect(ctx, env.MessageID)
	if err := w.lifecycle.Reactivate(ctx, rv, false); err != nil { // an unfinished redrive
		t.Fatal(err)
	}
	rec, _ := w.store.Get(ctx, env.MessageID)
	res, err := w.redriver.Drop(ctx, rec, deadletter.Options{})
	if err != nil || res.Outcome != deadletter.Dropped {
		t.Fatalf("drop = %+v, %v", res, err)
	}
	if got := w.state(t, env.MessageID); got != jobs.StateFailed {
		t.Fatalf("job after drop: %s; want Failed", got)
	}
	rec, _ = w.store.Get(ctx, env.MessageID)
	if rec.Status != deadletter.StatusDropped || rec.Reason != "permanent: mailbox does not exist" || rec.DroppedAt.IsZero() {
		t.Fatalf("letter after drop %+v; want dropped with its reason", rec)
	}
	if res, err := w.redriver.Drop(ctx, rec, deadletter.Options{}); err != nil || res.Outcome != deadletter.Skipped {
		t.Fatalf("second drop = %+v, %v; want skipped", res, err)
	}
	if err := w.store.MarkDropped(ctx, env.MessageID); !errors.Is(err, deadletter.ErrNotDead) {
		t.Fatalf("MarkDropped of a dropped letter = %v; want ErrNotDead", err)
	}
	if err := w.store.MarkDropped(ctx, "no-such-letter"); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("MarkDropped of a missing letter = %v; want ErrNotFound", err)
	}
	if res, err := w.redriver.Redrive(ctx, env.MessageID); err != nil || res.Outcome != deadletter.Skipped {
		t.Fatalf("redrive of a dropped letter = %+v, %v; want skipped", res, err)
	}
}
