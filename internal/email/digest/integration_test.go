//go:build integration

package digest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// mailbox is the e-mail sender: it counts the mails each address got.
type mailbox struct {
	mu  sync.Mutex
	got map[string]int
}

func (m *mailbox) Send(_ context.Context, msg email.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got[msg.To]++
	return nil
}

func (m *mailbox) count(to string) int { m.mu.Lock(); defer m.mu.Unlock(); return m.got[to] }

// awsWorld is the e-mail function on template.yaml's tables and queues (the
// users table with its sparse digest index) on moto, wired as
// functions/email wires it, with settable switches.
type awsWorld struct {
	db       *dynamodb.Client
	sqs      *sqs.Client
	st       *stack.Stack
	store    *jobs.Store
	switches *testkit.Switches
	mail     *mailbox
	worker   *runner.Runner
	bulk     string
	dlq      string
}

func newAWSWorld(t *testing.T) *awsWorld {
	t.Helper()
	cfg := testenv.Moto(t).Config()
	tmpl := stack.RepoTemplate(t)
	clients := stack.NewClients(cfg)
	clients.Scheduler = nil // no schedules: the test sends the ticks
	st, err := stack.Provision(context.Background(), clients, tmpl, stack.Options{StackName: testenv.Name(t, "digest")})
	if err != nil {
		t.Fatal(err)
	}
	w := &awsWorld{db: dynamodb.NewFromConfig(cfg), sqs: sqs.NewFromConfig(cfg), st: st, switches: &testkit.Switches{}, mail: &mailbox{got: map[string]int{}}}
	name := func(id string) string { p, _ := st.Physical(id); return p.Name }
	urls := map[message.Queue]string{}
	for q, id := range map[message.Queue]string{contract.QueueCritical: "CriticalQueue", contract.QueueDefault: "DefaultQueue", contract.QueueBulk: "BulkQueue"} {
		p, _ := st.Physical(id)
		urls[q] = p.URL
	}
	dlq, _ := st.Physical("DeadLetterQueue")
	w.bulk, w.dlq = urls[contract.QueueBulk], dlq.URL
	markers := dynamostore.New(w.db, name("MarkersTable"))
	w.store = jobs.NewStore(w.db, name("JobsTable"), markers)
	q := sqsqueue.New(w.sqs, envvar.ByName(urls), dlq.URL)
	handlers, err := email.Handlers(email.Config{Users: users.New(w.db, name("UsersTable")), Sender: w.mail, BaseURL: "http://127.0.0.1:3000"})
	if err != nil {
		t.Fatal(err)
	}
	fanout, err := digest.Handlers(digest.Config{Directory: users.NewDigestIndex(w.db, name("UsersTable")), Jobs: w.store, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	handlers[contract.Fanout.Name] = fanout[contract.Fanout.Name]
	w.worker, err = runner.New(runner.Config{
		Registry: contract.Registry(), Handlers: handlers, Switch: w.switches, Markers: markers, Ticks: jobs.TicksForEngine(w.store),
		Parker: q, DeadLetterer: q, Jobs: jobs.ForEngine(jobs.NewRecorder(w.db, name("JobsTable"))), ParkDelay: time.Second,
		Logger: obs.NewLogger(io.Discard, "error"), Metrics: engine.NewMetrics(io.Discard, obs.Namespace),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// putUser writes a user; digest "" leaves the user out of the digest index.
func (w *awsWorld) putUser(t *testing.T, id string, confirmed bool, digestOf string) string {
	t.Helper()
	addr := id + "@example.com"
	item := map[string]any{users.AttrUserID: id, users.AttrEmail: addr, users.AttrDisplayName: "User " + id, users.AttrEmailConfirmed: confirmed}
	if digestOf != "" {
		item[users.AttrDigest] = digestOf
	}
	p, _ := w.st.Physical("UsersTable")
	testenv.PutItem(t, w.db, p.Name, item)
	return addr
}

// tick sends the weekly schedule's tick for scheduled to the bulk queue, as
// the scheduler (or `jobctl schedules trigger`) does.
func (w *awsWorld) tick(t *testing.T, scheduled string) string {
	t.Helper()
	body, err := message.Tick{V: 1, Type: contract.Fanout.Name, Schedule: digest.ScheduleName, ScheduledTime: scheduled,
		CorrelationID: "exec-" + fmt.Sprint(time.Now().UnixNano())}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(w.bulk), MessageBody: aws.String(string(body))}); err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339, scheduled)
	return message.TickMessageID(digest.ScheduleName, at)
}

// run runs the worker on the bulk queue, as its event source does, until
// the queue has been empty for a moment; it returns how many records ran.
func (w *awsWorld) run(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	ran, empty := 0, 0
	for deadline := time.Now().Add(60 * time.Second); empty < 2; {
		if time.Now().After(deadline) {
			t.Fatal("the bulk queue does not drain")
		}
		out, err := w.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(w.bulk), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 2,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		var ev events.SQSEvent
		handles := map[string]string{}
		for _, m := range out.Messages {
			rec := testkit.RawRecord(aws.ToString(m.Body), 1)
			rec.MessageId, rec.Attributes = aws.ToString(m.MessageId), m.Attributes
			ev.Records = append(ev.Records, rec)
			handles[rec.MessageId] = aws.ToString(m.ReceiptHandle)
		}
		resp, err := w.worker.Handle(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range resp.BatchItemFailures {
			delete(handles, f.ItemIdentifier)
		}
		for _, h := range handles {
			if _, err := w.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(w.bulk), ReceiptHandle: aws.String(h)}); err != nil {
				t.Fatal(err)
			}
		}
		ran += len(ev.Records)
	}
	return ran
}

// The same tick delivered twice, and fired twice for the same time, is one
// job: one record, of caller schedule:partner-digest-weekly; while the
// fan-out's switch is off that job is Succeeded, skipped "switched off",
// and nothing is enqueued.
func TestTickWhileSwitchedOffIsSkipped(t *testing.T) {
	w := newAWSWorld(t)
	addr := w.putUser(t, "u-weekly", true, users.DigestWeekly)
	id := w.tick(t, "2026-12-07T09:00:00Z")
	if again := w.tick(t, "2026-12-07T09:00:00Z"); again != id {
		t.Fatalf("the same time gave another job id")
	}
	if ran := w.run(t); ran != 2 {
		t.Fatalf("%d records ran, want the two ticks and nothing they enqueued", ran)
	}
	job, err := w.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if job.State != jobs.StateSucceeded || job.LastOutcome != jobs.OutcomeSkipped || job.LastReason != engine.SkippedReason ||
		job.Caller != digest.Caller || job.Key != "partner-digest-fanout:2026-W50" {
		t.Fatalf("the tick's job %+v; want Succeeded, skipped %q, of %s", job, engine.SkippedReason, digest.Caller)
	}
	digestID := message.DeriveMessageID(digest.Caller, digest.DigestKey("u-weekly", "2026-W50"))
	if _, err := w.store.Get(context.Background(), digestID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("a digest job exists while the fan-out is off: %v", err)
	}
	if w.mail.count(addr) != 0 {
		t.Fatal("a mail went out while the fan-out was off")
	}
}

// With both switches on, every weekly user with a confirmed address gets
// one digest (over two pages of the index), nobody else gets one, and a
// second tick of the same time sends none.
func TestTickWithSwitchOnSendsOneDigestEach(t *testing.T) {
	w := newAWSWorld(t)
	w.switches.Set(contract.Fanout.Name, true)
	w.switches.Set(contract.PartnerDigest.Name, true)
	var weekly []string
	for i := range digest.PageSize + 5 {
		weekly = append(weekly, w.putUser(t, fmt.Sprintf("u-%03d", i), true, users.DigestWeekly))
	}
	unconfirmed := w.putUser(t, "u-unconfirmed", false, users.DigestWeekly)
	noDigest := w.putUser(t, "u-no-digest", true, "")

	id := w.tick(t, "2026-12-07T09:00:00Z")
	w.run(t)
	for _, addr := range weekly {
		if n := w.mail.count(addr); n != 1 {
			t.Fatalf("%s got %d digests, want 1", addr, n)
		}
	}
	if w.mail.count(unconfirmed) != 0 || w.mail.count(noDigest) != 0 {
		t.Fatal("a digest went to an unconfirmed address or a user without the weekly digest")
	}
	if job, err := w.store.Get(context.Background(), id); err != nil || job.State != jobs.StateSucceeded {
		t.Fatalf("the tick's job %+v %v", job, err)
	}
	page, err := w.store.Get(context.Background(), message.DeriveMessageID(digest.Caller, digest.PageKey("2026-W50", id, fmt.Sprintf("u-%03d", digest.PageSize-1))))
	if err != nil || page.State != jobs.StateSucceeded {
		t.Fatalf("the second page's job %+v %v", page, err)
	}

	w.tick(t, "2026-12-07T09:00:00Z")
	w.run(t)
	for _, addr := range weekly {
		if n := w.mail.count(addr); n != 1 {
			t.Fatalf("after a second tick of the same time %s has %d digests, want 1", addr, n)
		}
	}
}

// Odd user ids in the real sparse index (DynamoDB's order, its Query
// paging with a filter): an id with '@' in the middle of page 1 and one
// with ':' as the last item page 1 reads get no digest and stop nothing;
// every other weekly user gets one, and no page is dead-lettered.
func TestOddUserIDsOnTheIndex(t *testing.T) {
	w := newAWSWorld(t)
	w.switches.Set(contract.Fanout.Name, true)
	w.switches.Set(contract.PartnerDigest.Name, true)
	var weekly []string
	for i := range digest.PageSize + 20 {
		weekly = append(weekly, w.putUser(t, fmt.Sprintf("u-%03d", i), true, users.DigestWeekly))
	}
	w.putUser(t, "u-001@example", true, users.DigestWeekly) // mid page 1
	w.putUser(t, "u-097:x", true, users.DigestWeekly)       // u-000…u-097, the two odd ones: the 100th read is u-097:x
	w.tick(t, "2026-12-07T09:00:00Z")
	w.run(t)
	for _, addr := range weekly {
		if n := w.mail.count(addr); n != 1 {
			t.Fatalf("%s got %d digests, want 1", addr, n)
		}
	}
	if n := w.mail.count("u-001@example@example.com") + w.mail.count("u-097:x@example.com"); n != 0 {
		t.Fatalf("an odd id got %d digests", n)
	}
	out, err := w.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(w.dlq),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	if n := out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]; n != "0" {
		t.Fatalf("%s dead letters, want none", n)
	}
}
