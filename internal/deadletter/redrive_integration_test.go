//go:build integration

package deadletter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/deadlettertest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/message"
)

// opsWorld is what an operator's redrive touches, on moto
// (deadlettertest), with the redriver on it.
type opsWorld struct {
	*deadlettertest.World
	redriver  *deadletter.Redriver
	lifecycle *jobs.Lifecycle
}

func newOpsWorld(t *testing.T) *opsWorld {
	t.Helper()
	w := &opsWorld{World: deadlettertest.New(t, deadlettertest.Unique(t))}
	w.lifecycle = jobs.NewLifecycle(w.DB, w.Names.Jobs)
	w.redriver = deadletter.NewRedriver(w.Letters, sqsqueue.New(w.SQS, w.URLs(), ""), contract.Registry())
	w.redriver.Jobs, w.redriver.Markers = w.lifecycle, marker.NewResetter(w.DB, w.Names.Markers)
	return w
}

// failedJob enqueues a welcome job for caller and key, fails it, and stores
// its dead letter with reason, as the enqueue and dlq functions do.
func (w *opsWorld) failedJob(t *testing.T, caller, key, reason string) message.Envelope {
	t.Helper()
	return w.Letter(t, contract.Welcome.Name, caller, key, reason, time.Now())
}

func (w *opsWorld) queued(t *testing.T) []string {
	t.Helper()
	var bodies []string
	for _, m := range testenv.Receive(t, w.SQS, w.Queues[contract.QueueDefault].URL, 0) {
		bodies = append(bodies, aws.ToString(m.Body))
	}
	return bodies
}

// wantQueuedOnce fails t unless the default queue holds env's message, and
// only it, once.
func (w *opsWorld) wantQueuedOnce(t *testing.T, env message.Envelope) {
	t.Helper()
	body, _ := env.Encode()
	if got := w.queued(t); len(got) != 1 || got[0] != string(body) {
		t.Fatalf("queue holds %q; want %s's stored body once", got, env.MessageID)
	}
}

// putFailedMarker writes what a claim-then-effect job leaves when its effect
// failed after its claim.
func (w *opsWorld) putFailedMarker(t *testing.T, env message.Envelope) {
	t.Helper()
	testenv.PutItem(t, w.DB, w.Names.Markers, map[string]any{
		dynamostore.AttrHandler:    dynamostore.PartitionKey(engine.Key{Type: env.Type, JobID: env.MessageID}),
		dynamostore.AttrMessageKey: env.MessageID, dynamostore.AttrState: "FAILED",
		dynamostore.AttrExpiresAt: time.Now().Add(time.Hour).Unix(),
	})
}

// TestRedriveMakesFailedJobActive: the redriven job reads Enqueued, its
// FAILED marker is cleared, its message is back under the same id, and an
// enqueue of the same key dedups onto it instead of admitting a twin.
func TestRedriveMakesFailedJobActive(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	env := w.failedJob(t, "caller-a", "welcome:u-1", "permanent: provider refused")
	w.putFailedMarker(t, env)
	if got := w.State(t, env.MessageID); got != jobs.StateFailed {
		t.Fatalf("before: %s", got)
	}
	w.Counter.Reset()
	res, err := w.redriver.Redrive(ctx, env.MessageID)
	if err != nil || res.Outcome != deadletter.Redrove || res.JobState != jobs.StateFailed {
		t.Fatalf("redrive = %+v, %v", res, err)
	}
	t.Logf("AWS calls for one redrive that reactivates its job: %s", w.Counter)
	if got := w.State(t, env.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("job after redrive: %s; want Enqueued", got)
	}
	if _, ok, err := w.Markers.Peek(ctx, engine.Key{Type: env.Type, JobID: env.MessageID}); ok || err != nil {
		t.Fatalf("FAILED marker still there after the redrive (%v)", err)
	}
	w.wantQueuedOnce(t, env)
	twin := message.Envelope{MessageID: message.NewMessageID()}
	now := time.Now()
	d, err := w.Jobs.Reserve(ctx, jobs.Job{ID: twin.MessageID, Caller: "caller-a", Type: contract.Welcome.Name, Key: "welcome:u-1",
		Queue: string(contract.QueueDefault), Message: "{}", CreatedAt: now, RunAt: now}, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Duplicate || d.Job.ID != env.MessageID {
		t.Fatalf("AllowAfterFailed enqueue of the redriven key = %v (%s), %v; want Duplicate of the redriven job", d.Outcome, d.Job.ID, err)
	}
	if rec, _ := w.Letters.Get(ctx, env.MessageID); rec.Status != deadletter.StatusRedriven {
		t.Fatalf("letter %s; want redriven", rec.Status)
	}
}

// TestRedriveSendsAWebhookToItsQueue: a webhook job's dead letter is
// redriven to the webhooks queue, its type's, not to the e-mail queues,
// and the job is active again.
func TestRedriveSendsAWebhookToItsQueue(t *testing.T) {
	w := newOpsWorld(t)
	env := w.DeadLetter(t, w.EnqueueWith(t, contract.WebhookDeliver.Name, "caller-a", "webhook:evt-9",
		map[string]string{"eventId": "evt-9"}, contract.WebhookDeliver.Queue), "permanent: the receiver refused the event: HTTP 410", time.Now())
	res, err := w.redriver.Redrive(context.Background(), env.MessageID)
	if err != nil || res.Outcome != deadletter.Redrove || res.Queue != contract.QueueWebhooks {
		t.Fatalf("redrive = %+v, %v; want redriven to webhooks", res, err)
	}
	body, _ := env.Encode()
	if got := testenv.Receive(t, w.SQS, w.Queues[contract.QueueWebhooks].URL, 0); len(got) != 1 || aws.ToString(got[0].Body) != string(body) {
		t.Fatalf("webhooks queue holds %d messages; want the letter's body once", len(got))
	}
	if got := w.queued(t); len(got) != 0 {
		t.Fatalf("the default queue holds %q; want nothing", got)
	}
	if got := w.State(t, env.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("job after redrive: %s; want Enqueued", got)
	}
}

// TestRedriveSupersededLeftAloneUnlessForced: a newer job took the key; the
// letter is reported superseded and nothing is sent or written, until
// --force, which redrives it and leaves the key with the newer job.
func TestRedriveSupersededLeftAloneUnlessForced(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	old := w.failedJob(t, "caller-a", "welcome:u-2", "exceeded maxReceiveCount (5 receives)")
	newer := w.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-2")
	w.Counter.Reset()
	res, err := w.redriver.Redrive(ctx, old.MessageID)
	if err != nil || res.Outcome != deadletter.Superseded || res.SupersededBy != newer.MessageID {
		t.Fatalf("redrive = %+v, %v; want superseded by %s", res, err, newer.MessageID)
	}
	if n := w.Counter.Sum("SQS.SendMessage", "DynamoDB.UpdateItem", "DynamoDB.PutItem", "DynamoDB.DeleteItem", "DynamoDB.TransactWriteItems"); n != 0 {
		t.Fatalf("a superseded letter was touched: %s", w.Counter)
	}
	if got := w.State(t, old.MessageID); got != jobs.StateFailed {
		t.Fatalf("superseded job reads %s; want Failed", got)
	}
	res, err = w.redriver.RedriveWith(ctx, old.MessageID, deadletter.Options{Force: true})
	if err != nil || res.Outcome != deadletter.Redrove {
		t.Fatalf("forced redrive = %+v, %v", res, err)
	}
	if got := w.State(t, old.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("forced: job reads %s; want Enqueued", got)
	}
	if rv, _ := w.lifecycle.Inspect(ctx, old.MessageID); rv.SupersededBy != newer.MessageID {
		t.Fatalf("the forced redrive took the key from the newer job: %+v", rv)
	}
	w.wantQueuedOnce(t, old)
}

// TestDryRunChangesNothing: a dry run of redrive and drop reads, and neither
// sends nor writes.
func TestDryRunChangesNothing(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	a := w.failedJob(t, "caller-a", "welcome:u-3", "permanent: bounced")
	w.putFailedMarker(t, a)
	b := w.failedJob(t, "caller-a", "welcome:u-4", "exceeded maxReceiveCount (5 receives)")
	w.Enqueue(t, contract.Welcome.Name, "caller-a", "welcome:u-4") // b is superseded
	recs, err := w.Letters.Select(ctx, deadletter.Filter{Status: deadletter.StatusDead})
	if err != nil || len(recs) != 2 {
		t.Fatalf("select %d, %v", len(recs), err)
	}
	w.Counter.Reset()
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
	t.Logf("AWS calls of the dry runs: %s", w.Counter)
	if n := w.Counter.Sum("SQS.SendMessage", "DynamoDB.UpdateItem", "DynamoDB.PutItem", "DynamoDB.DeleteItem", "DynamoDB.TransactWriteItems", "DynamoDB.BatchWriteItem"); n != 0 {
		t.Fatalf("a dry run wrote or sent: %s", w.Counter)
	}
	if w.Counter.Get("DynamoDB.GetItem") == 0 {
		t.Fatalf("the dry run did not even read: %s", w.Counter)
	}
	for _, env := range []message.Envelope{a, b} {
		if got := w.State(t, env.MessageID); got != jobs.StateFailed {
			t.Fatalf("job %s after dry runs; want Failed", got)
		}
	}
	if _, ok, _ := w.Markers.Peek(ctx, engine.Key{Type: a.Type, JobID: a.MessageID}); !ok {
		t.Fatal("a dry run cleared a FAILED marker")
	}
	if got := w.queued(t); len(got) != 0 {
		t.Fatalf("a dry run sent %d messages", len(got))
	}
}

// downSQS fails every send, as an SQS outage would.
type downSQS struct{}

func (downSQS) Send(context.Context, sqsqueue.Message) error {
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
	failing := deadletter.NewRedriver(w.Letters, downSQS{}, contract.Registry())
	failing.Jobs, failing.Markers = w.lifecycle, marker.NewResetter(w.DB, w.Names.Markers)
	if _, err := failing.Redrive(ctx, env.MessageID); err == nil {
		t.Fatal("a redrive whose send failed reported success")
	}
	if got := w.State(t, env.MessageID); got != jobs.StateFailed {
		t.Fatalf("after a failed send the job reads %s; want Failed", got)
	}
	if rec, _ := w.Letters.Get(ctx, env.MessageID); rec.Status != deadletter.StatusDead {
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
	if got := w.State(t, env.MessageID); got != jobs.StatePending {
		t.Fatalf("after a crash before the send the job reads %s; want Pending (never Enqueued with nothing queued)", got)
	}
	store := *w.Jobs
	store.Now = func() time.Time { return time.Now().Add(jobs.DefaultPendingTimeout + time.Second) }
	now := time.Now()
	d, err := store.Reserve(ctx, jobs.Job{ID: message.NewMessageID(), Caller: "caller-a", Type: contract.Welcome.Name, Key: "welcome:u-5",
		Queue: string(contract.QueueDefault), Message: "{}", CreatedAt: now, RunAt: now}, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Resume || d.Job.ID != env.MessageID {
		t.Fatalf("enqueue of the key after the pending timeout = %v (%s), %v; want Resume of the redriven job", d.Outcome, d.Job.ID, err)
	}
	// The operator runs the redrive again: it completes.
	res, err := w.redriver.Redrive(ctx, env.MessageID)
	if err != nil || res.Outcome != deadletter.Redrove || res.JobState != jobs.StatePending {
		t.Fatalf("rerun = %+v, %v", res, err)
	}
	if got := w.State(t, env.MessageID); got != jobs.StateEnqueued {
		t.Fatalf("after the rerun: %s; want Enqueued", got)
	}
	w.wantQueuedOnce(t, env)
}

// TestDrop (which starts, as every redrive test does, from a failed job in a
// new world): a dropped letter keeps its reason, its job reads Failed (also
// one left Pending by an unfinished redrive), and only dead letters drop.
func TestDrop(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	env := w.failedJob(t, "caller-a", "welcome:u-6", "permanent: mailbox does not exist")
	rv, _ := w.lifecycle.Inspect(ctx, env.MessageID)
	if err := w.lifecycle.Reactivate(ctx, rv, false); err != nil { // an unfinished redrive
		t.Fatal(err)
	}
	rec, _ := w.Letters.Get(ctx, env.MessageID)
	res, err := w.redriver.Drop(ctx, rec, deadletter.Options{})
	if err != nil || res.Outcome != deadletter.Dropped {
		t.Fatalf("drop = %+v, %v", res, err)
	}
	if got := w.State(t, env.MessageID); got != jobs.StateFailed {
		t.Fatalf("job after drop: %s; want Failed", got)
	}
	rec, _ = w.Letters.Get(ctx, env.MessageID)
	if rec.Status != deadletter.StatusDropped || rec.Reason != "permanent: mailbox does not exist" || rec.DroppedAt.IsZero() {
		t.Fatalf("letter after drop %+v; want dropped with its reason", rec)
	}
	if res, err := w.redriver.Drop(ctx, rec, deadletter.Options{}); err != nil || res.Outcome != deadletter.Skipped {
		t.Fatalf("second drop = %+v, %v; want skipped", res, err)
	}
	if err := w.Letters.MarkDropped(ctx, env.MessageID); !errors.Is(err, deadletter.ErrNotDead) {
		t.Fatalf("MarkDropped of a dropped letter = %v; want ErrNotDead", err)
	}
	if err := w.Letters.MarkDropped(ctx, "no-such-letter"); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("MarkDropped of a missing letter = %v; want ErrNotFound", err)
	}
	if res, err := w.redriver.Redrive(ctx, env.MessageID); err != nil || res.Outcome != deadletter.Skipped {
		t.Fatalf("redrive of a dropped letter = %+v, %v; want skipped", res, err)
	}
}

// On moto, end to end: the dlq consumer records a tick EventBridge
// Scheduler could not deliver (its schedule and type stored, its marker
// FAILED), and the redrive sends the same tick to its type's queue (bulk)
// with the tick type's attribute, its FAILED marker reset, the letter
// redriven.
func TestSchedulerTickLetterRedrivenAsATick(t *testing.T) {
	w := newOpsWorld(t)
	ctx := context.Background()
	c, err := deadletter.NewConsumer(deadletter.Config{Records: w.Letters, Markers: w.Markers, Jobs: w.Recorder, Registry: contract.Registry()})
	if err != nil {
		t.Fatal(err)
	}
	msg := schedulerLetter(tickBody, schedulerAttrs(
		"arn:aws:scheduler:us-east-1:123456789012:schedule/runstwice-test-recurring/partner-digest-weekly", w.Queues[contract.QueueBulk].ARN,
		"AWS.SimpleQueueService.NonExistentQueue", "0", ""))
	if resp, _ := c.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	tick, _ := message.DecodeTick([]byte(tickBody))
	env, _ := contract.Registry().TickEnvelope(tick)
	rec, err := w.Letters.Get(ctx, env.MessageID)
	if err != nil || rec.Schedule != "partner-digest-weekly" || rec.Type != contract.Fanout.Name || rec.SourceQueue != w.Queues[contract.QueueBulk].ARN {
		t.Fatalf("stored letter %+v, %v; want the tick's job, type and schedule", rec, err)
	}
	key := engine.Key{Type: env.Type, JobID: env.MessageID}
	if m, ok, _ := w.Markers.Peek(ctx, key); !ok || !m.Settled() {
		t.Fatalf("marker %+v (%v); want FAILED", m, ok)
	}
	res, err := w.redriver.Redrive(ctx, env.MessageID)
	if err != nil || res.Outcome != deadletter.Redrove || res.Queue != contract.QueueBulk {
		t.Fatalf("redrive %+v, %v; want redriven to bulk", res, err)
	}
	got := testenv.Receive(t, w.SQS, w.Queues[contract.QueueBulk].URL, time.Second)
	if len(got) != 1 || aws.ToString(got[0].Body) != tickBody || aws.ToString(got[0].MessageAttributes[sqsqueue.AttrType].StringValue) != contract.Fanout.Name {
		t.Fatalf("bulk queue holds %+v; want the tick once, as a tick", got)
	}
	if _, ok, _ := w.Markers.Peek(ctx, key); ok {
		t.Fatal("the tick's FAILED marker was not reset: the redriven tick would be dropped")
	}
	if rec, _ := w.Letters.Get(ctx, env.MessageID); rec.Status != deadletter.StatusRedriven {
		t.Fatalf("letter %s; want redriven", rec.Status)
	}
}
