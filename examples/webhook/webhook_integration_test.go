//go:build integration

package main

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/otlp"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestDeliversOnceUnderTheEmulator builds the example's bootstrap, runs it
// under aws-lambda-rie against moto (its markers table; no switch parameter,
// so the type's default, on) and invokes it with its event twice: the
// receiver gets one POST, whose Idempotency-Key is the job id, and neither
// invocation reports a batch item failure.
func TestDeliversOnceUnderTheEmulator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu   sync.Mutex
		keys []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	defer receiver.Close()
	em := startExample(ctx, t, receiver.URL, nil)

	event, err := os.ReadFile(filepath.Join("events", "deliver.json"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // at-least-once: the same record, twice
		out, err := em.Invoke(ctx, event)
		if err != nil {
			t.Fatalf("invoke %d: %v", i+1, err)
		}
		var resp struct {
			BatchItemFailures []struct{ ItemIdentifier string } `json:"batchItemFailures"`
		}
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("invoke %d answered %s (%v); want no batch item failures", i+1, out, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 1 || keys[0] != "5f0c6b9e-3a1d-4e7b-9c2a-2b7d1e4f6a01" {
		t.Fatalf("the receiver got Idempotency-Keys %q; want one POST keyed by the job id", keys)
	}
}

// startExample builds the example's bootstrap and starts it under
// aws-lambda-rie against moto (its markers table; no switch parameter, so
// the type's default, on), posting to webhookURL, with env added to its
// environment.
func startExample(ctx context.Context, t *testing.T, webhookURL string, env map[string]string) *lambdarie.Emulator {
	t.Helper()
	moto := testenv.Moto(t)
	table := testenv.NewTable(t, testenv.DynamoDB(t), "webhook-markers", "HandlerName", "MessageKey")
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	rie, err := lambdarie.Binary(root)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := lambdarie.Build(ctx, root, "examples/webhook", filepath.Join(t.TempDir(), "bootstrap"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{
		"WEBHOOK_URL": webhookURL, "MARKERS_TABLE": table, "TOGGLES_PATH": "/webhook/test/toggles",
		"QUEUE_URL": "", "DLQ_URL": "",
		"AWS_ENDPOINT_URL": moto.Endpoint, "AWS_REGION": testenv.Region,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	}
	maps.Copy(vars, env)
	em, err := lambdarie.Start(ctx, lambdarie.Config{
		RIE: rie, Bootstrap: bin, FunctionName: "webhook", Timeout: 30 * time.Second, Output: testWriter{t}, Env: vars,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(em.Stop)
	return em
}

// TestTracedExampleFlushesItsSpans: with OTEL_EXPORTER_OTLP_ENDPOINT set,
// the example's runner makes the record's CONSUMER span "webhooks process"
// (service webhook-example, naming the job) and the function flushes it:
// it is at the OTLP receiver when the invocation returns.
func TestTracedExampleFlushesItsSpans(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	defer receiver.Close()
	spans, err := otlp.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spans.Close()
	em := startExample(ctx, t, receiver.URL, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": spans.URL})
	event, err := os.ReadFile(filepath.Join("events", "deliver.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := em.Invoke(ctx, event); err != nil {
		t.Fatal(err)
	}
	const jobID = "5f0c6b9e-3a1d-4e7b-9c2a-2b7d1e4f6a01"
	_, got := spans.Trace(jobID) // at once: the flush came before the answer
	if len(got) != 1 || got[0].Name != "webhooks process" || got[0].Kind != "consumer" || got[0].Service != "webhook-example" {
		t.Fatalf("spans at the receiver when the invocation returned: %+v; want the record's span", got)
	}
}

// testWriter logs the emulator's output through t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }
