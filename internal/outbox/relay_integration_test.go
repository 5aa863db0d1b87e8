//go:build integration

package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/message"
)

// motoRelay is the relay on moto: the API's enqueue path on real tables and
// queues, the real dead-letters table, and an outbox table the items are
// written to first, so DynamoDB has accepted every item the relay reads.
type motoRelay struct {
	relay   *outbox.Relay
	db      *dynamodb.Client
	sqs     *sqs.Client
	urls    map[string]string
	jobs    *jobs.Store
	letters *deadletter.Store
	outbox  string
	logs    *testkit.Buffer
}

func newMotoRelay(t *testing.T) *motoRelay {
	t.Helper()
	cfg := testenv.Moto(t).Config()
	db, sq := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	markers := dynamostore.New(db, testenv.NewTable(t, db, "markers", dynamostore.AttrHandler, dynamostore.AttrMessageKey))
	m := &motoRelay{db: db, sqs: sq, urls: testenv.CreateWorkQueues(t, sq, testenv.Name(t, "q")+"-", 0).URLs(),
		jobs:    jobs.NewStore(db, testenv.NewTable(t, db, "jobs", jobs.AttrPK, ""), markers),
		letters: deadletter.NewStore(db, testenv.NewTable(t, db, "dead-letters", deadletter.AttrPK, "")),
		outbox:  testenv.NewTable(t, db, "outbox", contract.OutboxAttrPK, ""), logs: &testkit.Buffer{}}
	m.relay = &outbox.Relay{
		Enqueuer: &enqueue.Handler{Registry: contract.Registry(), Idempotency: idempotency.NewStore(db, testenv.NewTable(t, db, "idem", idempotency.AttrPK, "")),
			Jobs: m.jobs, Queue: sqsqueue.New(sq, m.urls, "")},
		DeadLetters: m.letters, Logger: obs.NewLogger(m.logs, "debug"), Metrics: engine.NewMetrics(io.Discard, obs.Namespace),
	}
	return m
}

// item is an outbox item: its string attributes and its args.
type item struct {
	attrs, args map[string]string
}

// welcomeItem is producer's item with key for a welcome job of userID,
// its pk and producer attribute as given.
func welcomeItem(pk, producer, key, userID string) item {
	return item{attrs: map[string]string{"pk": pk, "producer": producer, "idempotencyKey": key, "type": contract.Welcome.Name},
		args: map[string]string{"userId": userID}}
}

const itemExpiresAt = "4000000000"

// size is the item's size as DynamoDB counts it: each attribute's name
// and value in UTF-8 bytes, a map's 3 bytes and 1 byte per element, a
// number's (at most) 21 bytes.
func (it item) size() int {
	n := len("expiresAt") + 21 + len("args") + 3
	for k, v := range it.attrs {
		n += len(k) + len(v)
	}
	for k, v := range it.args {
		n += len(k) + len(v) + 1
	}
	return n
}

func (it item) sdk() map[string]types.AttributeValue {
	args := map[string]types.AttributeValue{}
	for k, v := range it.args {
		args[k] = &types.AttributeValueMemberS{Value: v}
	}
	out := map[string]types.AttributeValue{"args": &types.AttributeValueMemberM{Value: args}, "expiresAt": &types.AttributeValueMemberN{Value: itemExpiresAt}}
	for k, v := range it.attrs {
		out[k] = &types.AttributeValueMemberS{Value: v}
	}
	return out
}

func (it item) image() map[string]events.DynamoDBAttributeValue {
	args := map[string]events.DynamoDBAttributeValue{}
	for k, v := range it.args {
		args[k] = events.NewStringAttribute(v)
	}
	out := map[string]events.DynamoDBAttributeValue{"args": events.NewMapAttribute(args), "expiresAt": events.NewNumberAttribute(itemExpiresAt)}
	for k, v := range it.attrs {
		out[k] = events.NewStringAttribute(v)
	}
	return out
}

// write puts each item in the outbox table (DynamoDB accepts it) and
// returns the stream records the relay would get for them, in order.
func (m *motoRelay) write(t *testing.T, items ...item) []events.DynamoDBEventRecord {
	t.Helper()
	var recs []events.DynamoDBEventRecord
	for _, it := range items {
		if _, err := m.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(m.outbox), Item: it.sdk()}); err != nil {
			t.Fatalf("the outbox table refused item %s (%d bytes): %v", it.attrs["pk"], it.size(), err)
		}
		recs = append(recs, record("INSERT", it.image()))
	}
	return recs
}

func (m *motoRelay) handle(t *testing.T, recs ...events.DynamoDBEventRecord) []string {
	t.Helper()
	resp, err := m.relay.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	return failed
}

// enqueued fails the test unless each job is Enqueued with one message in
// the welcome type's queue.
func (m *motoRelay) enqueued(t *testing.T, ids ...string) {
	t.Helper()
	seen := map[string]int{}
	for range 5 {
		for _, msg := range testenv.Receive(t, m.sqs, m.urls[string(contract.Welcome.Queue)], 0) {
			env, err := message.Decode([]byte(aws.ToString(msg.Body)))
			if err != nil {
				t.Fatal(err)
			}
			seen[env.MessageID]++
		}
	}
	for _, id := range ids {
		j, err := m.jobs.Get(context.Background(), id)
		if err != nil || j.State != jobs.StateEnqueued || seen[id] != 1 {
			t.Fatalf("job %s: %+v, %v, %d messages; want Enqueued with one message (messages %v)", id, j, err, seen[id], seen)
		}
	}
}

// TestIntegrationALetterAlwaysFitsAndTheShardGoesOn: a bad item of 70 KB
// full of <, > and & (JSON escapes each as six bytes), and the largest
// item DynamoDB accepts, full of them too, are each a stored dead letter,
// and the good items after them in the same batch are relayed. The 70 KB
// item's letter keeps it whole; the largest one's keeps its key, its
// fields' sizes and an excerpt, says so, and is refused by a redrive.
func TestIntegrationALetterAlwaysFitsAndTheShardGoesOn(t *testing.T) {
	m := newMotoRelay(t)
	ctx := context.Background()
	mid := welcomeItem("signup#bad-70k", "signup", "bad-70k", strings.Repeat("<>&", 70<<10/3))
	largest := welcomeItem("signup#bad-largest", "signup", "bad-largest", "")
	largest.args["userId"] = strings.Repeat("<>&", (399_990-largest.size())/3)
	if n := largest.size(); n < 399_000 || n >= 400_000 {
		t.Fatalf("the largest item is %d bytes; want just under 400 KB", n)
	}
	goods := []string{"ok-1", "ok-2", "ok-3"}
	var ids []string
	for _, k := range goods {
		ids = append(ids, message.DeriveMessageID("outbox:signup", k))
	}
	recs := m.write(t, welcomeItem("signup#ok-1", "signup", "ok-1", "u-1"), mid, welcomeItem("signup#ok-2", "signup", "ok-2", "u-2"),
		largest, welcomeItem("signup#ok-3", "signup", "ok-3", "u-3"))
	if failed := m.handle(t, recs...); len(failed) != 0 {
		t.Fatalf("failures %v; a bad item never blocks its shard (logs: %s)", failed, m.logs)
	}
	m.enqueued(t, ids...)

	whole, err := m.letters.Get(ctx, outbox.LetterID(message.DeriveMessageID("outbox:signup", "bad-70k")))
	if err != nil {
		t.Fatalf("the 70 KB item's letter: %v", err)
	}
	var body struct {
		PK   string            `json:"pk"`
		Args map[string]string `json:"args"`
	}
	if err := json.Unmarshal([]byte(whole.Body), &body); err != nil || body.PK != "signup#bad-70k" || body.Args["userId"] != mid.args["userId"] || whole.BodyTruncated {
		t.Fatalf("the 70 KB item's letter (%d bytes of body, truncated %t, %v); want the whole item as JSON", len(whole.Body), whole.BodyTruncated, err)
	}

	cut, err := m.letters.Get(ctx, outbox.LetterID(message.DeriveMessageID("outbox:signup", "bad-largest")))
	if err != nil {
		t.Fatalf("the largest item's letter: %v", err)
	}
	var summary struct {
		PK      string         `json:"pk"`
		Fields  map[string]int `json:"fields"`
		Excerpt string         `json:"excerpt"`
	}
	if err := json.Unmarshal([]byte(cut.Body), &summary); err != nil {
		t.Fatalf("the largest item's letter's body is not JSON: %v", err)
	}
	wantFields := []string{"args", "expiresAt", "idempotencyKey", "pk", "producer", "type"}
	switch {
	case summary.PK != "signup#bad-largest" || !slices.Equal(slices.Sorted(maps.Keys(summary.Fields)), wantFields):
		t.Fatalf("summary pk %q, fields %v; want the item's key and its fields", summary.PK, summary.Fields)
	case summary.Fields["args"] < 399_000-100 || summary.Excerpt == "" || !utf8.ValidString(summary.Excerpt):
		t.Fatalf("summary fields %v, excerpt %d bytes; want the args' size and an excerpt", summary.Fields, len(summary.Excerpt))
	case !cut.BodyTruncated || cut.BodyBytes < 399_000 || !strings.Contains(cut.Reason, "cannot be redriven as it is"):
		t.Fatalf("letter truncated %t, %d bytes, reason %q; want it marked shortened", cut.BodyTruncated, cut.BodyBytes, cut.Reason)
	case cut.JobID != message.DeriveMessageID("outbox:signup", "bad-largest") || cut.SourceQueue != outbox.SourceOutbox:
		t.Fatalf("letter %s of job %s from %s", cut.ID, cut.JobID, cut.SourceQueue)
	}
	redriver := deadletter.NewRedriver(m.letters, sqsqueue.New(m.sqs, m.urls, ""), contract.Registry())
	if _, err := redriver.Redrive(ctx, cut.ID); !errors.Is(err, deadletter.ErrNotRedrivable) || !strings.Contains(err.Error(), "shortened") {
		t.Fatalf("redrive of a shortened letter: %v; want ErrNotRedrivable saying why", err)
	}
}

// TestIntegrationALetterIsFiledUnderTheKeysProducer: producer billing may
// write only keys billing#…; its item claiming producer signup is refused,
// and its letter is billing's (under billing's job id), never signup's:
// signup's own letter for the same idempotency key is left as it was.
func TestIntegrationALetterIsFiledUnderTheKeysProducer(t *testing.T) {
	m := newMotoRelay(t)
	ctx := context.Background()
	signupJob, billingJob := message.DeriveMessageID("outbox:signup", "k-1"), message.DeriveMessageID("outbox:billing", "k-1")
	own := m.write(t, welcomeItem("signup#k-1", "signup", "k-1", "someone@example.com"))
	if failed := m.handle(t, own...); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	before, err := m.letters.Get(ctx, outbox.LetterID(signupJob))
	if err != nil {
		t.Fatalf("signup's own letter: %v", err)
	}
	forged := m.write(t, welcomeItem("billing#k-1", "signup", "k-1", "u-9"))
	if failed := m.handle(t, forged...); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	after, err := m.letters.Get(ctx, outbox.LetterID(signupJob))
	if err != nil || after.Body != before.Body || after.Reason != before.Reason || after.Occurrences != 1 {
		t.Fatalf("signup's letter became %+v (%v); want it as it was: %+v", after, err, before)
	}
	billing, err := m.letters.Get(ctx, outbox.LetterID(billingJob))
	if err != nil || billing.JobID != billingJob || !strings.Contains(billing.Reason, "pk must be") || !strings.Contains(billing.Body, "billing#k-1") {
		t.Fatalf("billing's letter %+v (%v); want one under billing's job %s with the reason", billing, err, billingJob)
	}
	all, err := m.letters.List(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("%d letters (%v); want signup's and billing's", len(all), err)
	}
}
