package exampletest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
)

// ReadEvent reads the example's event file events/file, as it is written.
func ReadEvent(t testing.TB, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("events", file))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// DecodeEvent reads the example's event file events/file as an event of
// type E.
func DecodeEvent[E any](t testing.TB, file string) E {
	t.Helper()
	var ev E
	if err := json.Unmarshal(ReadEvent(t, file), &ev); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return ev
}

// NewHandler is an example's handler of kind k, running work, on the
// in-memory store, with a fake dead-letter queue, which it returns too.
func NewHandler[T any](t testing.TB, k engine.Kind[T], work func(context.Context, engine.Job[T]) error) (*engine.Handler[T], *enginetest.Queues) {
	t.Helper()
	dead := &enginetest.Queues{}
	h, err := engine.NewHandler(k, work, engine.Options{
		Store: memstore.New(), DeadLetterer: dead, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, dead
}

// Failures runs ev through handle (a handler's HandleSQS, HandleKinesis or
// HandleDynamoDB) and returns the identifiers of the items its response
// reports failed: message ids, or sequence numbers.
func Failures[E, R any](t testing.TB, handle func(context.Context, E) (R, error), ev E) []string {
	t.Helper()
	resp, err := handle(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := batchFailures(out)
	if err != nil {
		t.Fatalf("the handler answered %s: %v", out, err)
	}
	return ids
}

// batchFailures reads the item identifiers of a batch response
// (ReportBatchItemFailures), of SQS, Kinesis or DynamoDB alike.
func batchFailures(resp []byte) ([]string, error) {
	var r struct {
		BatchItemFailures []struct {
			ItemIdentifier string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if err := json.Unmarshal(resp, &r); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(r.BatchItemFailures))
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids, nil
}
