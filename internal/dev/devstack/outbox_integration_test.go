//go:build integration

package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/message"
)

// TestOutboxThroughTheStream runs the producer's transaction, the table's
// stream, the local event source and the real relay on the template's
// resources on moto: a user and its verification job's outbox item in one
// transaction make one job with one message; the same item written again,
// or relayed again after the relay died mid-batch, is still one job and
// one message; a transaction that fails its condition makes no job; a bad
// item is a dead letter (source outbox) and the good item after it goes
// through.
func TestOutboxThroughTheStream(t *testing.T) {
	srv := testenv.Moto(t)
	cfg := srv.Config()
	ctx := context.Background()
	tmpl := stack.RepoTemplate(t)
	st, err := stack.Provision(ctx, stack.NewClients(cfg), tmpl, stack.Options{StackName: testenv.Name(t, "outbox")})
	if err != nil {
		t.Fatal(err)
	}
	name := func(id string) string {
		p, ok := st.Physical(id)
		if !ok {
			t.Fatalf("no %s provisioned", id)
		}
		if p.URL != "" {
			return p.URL
		}
		return p.Name
	}
	db, q := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	urls := map[message.Queue]string{contract.QueueCritical: name("CriticalQueue"), contract.QueueDefault: name("DefaultQueue"), contract.QueueBulk: name("BulkQueue")}
	store := jobs.NewStore(db, name("JobsTable"), dynamostore.New(db, name("MarkersTable")))
	letters := deadletter.NewStore(db, name("DeadLettersTable"))
	relay := &outbox.Relay{
		Enqueuer: &enqueue.Handler{Registry: contract.Registry(), Idempotency: idempotency.NewStore(db, name("IdempotencyTable")),
			Jobs: store, Queue: sqsqueue.New(q, envvar.ByName(urls), "")},
		DeadLetters: letters, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: engine.NewMetrics(io.Discard, obs.Namespace),
	}
	// The relay's process dies once, in the middle of the batch that holds
	// the item "die": it relayed the records before it, then nothing.
	var mu sync.Mutex
	died := false
	fn := fnFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		mu.Lock()
		for i, r := range ev.Records {
			if !died && r.Change.NewImage["idempotencyKey"].String() == "signup-u-die" {
				died = true
				mu.Unlock()
				_, _ = relay.Handle(ctx, events.DynamoDBEvent{Records: ev.Records[:i+1]}) // relayed, then the crash
				return nil, errors.New("Runtime.ExitError: the relay was killed")
			}
		}
		mu.Unlock()
		resp, err := relay.Handle(ctx, ev)
		if err != nil {
			return nil, err
		}
		return json.Marshal(resp)
	})
	sources, err := StreamSources(st)
	at := slices.IndexFunc(sources, func(s StreamSource) bool { return s.Function == "outbox" })
	if err != nil || at < 0 {
		t.Fatalf("stream sources %+v, %v; want the outbox function's", sources, err)
	}
	src := sources[at]
	p := &StreamPoller{Source: src, Streams: dynamodbstreams.NewFromConfig(cfg), SQS: q, Function: fn, Region: testenv.Region,
		PollInterval: 20 * time.Millisecond, RetryDelay: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { p.Run(runCtx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	outboxTable, usersTable := name("OutboxTable"), name("UsersTable")
	signup := func(userID, key string, args any, typ string) (string, error) {
		put, jobID, err := client.OutboxPut(outboxTable, client.OutboxJob{Producer: "signup", IdempotencyKey: key, Type: typ, Args: args}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		user, err := users.NewUserPut(usersTable, email.User{ID: userID, Email: userID + "@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{user, put}})
		return jobID, err
	}
	verify := func(u string) client.PartnerVerificationArgs {
		return client.PartnerVerificationArgs{UserID: u, RoleCode: "city-partner", CountryCode: "BD"}
	}
	first, err := signup("u-1", "signup-u-1", verify("u-1"), client.TypePartnerVerification)
	if err != nil {
		t.Fatal(err)
	}
	// The same user again: the transaction fails its condition, no job.
	var cancelled *types.TransactionCanceledException
	again, err := signup("u-1", "signup-u-1-again", verify("u-1"), client.TypePartnerVerification)
	if !errors.As(err, &cancelled) {
		t.Fatalf("second signup of u-1 = %v; want the transaction cancelled", err)
	}
	// The first item written again (a producer retrying its write).
	put, _, _ := client.OutboxPut(outboxTable, client.OutboxJob{Producer: "signup", IdempotencyKey: "signup-u-1", Type: client.TypePartnerVerification, Args: verify("u-1")}, time.Now())
	if _, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{put}}); err != nil {
		t.Fatal(err)
	}
	// A bad item (written around the helper, which would refuse it), then
	// good ones, one of which the relay dies on.
	badItem := map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "signup#bad-1"}, "producer": &types.AttributeValueMemberS{Value: "signup"},
		"idempotencyKey": &types.AttributeValueMemberS{Value: "bad-1"}, "type": &types.AttributeValueMemberS{Value: client.TypeWelcome},
		"args":      &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"userId": &types.AttributeValueMemberS{Value: "a@b.c"}}},
		"expiresAt": &types.AttributeValueMemberN{Value: "4000000000"},
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(outboxTable), Item: badItem}); err != nil {
		t.Fatal(err)
	}
	var later []string
	for _, u := range []string{"u-2", "u-die", "u-3"} {
		id, err := signup(u, "signup-"+u, verify(u), client.TypePartnerVerification)
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, id)
	}
	want := append([]string{first}, later...)

	// Every job is Enqueued, with exactly one message in its queue.
	perJob := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && len(perJob) < len(want) {
		for _, m := range testenv.Receive(t, q, urls[contract.QueueCritical], 0) {
			env, err := message.Decode([]byte(aws.ToString(m.Body)))
			if err != nil {
				t.Fatal(err)
			}
			perJob[env.MessageID]++
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second) // a late second message would arrive by now
	for _, m := range testenv.Receive(t, q, urls[contract.QueueCritical], 0) {
		env, _ := message.Decode([]byte(aws.ToString(m.Body)))
		perJob[env.MessageID]++
	}
	for _, id := range want {
		j, err := store.Get(ctx, id)
		if err != nil || j.State != jobs.StateEnqueued || j.Caller != "outbox:signup" || perJob[id] != 1 {
			t.Fatalf("job %s: %+v, %v, %d messages; want Enqueued for outbox:signup with one message", id, j, err, perJob[id])
		}
	}
	if len(perJob) != len(want) {
		t.Fatalf("messages for %d jobs %v; want %d", len(perJob), perJob, len(want))
	}
	if _, err := store.Get(ctx, again); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("the cancelled transaction's job: %v; want none", err)
	}
	if !died {
		t.Fatal("the relay was never killed: the test proved nothing about a crash mid-batch")
	}
	dl, err := letters.Get(ctx, outbox.LetterID(message.DeriveMessageID("outbox:signup", "bad-1")))
	if err != nil || dl.SourceQueue != outbox.SourceOutbox || dl.Status != deadletter.StatusDead || dl.Reason == "" {
		t.Fatalf("bad item's dead letter %+v, %v; want one with its reason, source outbox", dl, err)
	}
	t.Logf("bad item's reason: %s", dl.Reason)
}
