//go:build integration

package moto

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptrace"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// TestTransactionsAllOrNothing: with the launcher's item-level backups, a
// transaction still applies all its operations or none, and transactions
// under concurrent writes never fail inside moto.
func TestTransactionsAllOrNothing(t *testing.T) {
	s := startMoto(t)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(Config(s.Endpoint, Region))
	for _, name := range []string{"a", "b"} {
		createTable(t, db, name)
	}
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	put := func(table, pk, v string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": str(pk), "v": str(v)},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}}
	}
	get := func(table, pk string) string {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"pk": str(pk)}})
		if err != nil {
			t.Fatal(err)
		}
		if v, ok := out.Item["v"].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	tx := func(items ...types.TransactWriteItem) error {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}
	if err := tx(put("a", "k1", "one"), put("b", "k1", "one")); err != nil {
		t.Fatal(err)
	}
	// The second put fails its condition: the update and the new item are
	// rolled back, the existing items keep their values.
	update := types.TransactWriteItem{Update: &types.Update{TableName: aws.String("a"), Key: map[string]types.AttributeValue{"pk": str("k1")},
		UpdateExpression: aws.String("SET v = :v"), ExpressionAttributeValues: map[string]types.AttributeValue{":v": str("changed")}}}
	err := tx(update, put("a", "k2", "new"), put("b", "k1", "again"))
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		t.Fatalf("transaction = %v; want it cancelled", err)
	}
	if got := get("a", "k1"); got != "one" {
		t.Errorf("a/k1 = %q after a cancelled transaction; want one", got)
	}
	if got := get("a", "k2"); got != "" {
		t.Errorf("a/k2 = %q after a cancelled transaction; want no item", got)
	}
	if got := get("b", "k1"); got != "one" {
		t.Errorf("b/k1 = %q; want one", got)
	}
	del := types.TransactWriteItem{Delete: &types.Delete{TableName: aws.String("b"), Key: map[string]types.AttributeValue{"pk": str("k1")}}}
	if err := tx(update, del); err != nil {
		t.Fatal(err)
	}
	if get("a", "k1") != "changed" || get("b", "k1") != "" {
		t.Fatal("a successful transaction did not apply all its operations")
	}

	// Transactions while other writers fill the tables: no internal errors.
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				pk := fmt.Sprintf("w%d-%d", w, i)
				if w%2 == 0 {
					errs <- tx(put("a", pk, "x"), put("b", pk, "x"))
				} else {
					_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("a"), Item: map[string]types.AttributeValue{"pk": str(pk), "v": str("x")}})
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent write: %v", err)
		}
	}
}

// TestSendMessageUnchanged: with the launcher's cheap attribute read on
// send, FIFO content-based deduplication still works and the queue's
// attributes still count its messages.
func TestSendMessageUnchanged(t *testing.T) {
	s := startMoto(t)
	ctx := context.Background()
	q := sqs.NewFromConfig(Config(s.Endpoint, Region))
	fifo, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("f.fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("plain")})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("same"), MessageGroupId: aws.String("g")}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: plain.QueueUrl, MessageBody: aws.String("same")}); err != nil {
			t.Fatal(err)
		}
	}
	// Without a group id on a FIFO queue the send is still refused.
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: fifo.QueueUrl, MessageBody: aws.String("x")}); err == nil {
		t.Fatal("a FIFO send without MessageGroupId was accepted")
	}
	for url, want := range map[*string]string{fifo.QueueUrl: "1", plain.QueueUrl: "3"} {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Attributes["ApproximateNumberOfMessages"]; got != want {
			t.Errorf("%s holds %s messages; want %s (attributes %v)", aws.ToString(url), got, want, out.Attributes)
		}
	}
}

// TestReceiveReadsRetentionDirectly: a message within its queue's
// retention period is received (the launcher reads the period from the
// queue instead of computing every attribute).
func TestReceiveReadsRetentionDirectly(t *testing.T) {
	s := startMoto(t)
	ctx := context.Background()
	q := sqs.NewFromConfig(Config(s.Endpoint, Region))
	short, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("short"), Attributes: map[string]string{"MessageRetentionPeriod": "60"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: short.QueueUrl, MessageBody: aws.String("kept")}); err != nil {
		t.Fatal(err)
	}
	out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: short.QueueUrl, MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive = %v, %v; want the message within its retention", out, err)
	}
	if aws.ToString(out.Messages[0].Body) != "kept" {
		t.Fatalf("body %q", aws.ToString(out.Messages[0].Body))
	}
}

// createTable creates an on-demand table keyed by the string "pk" (this
// package cannot use testenv, which starts moto through it).
func createTable(t *testing.T, db *dynamodb.Client, name string) {
	t.Helper()
	if _, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
}

// startMoto starts a moto of its own for the test, through the launcher.
func startMoto(t *testing.T) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	if scriptPython(bin) == "" {
		t.Fatalf("%s is not a Python entry point: the launcher would not be used", bin)
	}
	s, err := StartFree(bin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// TestConcurrentWritesAreAtomic: of many conditional puts of one item at
// once exactly one wins, and a transaction cancelled meanwhile never undoes
// another call's write (DynamoDB applies each call atomically).
func TestConcurrentWritesAreAtomic(t *testing.T) {
	s := startMoto(t)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(Config(s.Endpoint, Region))
	createTable(t, db, "c")
	str := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	for round := range 20 {
		pk := fmt.Sprint("k", round)
		var wg sync.WaitGroup
		wins := make(chan int, 16)
		for w := range 8 {
			wg.Go(func() {
				_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("c"),
					Item:                map[string]types.AttributeValue{"pk": str(pk), "w": str(fmt.Sprint(w))},
					ConditionExpression: aws.String("attribute_not_exists(pk)")})
				if err == nil {
					wins <- w
				}
			})
			// Cancelled transactions on the same item at the same time.
			wg.Go(func() {
				_, _ = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
					{Update: &types.Update{TableName: aws.String("c"), Key: map[string]types.AttributeValue{"pk": str(pk)},
						UpdateExpression: aws.String("SET x = :x"), ExpressionAttributeValues: map[string]types.AttributeValue{":x": str("tx")}}},
					{ConditionCheck: &types.ConditionCheck{TableName: aws.String("c"), Key: map[string]types.AttributeValue{"pk": str("never")},
						ConditionExpression: aws.String("attribute_exists(pk)")}},
				}})
			})
		}
		wg.Wait()
		close(wins)
		var winners []int
		for w := range wins {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d conditional puts of one item won (%v); want exactly 1", round, len(winners), winners)
		}
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("c"), Key: map[string]types.AttributeValue{"pk": str(pk)}})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := out.Item["w"].(*types.AttributeValueMemberS)
		if w == nil || w.Value != fmt.Sprint(winners[0]) || out.Item["x"] != nil {
			t.Fatalf("round %d: item %v; want the winner's put, untouched by the cancelled transactions", round, out.Item)
		}
	}
}

// TestConnectionsAreKeptAlive: moto answers a client's calls on one kept-
// alive connection, as AWS endpoints do (werkzeug's development server
// closed every connection after one response, so every call paid for a new
// connection and a new server thread).
func TestConnectionsAreKeptAlive(t *testing.T) {
	s := startMoto(t)
	var opened, reused atomic.Int32
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if info.Reused {
			reused.Add(1)
		} else {
			opened.Add(1)
		}
	}})
	db := dynamodb.NewFromConfig(Config(s.Endpoint, Region))
	for range 20 {
		if _, err := db.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
			t.Fatal(err)
		}
	}
	if opened.Load() != 1 || reused.Load() != 19 {
		t.Fatalf("20 calls in a row opened %d connections and reused %d; want 1 and 19", opened.Load(), reused.Load())
	}
	// A long poll holds its connection and a server thread; other calls
	// are answered meanwhile.
	q := sqs.NewFromConfig(Config(s.Endpoint, Region))
	queue, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("long-poll")})
	if err != nil {
		t.Fatal(err)
	}
	pollCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, _ = q.ReceiveMessage(pollCtx, &sqs.ReceiveMessageInput{QueueUrl: queue.QueueUrl, WaitTimeSeconds: 20})
		})
	}
	callCtx, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	if _, err := db.ListTables(callCtx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("a call during 8 long polls: %v", err)
	}
	cancel()
	wg.Wait()
}

// TestConditionTokensCachedPerText: the same condition text with other
// values each call is judged with that call's values, and a text moto
// cannot tokenize is refused every time (a failure is not kept).
func TestConditionTokensCachedPerText(t *testing.T) {
	s := startMoto(t)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(Config(s.Endpoint, Region))
	createTable(t, db, "v")
	num := func(n int) types.AttributeValue { return &types.AttributeValueMemberN{Value: fmt.Sprint(n)} }
	key := &types.AttributeValueMemberS{Value: "k"}
	// Each put raises n by one only if n is still below the call's bound.
	put := func(n, below int) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("v"),
			Item:                      map[string]types.AttributeValue{"pk": key, "n": num(n)},
			ConditionExpression:       aws.String("attribute_not_exists(pk) OR (#n < :below)"),
			ExpressionAttributeNames:  map[string]string{"#n": "n"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":below": num(below)},
		})
		return err
	}
	for _, c := range []struct {
		n, below int
		wantOK   bool
	}{
		{1, 0, true},  // no item yet
		{2, 2, true},  // 1 < 2
		{3, 2, false}, // 2 < 2 fails: the cached text, this call's value
		{3, 5, true},  // 2 < 5
		{4, 3, false}, // 3 < 3 fails
	} {
		err := put(c.n, c.below)
		var failed *types.ConditionalCheckFailedException
		if c.wantOK && err != nil || !c.wantOK && !errors.As(err, &failed) {
			t.Fatalf("put n=%d if n < %d: %v; want success %v", c.n, c.below, err, c.wantOK)
		}
	}
	for range 2 {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("v"),
			Item: map[string]types.AttributeValue{"pk": key}, ConditionExpression: aws.String("attribute_not_exists(pk) ~ 1")})
		if err == nil {
			t.Fatal("an expression moto cannot tokenize was accepted")
		}
	}
}

// TestFullCollectionsSkipSurvivors runs the launcher's collector change in
// its Python: what survives a full collection is frozen (later collections
// never walk it again), garbage made afterwards is still reclaimed, the
// documented cost holds (a cycle frozen while alive is not reclaimed) and
// a reset hands everything back to the collector.
func TestFullCollectionsSkipSurvivors(t *testing.T) {
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	python := scriptPython(bin)
	if python == "" {
		t.Fatalf("%s is not a Python entry point", bin)
	}
	const check = `
import gc, sys, weakref
launcher = {"__name__": "launcher"}
exec(compile(sys.stdin.read(), "launch.py", "exec"), launcher)
launcher["_patch_gc"]()

class Node: pass
def cycle():
    a, b = Node(), Node()
    a.b, b.a = b, a
    return a

kept = [cycle() for _ in range(10000)]
gc.collect()
assert gc.get_freeze_count() >= 20000, "survivors not frozen: %d" % gc.get_freeze_count()
assert len(gc.get_objects(generation=2)) == 0, "a full collection left objects for the next one to walk"

dead = weakref.ref(cycle())
gc.collect()
assert dead() is None, "garbage made after a freeze was not reclaimed"

late = cycle()
frozen_alive = weakref.ref(late)
gc.collect()
del late
gc.collect()
assert frozen_alive() is not None, "a cycle frozen while alive was reclaimed: update launch.py's note"

from moto.moto_api._internal.models import moto_api_backend
moto_api_backend.reset()
assert gc.get_freeze_count() == 0, "a reset left objects frozen"
gc.collect()
assert frozen_alive() is None, "after a reset, garbage frozen earlier was not reclaimed"
print("ok")
`
	cmd := exec.Command(python, "-c", check)
	cmd.Stdin = strings.NewReader(launcher)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("%v\n%s", err, out)
	}
}
