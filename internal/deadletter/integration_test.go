//go:build integration

package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/emailtest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

const maxReceives = emailtest.MaxReceives

// world is both functions' resources on moto: the e-mail function's
// (emailtest) and the dlq function's jobs and dead-letters tables, consumer
// and redriver.
type world struct {
	*emailtest.World
	jobs                *jobs.Store
	store               *deadletter.Store
	dlqLogs, dlqMetrics *testkit.Buffer
	consumer            *deadletter.Consumer
	redriver            *deadletter.Redriver
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{World: emailtest.New(t), dlqLogs: &testkit.Buffer{}, dlqMetrics: &testkit.Buffer{}}
	jobsTable := testenv.NewTable(t, w.DB, "jobs", jobs.AttrPK, "")
	deadLetters := testenv.NewTable(t, w.DB, "dead-letters", deadletter.AttrPK, "")
	w.jobs = jobs.NewStore(w.DB, jobsTable, w.Markers)
	w.store = deadletter.NewStore(w.DB, deadLetters)
	c, err := deadletter.NewConsumer(deadletter.Config{
		Records: w.store, Markers: w.Markers, Jobs: jobs.NewRecorder(w.DB, jobsTable), Registry: contract.Registry(),
		Logger: obs.NewLogger(w.dlqLogs, "debug"), Metrics: engine.NewMetrics(w.dlqMetrics, obs.Namespace),
	})
	if err != nil {
		t.Fatal(err)
	}
	w.consumer = c
	w.redriver = deadletter.NewRedriver(w.store, sqsqueue.New(w.SQS, w.URLs(), ""), contract.Registry())
	// As jobctl wires it: the dlq function marks a dead letter's marker
	// FAILED, and the redrive clears it.
	w.redriver.Markers = marker.NewResetter(w.DB, w.Markers.Table())
	return w
}

// worker is the e-mail function wired as main.go does, with the given
// sender, and without the final-attempt hook, so that marking the job Failed
// is left to the dlq function.
func (w *world) worker(t *testing.T, sender email.Sender) *runner.Runner {
	t.Helper()
	return w.Worker(t, sender, nil)
}

// enqueue records the job and sends its message, as the enqueue function does.
func (w *world) enqueue(t *testing.T, env message.Envelope) {
	t.Helper()
	jt, err := contract.Registry().Lookup(env.Type)
	if err != nil {
		t.Fatal(err)
	}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	job := jobs.Job{ID: env.MessageID, Caller: "test", Type: env.Type, Key: env.Key, Queue: string(jt.Queue),
		CorrelationID: env.CorrelationID, Message: string(body), CreatedAt: time.Now(), RunAt: time.Now()}
	ctx := context.Background()
	if d, err := w.jobs.Reserve(ctx, job, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve: %v %v", d.Outcome, err)
	}
	w.send(t, jt.Queue, string(body), env)
	if err := w.jobs.Promote(ctx, job); err != nil {
		t.Fatal(err)
	}
}

func (w *world) send(t *testing.T, q message.Queue, body string, env message.Envelope) {
	t.Helper()
	attrs := map[string]sqstypes.MessageAttributeValue{}
	if env.Type != "" {
		attrs[sqsqueue.AttrType] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(env.Type)}
	}
	if _, err := w.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(w.Queues[q].URL), MessageBody: aws.String(body), MessageAttributes: attrs,
	}); err != nil {
		t.Fatal(err)
	}
}

// poll plays the Lambda event source mapping once: receive a batch, run it,
// delete what succeeded, and make the failures visible again at once (the
// visibility timeout, shortened). It returns the number of messages received.
func poll(t *testing.T, w *world, q testenv.Queue, handle func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) int {
	t.Helper()
	msgs := testenv.Receive(t, w.SQS, q.URL, 0)
	if len(msgs) == 0 {
		return 0
	}
	ev := events.SQSEvent{}
	for _, m := range msgs {
		ev.Records = append(ev.Records, toEvent(m, q.ARN))
	}
	resp, err := handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	ctx := context.Background()
	for _, m := range msgs {
		if failed[aws.ToString(m.MessageId)] {
			if _, err := w.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := w.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.URL), ReceiptHandle: m.ReceiptHandle}); err != nil {
			t.Fatal(err)
		}
	}
	return len(msgs)
}

func toEvent(m sqstypes.Message, arn string) events.SQSMessage {
	ev := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{}, EventSourceARN: arn,
	}
	for k, v := range m.MessageAttributes {
		ev.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: aws.ToString(v.DataType)}
	}
	return ev
}

type failingSender struct{ sends int }

func (f *failingSender) Send(context.Context, email.Message) error {
	f.sends++
	return errors.New("relay unreachable")
}

type okSender struct{ sent []email.Message }

func (o *okSender) Send(_ context.Context, m email.Message) error {
	o.sent = append(o.sent, m)
	return nil
}

// TestExhaustedRetriesReachDLQThroughRedrivePolicy: a welcome job whose send
// keeps failing is received maxReceiveCount times; moto's redrive policy
// moves it to the DLQ on the next receive; the dlq function records it with
// its reason, marks the job Failed and counts one DeadLetters even when run
// twice. A redrive then sends the same message back, and it succeeds.
func TestExhaustedRetriesReachDLQThroughRedrivePolicy(t *testing.T) {
	w := newWorld(t)
	w.PutUser(t, email.User{ID: "u-exhaust", Email: "exhaust@example.com", DisplayName: "D"})
	env := message.Envelope{V: 1, MessageID: message.NewMessageID(), Type: contract.Welcome.Name, Key: "welcome:u-exhaust",
		CorrelationID: "corr-exhaust", Args: map[string]string{"userId": "u-exhaust"}, EnqueuedAt: time.Now().UTC()}
	w.enqueue(t, env)
	sender := &failingSender{}
	worker := w.worker(t, sender)
	workQ := w.Queues[contract.QueueDefault]
	for i := 0; poll(t, w, workQ, worker.Handle) > 0; i++ {
		if i > maxReceives+2 {
			t.Fatal("the message never left the work queue")
		}
	}
	if sender.sends != maxReceives {
		t.Fatalf("%d attempts; want maxReceiveCount=%d", sender.sends, maxReceives)
	}
	if j, err := w.jobs.Get(context.Background(), env.MessageID); err != nil || j.State == jobs.StateFailed {
		t.Fatalf("job %v %v; the worker (without the final-attempt hook) must not have marked it", j.State, err)
	}
	// The dlq function, delivered the same DLQ message twice.
	dlqMsgs := testenv.Receive(t, w.SQS, w.DLQ.URL, 0)
	if len(dlqMsgs) != 1 {
		t.Fatalf("%d messages in the DLQ; want 1", len(dlqMsgs))
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{toEvent(dlqMsgs[0], w.DLQ.ARN)}}
	for range 2 {
		if resp, _ := w.consumer.Handle(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("dlq failures %v", resp.BatchItemFailures)
		}
	}
	rec, err := w.store.Get(context.Background(), env.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := env.Encode()
	switch {
	case rec.Reason != fmt.Sprintf("exceeded maxReceiveCount (%d receives)", maxReceives):
		t.Fatalf("reason %q", rec.Reason)
	case rec.Body != string(body) || rec.Type != contract.Welcome.Name || rec.ReceiveCount != maxReceives || rec.Occurrences != 1:
		t.Fatalf("record %+v", rec)
	case rec.Status != deadletter.StatusDead || rec.FirstSeen.IsZero() || rec.LastSeen.IsZero():
		t.Fatalf("record %+v", rec)
	case rec.SourceQueue == "":
		t.Fatal("no source queue")
	}
	j, err := w.jobs.Get(context.Background(), env.MessageID)
	if err != nil || j.State != jobs.StateFailed || j.LastErrorClass != deadletter.ClassMaxReceives || j.Attempts != maxReceives {
		t.Fatalf("job %+v %v; want Failed with class %s after its %d real attempts", j, err, deadletter.ClassMaxReceives, maxReceives)
	}
	if n := strings.Count(w.dlqMetrics.String(), `"DeadLetters":1`); n != 1 {
		t.Fatalf("%d DeadLetters lines for one dead letter handled twice; want 1", n)
	}
	if !strings.Contains(w.dlqLogs.String(), `"alert":true`) || !strings.Contains(w.dlqLogs.String(), `"correlationId":"corr-exhaust"`) {
		t.Fatalf("no structured alert line:\n%s", w.dlqLogs)
	}
	t.Logf("dead letter: %s (%s), job %s/%s", rec.Reason, rec.SourceQueue, j.State, j.LastErrorClass)

	// Redrive: same body, same messageId, back to the type's queue.
	w.Counter.Reset()
	res, err := w.redriver.Redrive(context.Background(), env.MessageID)
	if err != nil || res.Queue != contract.QueueDefault || res.Skipped != "" {
		t.Fatalf("redrive %+v %v", res, err)
	}
	t.Logf("AWS calls for one redrive: %s", w.Counter)
	back := testenv.Receive(t, w.SQS, workQ.URL, 0)
	if len(back) != 1 || aws.ToString(back[0].Body) != string(body) {
		t.Fatalf("redriven messages %v; want the stored body", back)
	}
	if a := back[0].MessageAttributes[sqsqueue.AttrType]; aws.ToString(a.StringValue) != contract.Welcome.Name {
		t.Fatalf("type attribute %v", a.StringValue)
	}
	if rec, _ := w.store.Get(context.Background(), env.MessageID); rec.Status != deadletter.StatusRedriven || rec.Redrives != 1 {
		t.Fatalf("record after redrive %+v", rec)
	}
	// Make it visible again and let a healthy worker run it.
	if _, err := w.SQS.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(workQ.URL), ReceiptHandle: back[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	ok := &okSender{}
	poll(t, w, workQ, w.worker(t, ok).Handle)
	if len(ok.sent) != 1 || ok.sent[0].ID != env.MessageID {
		t.Fatalf("redriven job sent %d mails", len(ok.sent))
	}
	if m, ok, err := w.Markers.Peek(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID}); err != nil || !ok || !m.Processed() {
		t.Fatalf("marker after a successful redrive: %+v %v %v; want claimed", m, ok, err)
	}
	// A claimed marker is Succeeded whatever the record says.
	if j, err := w.jobs.Get(context.Background(), env.MessageID); err != nil || j.State != jobs.StateSucceeded {
		t.Fatalf("job reads %s (%v) after a successful redrive; want Succeeded", j.State, err)
	}
	// And the letter, settled by the marker, reads succeeded: listed as
	// such, no longer as redriven (the stored record still says redriven).
	settled := deadletter.NewStore(w.DB, w.store.Table())
	settled.Markers = w.Markers
	for status, want := range map[deadletter.Status]int{deadletter.StatusSucceeded: 1, deadletter.StatusRedriven: 0} {
		got, err := settled.Select(context.Background(), deadletter.Filter{Status: status})
		if err != nil || len(got) != want || (want == 1 && (got[0].ID != env.MessageID || got[0].RedrivenAt.IsZero())) {
			t.Fatalf("letters %s after the redriven job ran: %+v, %v; want %d", status, got, err, want)
		}
	}
	if raw, _ := w.store.Get(context.Background(), env.MessageID); raw.Status != deadletter.StatusRedriven {
		t.Fatalf("stored status %s; a read never writes", raw.Status)
	}
	// Redriving it again is absorbed by the marker.
	if _, err := w.redriver.Redrive(context.Background(), env.MessageID); err != nil {
		t.Fatal(err)
	}
	poll(t, w, workQ, w.worker(t, ok).Handle)
	if len(ok.sent) != 1 {
		t.Fatal("a second redrive of a succeeded job sent again")
	}
}

// TestPoisonMessageIsDeadLetteredWithReason: a body that is not an envelope
// is sent straight to the DLQ by the worker with its reason (not after five
// blind retries); the dlq function stores the raw body under the SQS message
// id with that reason; it cannot be redriven.
func TestPoisonMessageIsDeadLetteredWithReason(t *testing.T) {
	w := newWorld(t)
	w.send(t, contract.QueueCritical, "this is not json {", message.Envelope{})
	worker := w.worker(t, &okSender{})
	if n := poll(t, w, w.Queues[contract.QueueCritical], worker.Handle); n != 1 {
		t.Fatalf("received %d", n)
	}
	if n := len(testenv.Receive(t, w.SQS, w.Queues[contract.QueueCritical].URL, 0)); n != 0 {
		t.Fatalf("poison message still in the work queue (%d)", n)
	}
	dlqMsgs := testenv.Receive(t, w.SQS, w.DLQ.URL, 0)
	if len(dlqMsgs) != 1 {
		t.Fatalf("%d DLQ messages", len(dlqMsgs))
	}
	w.Counter.Reset()
	if resp, _ := w.consumer.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{toEvent(dlqMsgs[0], w.DLQ.ARN)}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	t.Logf("AWS calls for one poison dead letter: %s", w.Counter)
	list, err := w.store.List(context.Background(), deadletter.StatusDead)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("%d dead letters", len(list))
	}
	rec := list[0]
	switch {
	case rec.ID != aws.ToString(dlqMsgs[0].MessageId):
		t.Fatalf("id %q; want the SQS message id", rec.ID)
	case rec.Body != "this is not json {" || rec.Type != deadletter.UnknownType:
		t.Fatalf("record %+v", rec)
	case !strings.Contains(rec.Reason, "invalid JSON"):
		t.Fatalf("reason %q", rec.Reason)
	case rec.SourceQueue != w.Queues[contract.QueueCritical].ARN || rec.ReceiveCount != 1:
		t.Fatalf("source %q count %d", rec.SourceQueue, rec.ReceiveCount)
	}
	if _, err := w.redriver.Redrive(context.Background(), rec.ID); !errors.Is(err, deadletter.ErrNotRedrivable) {
		t.Fatalf("redrive err %v; want ErrNotRedrivable", err)
	}
	res, err := w.redriver.RedriveAll(context.Background())
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, deadletter.ErrNotRedrivable) {
		t.Fatalf("redrive all %+v %v", res, err)
	}
	if _, err := w.redriver.Redrive(context.Background(), "no-such-id"); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("redrive of a missing id: %v", err)
	}
}

// TestSucceededJobInDLQIsRecordedNotCounted: a message whose marker is
// claimed reached the DLQ anyway; it is stored as succeeded, its job is not
// marked Failed, and nothing is counted.
func TestSucceededJobInDLQIsRecordedNotCounted(t *testing.T) {
	w := newWorld(t)
	env := message.Envelope{V: 1, MessageID: message.NewMessageID(), Type: contract.Welcome.Name, Key: "welcome:u-ok",
		CorrelationID: "corr-ok", Args: map[string]string{"userId": "u-ok"}, EnqueuedAt: time.Now().UTC()}
	w.enqueue(t, env)
	if _, err := w.Markers.Claim(context.Background(), engine.Key{Type: env.Type, JobID: env.MessageID}, engine.Mark{}); err != nil {
		t.Fatal(err)
	}
	body, _ := env.Encode()
	msg := events.SQSMessage{MessageId: "sqs-ok", Body: string(body), Attributes: map[string]string{"ApproximateReceiveCount": "6"}}
	if resp, _ := w.consumer.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{msg}}); len(resp.BatchItemFailures) != 0 {
		t.Fatal(resp.BatchItemFailures)
	}
	rec, err := w.store.Get(context.Background(), env.MessageID)
	if err != nil || rec.Status != deadletter.StatusSucceeded {
		t.Fatalf("record %+v %v", rec, err)
	}
	if j, _ := w.jobs.Get(context.Background(), env.MessageID); j.State != jobs.StateSucceeded || j.LastErrorClass != "" {
		t.Fatalf("job %+v", j)
	}
	if strings.Contains(w.dlqMetrics.String(), "DeadLetters") {
		t.Fatal("counted a succeeded job as a dead letter")
	}
	if res, err := w.redriver.Redrive(context.Background(), env.MessageID); err != nil || res.Skipped == "" {
		t.Fatalf("redrive of a succeeded letter %+v %v; want skipped", res, err)
	}
}

// TestStoreSaveOncePerDelivery checks the conditional write on DynamoDB.
func TestStoreSaveOncePerDelivery(t *testing.T) {
	w := newWorld(t)
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	w.store.Now = func() time.Time { return now }
	ctx := context.Background()
	rec := deadletter.Record{ID: "id-1", Type: "unknown", Body: "raw", Reason: "r", Status: deadletter.StatusDead}
	for i, tc := range []struct {
		sqsID   string
		wantNew bool
	}{{"a", true}, {"a", false}, {"b", true}, {"a", false}} {
		now = now.Add(time.Minute)
		isNew, err := w.store.Save(ctx, rec, tc.sqsID)
		if err != nil || isNew != tc.wantNew {
			t.Fatalf("save %d (%s): new=%v err=%v; want new=%v", i, tc.sqsID, isNew, err, tc.wantNew)
		}
	}
	got, err := w.store.Get(ctx, "id-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Occurrences != 2 || len(got.SQSMessageIDs) != 2 || !got.FirstSeen.Before(got.LastSeen) {
		t.Fatalf("record %+v; want 2 occurrences, firstSeen kept", got)
	}
	now = now.Add(deadletter.DefaultRetention)
	if _, err := w.store.Get(ctx, "id-1"); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("expired record read back: %v", err)
	}
}
