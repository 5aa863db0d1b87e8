//go:build integration

package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestStreamPollerOnMoto feeds a real table's stream to an in-process
// function: what committed is handed over once each, in order; a cancelled
// transaction hands over nothing; a record the function keeps failing on is
// isolated, described on the on-failure queue, and the records after it
// still go through.
func TestStreamPollerOnMoto(t *testing.T) {
	srv := testenv.Moto(t)
	cfg := srv.Config()
	db, q := dynamodb.NewFromConfig(cfg), testenv.SQS(t)
	ctx := context.Background()
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	outbox := testenv.Name(t, "outbox")
	created, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName: aws.String(outbox), BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage},
	})
	if err != nil {
		t.Fatal(err)
	}
	users := testenv.NewTable(t, db, "users", "pk", "")
	failures := testenv.NewQueue(t, q, "outbox-failures", nil)

	var mu sync.Mutex
	var handled []string
	poisonSeq := ""
	fn := fnFunc(func(_ context.Context, payload []byte) ([]byte, error) {
		var ev events.DynamoDBEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, err
		}
		var pks []string
		for _, r := range ev.Records {
			pk := r.Change.NewImage["pk"].String()
			if r.EventSource != "aws:dynamodb" || r.EventSourceArn != aws.ToString(created.TableDescription.LatestStreamArn) || r.Change.SequenceNumber == "" {
				return nil, fmt.Errorf("record not shaped like Lambda's: %+v", r)
			}
			if strings.Contains(pk, "poison") {
				mu.Lock()
				poisonSeq = r.Change.SequenceNumber
				mu.Unlock()
				return nil, errors.New("poison")
			}
			pks = append(pks, pk)
		}
		mu.Lock()
		handled = append(handled, pks...)
		mu.Unlock()
		return json.Marshal(events.DynamoDBEventResponse{})
	})
	src := StreamSource{Function: "outbox", FunctionARN: "arn:aws:lambda:us-east-1:123456789012:function:outbox",
		StreamARN: aws.ToString(created.TableDescription.LatestStreamArn), TrimHorizon: true, BatchSize: 10,
		ReportItemFailures: true, Bisect: true, MaxRetries: 1, OnFailureURL: failures.URL}
	p := &StreamPoller{Source: src, Streams: dynamodbstreams.NewFromConfig(cfg), SQS: q, Function: fn, Region: testenv.Region,
		PollInterval: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}

	put := func(table, pk string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"pk": s(pk)},
			ConditionExpression: aws.String("attribute_not_exists(pk)")}}
	}
	tx := func(items ...types.TransactWriteItem) error {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		return err
	}
	for _, step := range []struct {
		items  []types.TransactWriteItem
		cancel bool
	}{
		{items: []types.TransactWriteItem{put(outbox, "p#good-1")}},
		{items: []types.TransactWriteItem{put(users, "u-1"), put(outbox, "p#signup-u-1")}},
		{items: []types.TransactWriteItem{put(outbox, "p#cancelled"), put(users, "u-1")}, cancel: true},
		{items: []types.TransactWriteItem{put(outbox, "p#poison")}},
		{items: []types.TransactWriteItem{put(outbox, "p#good-2")}},
	} {
		var canceled *types.TransactionCanceledException
		if err := tx(step.items...); step.cancel != errors.As(err, &canceled) || (!step.cancel && err != nil) {
			t.Fatalf("transaction: %v (want cancelled: %v)", err, step.cancel)
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { p.Run(runCtx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range testenv.Receive(t, q, failures.URL, 0) {
			got = append(got, aws.ToString(m.Body))
		}
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		if len(got) > 0 && n >= 3 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"p#good-1", "p#signup-u-1", "p#good-2"}; !slices.Equal(handled, want) {
		t.Fatalf("handed over %v, want %v once each, in order (no record of the cancelled transaction)", handled, want)
	}
	if len(got) != 1 {
		t.Fatalf("on-failure messages %v, want 1", got)
	}
	var rec OnFailureRecord
	if err := json.Unmarshal([]byte(got[0]), &rec); err != nil {
		t.Fatal(err)
	}
	info := rec.BatchInfo
	if info.StartSequenceNumber != poisonSeq || info.EndSequenceNumber != poisonSeq || info.BatchSize != 1 ||
		info.StreamARN != src.StreamARN || info.ShardID == "" || rec.RequestContext.Condition != "RetryAttemptsExhausted" {
		t.Fatalf("on-failure record %+v, want the poison record %s alone", rec, poisonSeq)
	}
}

// TestStreamSourcesFromTheTemplate: the local stack's stream sources are
// the template's DynamoDB events, resolved against what was provisioned.
func TestStreamSourcesFromTheTemplate(t *testing.T) {
	srv := testenv.Moto(t)
	tmpl := stack.RepoTemplate(t)
	name := testenv.Name(t, "streams")
	st, err := stack.Provision(context.Background(), stack.NewClients(srv.Config()), tmpl, stack.Options{StackName: name})
	if err != nil {
		t.Fatal(err)
	}
	sources, err := StreamSources(st)
	if err != nil {
		t.Fatal(err)
	}
	byFn := map[string]StreamSource{}
	for _, src := range sources {
		byFn[src.Function] = src
	}
	if len(sources) != 2 || byFn["outbox"].Function == "" || byFn["chain"].Function == "" {
		t.Fatalf("stream sources %+v, want the outbox relay's and the chain function's", sources)
	}
	for _, c := range []struct{ fn, id, event, table, failures string }{
		{"outbox", "OutboxFunction", "Outbox", "OutboxTable", "OutboxFailureQueue"},
		{"chain", "ChainFunction", "Markers", "MarkersTable", "ChainFailureQueue"},
	} {
		got := byFn[c.fn]
		table, _ := st.Physical(c.table)
		queue, _ := st.Physical(c.failures)
		props, _ := tmpl.FunctionProperties(c.id)
		ev, _ := props["Events"].(map[string]any)[c.event].(map[string]any)
		want, err := streamSettings(ev["Properties"].(map[string]any))
		if err != nil {
			t.Fatal(err)
		}
		want.Function, want.StreamARN, want.OnFailureURL = c.fn, table.StreamARN, queue.URL
		want.FunctionARN = "arn:aws:lambda:" + stack.DefaultRegion + ":" + stack.DefaultAccountID + ":function:" + name + "-" + c.fn
		if !reflect.DeepEqual(got, want) || got.StreamARN == "" || got.OnFailureURL == "" || !got.TrimHorizon || got.MaxRetries < 0 {
			t.Fatalf("source %+v, want %+v", got, want)
		}
	}
	if f := byFn["chain"].Filters; len(f) != 1 || !slices.Equal(f[0].NewImage["state"], []string{"DONE", "FAILED", "CANCELLED"}) {
		t.Fatalf("the chain function's filters %+v; want settled markers only", f)
	}
	got := byFn["outbox"]
	// The template's filter: the TTL's REMOVEs never reach the relay.
	if len(got.Filters) != 1 || !slices.Equal(got.Filters[0].EventNames, []string{"INSERT", "MODIFY"}) {
		t.Fatalf("filters %+v; want the template's filter, INSERT and MODIFY", got.Filters)
	}
}
