package memstore_test

import (
	"context"
	"io"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

// The defaults keep the promises: a fail-closed type does not run and is
// not lost (its record is retried by the queue), a type on by default
// runs once however often it is delivered, and engine.New still refuses a
// config without its adapters.
func TestNewRunnerDefaults(t *testing.T) {
	on := engine.JobType{Name: "acme.on.v1", Args: []engine.ArgSpec{{Name: "id", Required: true}},
		Queue: "q", EnabledByDefault: true, Lease: true, KeyPrefix: "on", KeyArgs: []string{"id"}}
	off := on
	off.Name, off.EnabledByDefault, off.KeyPrefix = "acme.off.v1", false, "off"
	reg, err := engine.NewRegistry(on, off)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	h := engine.HandlerFunc(func(_ context.Context, job engine.Job) error { runs[job.Type.Name]++; return nil })
	cfg := engine.Config{Registry: reg, Handlers: map[string]engine.Handler{on.Name: h, off.Name: h},
		Logger: engine.NewLogger(io.Discard, "error"), Concurrency: 1}
	if _, err := engine.New(cfg); err == nil {
		t.Fatal("engine.New accepted a config without a switch, a store and a parker")
	}
	r, err := memstore.NewRunner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	record := func(sqsID string, env engine.Envelope) events.SQSMessage {
		body, err := env.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return events.SQSMessage{MessageId: sqsID, Body: string(body)}
	}
	onJob, _ := engine.NewEnvelope(on, map[string]string{"id": "1"})
	offJob, _ := engine.NewEnvelope(off, map[string]string{"id": "1"})
	for i := range 2 {
		resp, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
			record("on-"+string(rune('a'+i)), onJob), record("off-"+string(rune('a'+i)), offJob)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "off-"+string(rune('a'+i)) {
			t.Fatalf("delivery %d: failures %+v; want the fail-closed job retried", i, resp.BatchItemFailures)
		}
	}
	if runs[on.Name] != 1 || runs[off.Name] != 0 {
		t.Fatalf("runs %v; want the type on by default once, the fail-closed one never", runs)
	}
}

// NewEnvelope refuses args its type does not accept.
func TestNewEnvelopeChecksArgs(t *testing.T) {
	jt := engine.JobType{Name: "acme.on.v1", Args: []engine.ArgSpec{{Name: "id", Required: true}}, Queue: "q", KeyPrefix: "on", KeyArgs: []string{"id"}}
	if _, err := engine.NewEnvelope(jt, map[string]string{"id": "a@b.example"}); err == nil {
		t.Fatal("an e-mail address as an arg was accepted")
	}
	env, err := engine.NewEnvelope(jt, map[string]string{"id": "1"})
	if err != nil || env.Key != "on:1" || !engine.CanonicalUUID(env.MessageID) {
		t.Fatalf("NewEnvelope = %+v, %v", env, err)
	}
}
