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

// TestCreditsEachPurchaseOnceUnderTheEmulator builds the example's
// bootstrap and runs it under aws-lambda-rie against moto (its markers
// table and dead-letter queue). Its batch (p-1, p-2, p-1 again as a
// producer's retry put it, and p-3, in one shard), invoked twice, credits
// each purchase once, in the shard's order, keyed by its id, and reports
// no batch item failure.
func TestCreditsEachPurchaseOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newPointsService(t)
	em := startPoints(ctx, t, svc.URL)
	batch, err := os.ReadFile(filepath.Join("events", "kinesis-batch.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // at-least-once: the same batch, twice
		if failed := invokeRaw(ctx, t, em, batch); len(failed) != 0 {
			t.Fatalf("batch %d: batch item failures %q; want none", i+1, failed)
		}
	}
	if got := svc.posted(); got != "p-1 p-2 p-3" {
		t.Fatalf("the points service got %s; want p-1, p-2 and p-3 once each, in order", got)
	}
	for _, c := range svc.credits() {
		if c.Key != c.Purchase.ID {
			t.Fatalf("the points service got %+v; want each POST keyed by its purchase id", c)
		}
	}
}

// TestAFailedCreditStopsItsShardUnderTheEmulator: with the points service
// down for p-2, the batch answers p-2's sequence number alone as its
// failure, and p-3, after it in the shard, is not run. The retry Lambda
// makes from that sequence number, once the service is back, credits p-2
// and p-3, and p-1 stays credited once.
func TestAFailedCreditStopsItsShardUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	svc := newPointsService(t)
	em := startPoints(ctx, t, svc.URL)
	batch := readEvent(t, "kinesis-batch.json")

	svc.fail("p-2", http.StatusServiceUnavailable)
	failed := invoke(ctx, t, em, batch)
	if want := batch.Records[1].Kinesis.SequenceNumber; len(failed) != 1 || failed[0] != want {
		t.Fatalf("batch item failures %q; want p-2's sequence number %s alone", failed, want)
	}
	if got := svc.posted(); got != "p-1 p-2" {
		t.Fatalf("the points service got %s; want p-1, then p-2 failing, and nothing after it", got)
	}

	svc.fail("p-2", 0)
	if failed := invoke(ctx, t, em, events.KinesisEvent{Records: batch.Records[1:]}); len(failed) != 0 {
		t.Fatalf("the retry from p-2: batch item failures %q; want none", failed)
	}
	if got := svc.posted(); got != "p-1 p-2 p-2 p-3" {
		t.Fatalf("the points service got %s; want p-2 again on the retry, then p-3", got)
	}
	for _, id := range []string{"p-1", "p-2", "p-3"} {
		if n := svc.credited(id); n != 1 {
			t.Errorf("%s credited %d times; want once", id, n)
		}
	}
}

// startPoints builds the example's bootstrap and starts it under
// aws-lambda-rie against moto, crediting at pointsURL, with a markers
// table and a dead-letter queue of its own.
func startPoints(ctx context.Context, t *testing.T, pointsURL string) *lambdarie.Emulator {
	t.Helper()
	moto := testenv.Moto(t)
	table := testenv.NewTable(t, testenv.DynamoDB(t), "kinesis-markers", "HandlerName", "MessageKey")
	dlq := testenv.NewQueue(t, testenv.SQS(t), "kinesis-dlq", nil)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := lambdarie.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := lambdarie.Build(ctx, root, "examples/kinesis", filepath.Join(t.TempDir(), "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	em, err := lambdarie.Start(ctx, lambdarie.Config{
		RIE: rie, Bootstrap: bin, FunctionName: "kinesis", Timeout: 30 * time.Second, Output: testWriter{t},
		Env: map[string]string{
			"POINTS_URL": pointsURL, "MARKERS_TABLE": table, "DLQ_URL": dlq.URL,
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
func invoke(ctx context.Context, t *testing.T, em *lambdarie.Emulator, ev events.KinesisEvent) []string {
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
	var resp events.KinesisEventResponse
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
