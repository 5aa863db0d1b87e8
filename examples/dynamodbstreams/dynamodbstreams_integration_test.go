//go:build integration

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestConfirmsEachOrderOnceUnderTheEmulator builds the example's bootstrap
// and runs it under aws-lambda-rie against moto (its markers table and
// dead-letter queue). Its batch (o-1 and o-2 inserted, o-1 modified, o-2
// removed, o-3 inserted, in one shard), invoked twice, confirms each
// order once, in the shard's order, keyed by its id, with the total's
// digits as the table holds them, and reports no batch item failure.
func TestConfirmsEachOrderOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newNotifier(t)
	em := startConfirm(ctx, t, svc.URL)
	batch, err := os.ReadFile(filepath.Join("events", "dynamodb-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // at-least-once: the same batch, twice
		if failed := invokeRaw(ctx, t, em, batch); len(failed) != 0 {
			t.Fatalf("batch %d: batch item failures %q; want none", i+1, failed)
		}
	}
	if got := svc.posted(); got != "o-1 o-2 o-3" {
		t.Fatalf("the notification service got %s; want o-1, o-2 and o-3 once each, in order", got)
	}
	first := svc.sent()[0]
	if want := (sent{"o-1", `{"orderId":"o-1","email":"ana@example.com","total":42.50,"currency":"EUR","lines":2}`}); first != want {
		t.Fatalf("the first confirmation is %+v; want %+v", first, want)
	}
}

// TestAFailedConfirmationStopsItsShardUnderTheEmulator: with the
// notification service down for o-2, the batch answers the sequence
// number of o-2's INSERT alone as its failure, and the records after it
// (o-3 among them) are not run. The retry Lambda makes from that
// sequence number, once the service is back, confirms o-2 and o-3, and
// o-1 stays confirmed once.
func TestAFailedConfirmationStopsItsShardUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newNotifier(t)
	em := startConfirm(ctx, t, svc.URL)
	batch := readEvent(t, "dynamodb-batch.json")

	svc.fail("o-2", http.StatusServiceUnavailable)
	failed := invoke(ctx, t, em, batch)
	if want := batch.Records[1].Change.SequenceNumber; len(failed) != 1 || failed[0] != want {
		t.Fatalf("batch item failures %q; want o-2's sequence number %s alone", failed, want)
	}
	if got := svc.posted(); got != "o-1 o-2" {
		t.Fatalf("the notification service got %s; want o-1, then o-2 failing, and nothing after it", got)
	}

	svc.fail("o-2", 0)
	if failed := invoke(ctx, t, em, events.DynamoDBEvent{Records: batch.Records[1:]}); len(failed) != 0 {
		t.Fatalf("the retry from o-2: batch item failures %q; want none", failed)
	}
	if got := svc.posted(); got != "o-1 o-2 o-2 o-3" {
		t.Fatalf("the notification service got %s; want o-2 again on the retry, then o-3", got)
	}
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if n := svc.confirmed(id); n != 1 {
			t.Errorf("%s confirmed %d times; want once", id, n)
		}
	}
}

// startConfirm builds the example's bootstrap and starts it under
// aws-lambda-rie against moto, confirming at confirmURL, with a markers
// table and a dead-letter queue of its own.
func startConfirm(ctx context.Context, t *testing.T, confirmURL string) *lambdarie.Emulator {
	t.Helper()
	moto := testenv.Moto(t)
	table := testenv.NewTable(t, testenv.DynamoDB(t), "dynamodbstreams-markers", "HandlerName", "MessageKey")
	dlq := testenv.NewQueue(t, testenv.SQS(t), "dynamodbstreams-dlq", nil)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := lambdarie.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := lambdarie.Build(ctx, root, "examples/dynamodbstreams", filepath.Join(t.TempDir(), "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{
		RIE: rie, Bootstrap: bin, FunctionName: "dynamodbstreams", Timeout: 30 * time.Second, Output: testWriter{t},
		Env: map[string]string{
			"CONFIRM_URL": confirmURL, "MARKERS_TABLE": table, "DLQ_URL": dlq.URL,
			"AWS_ENDPOINT_URL": moto.Endpoint, "AWS_REGION": testenv.Region,
			"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Stop)
	return em
}

// invoke invokes the function with ev and returns the sequence numbers
// it reports failed.
func invoke(ctx context.Context, t *testing.T, em *lambdarie.Emulator, ev events.DynamoDBEvent) []string {
	t.Helper()
	event, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return invokeRaw(ctx, t, em, event)
}

// invokeRaw invokes the function with event, as it is written, and
// returns the sequence numbers it reports failed.
func invokeRaw(ctx context.Context, t *testing.T, em *lambdarie.Emulator, event []byte) []string {
	t.Helper()
	out, err := em.Invoke(ctx, event)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var resp events.DynamoDBEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("invoke answered %s: %v", out, err)
	}
	seqs := make([]string, 0, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// testWriter logs the emulator's output through t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
