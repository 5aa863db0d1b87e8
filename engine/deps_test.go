package engine_test

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/testkit"
)

// TestEngineImportsNoAWSSDK: the core carries no AWS SDK (the stores and
// the switch source that need one are their own packages), so a function
// pays for the SDK clients it uses and no others; nor the chaos build's
// kill points, which hook in from outside (Config.AtStep).
func TestEngineImportsNoAWSSDK(t *testing.T) {
	for _, d := range testkit.Deps(t, ".") {
		if strings.HasPrefix(d, "github.com/aws/aws-sdk-go-v2") || d == "github.com/runstwice/runstwice/internal/killpoint" {
			t.Errorf("the engine depends on %s", d)
		}
	}
}

// TestOutsideModuleBuildsOnTheEngine: a program in a module of its own,
// with a replace directive pointing at this checkout, declares a job type,
// registers a typed handler on it and runs a record through the runner:
// the engine is usable by a Go team that is not this bundle.
func TestOutsideModuleBuildsOnTheEngine(t *testing.T) {
	files := map[string]string{}
	files["main.go"] = `package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
)

type pingArgs struct {
	Target string ` + "`arg:\"target\"`" + `
}

type on struct{}

func (on) IsJobEnabled(context.Context, string, bool) bool { return true }

type noPark struct{}

func (noPark) Park(context.Context, engine.Queue, engine.Envelope, string, time.Duration) error { return nil }

func main() {
	ping := engine.JobType{Name: "acme.ping.v1", Queue: "default", EnabledByDefault: true, KeyPrefix: "ping",
		Args: []engine.ArgSpec{{Name: "target", Format: engine.FormatID, Required: true}}, KeyArgs: []string{"target"}}
	reg, err := engine.NewRegistry(ping)
	if err != nil {
		panic(err)
	}
	r, err := engine.New(engine.Config{Registry: reg, Switch: on{}, Markers: store{}, Parker: noPark{},
		Logger: engine.NewLogger(io.Discard, "error"),
		Handlers: map[string]engine.Handler{ping.Name: engine.Typed(func(_ context.Context, j engine.Job, a pingArgs) error {
			fmt.Println("pinged", a.Target, j.Envelope.MessageID)
			return nil
		})}})
	if err != nil {
		panic(err)
	}
	body := ` + "`" + `{"v":1,"messageId":"0f5e3c52-5e8e-4d2c-9d7c-1a2b3c4d5e6f","type":"acme.ping.v1","key":"ping:t-1","correlationId":"c-1","args":{"target":"t-1"},"enqueuedAt":"2026-12-01T00:00:00Z"}` + "`" + `
	resp, _ := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: body}}})
	fmt.Println("failures", len(resp.BatchItemFailures))
}
`
	files["store.go"] = `package main

import (
	"context"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// store is a store that has seen nothing and claims everything.
type store struct{}

func (store) PeekBatch(context.Context, []engine.Key) (map[engine.Key]engine.Record, error) { return nil, nil }
func (store) Lease(_ context.Context, k engine.Key, o string, u time.Time) (engine.Record, error) {
	return engine.Record{Key: k, State: engine.StateLeased, Owner: o, LeaseUntil: u}, nil
}
func (store) Claim(context.Context, engine.Key, string, time.Time) (bool, error) { return true, nil }
func (store) Fail(context.Context, engine.Key, string, time.Time) error { return nil }
func (store) Release(context.Context, engine.Key, string) error       { return nil }
`
	out := testkit.RunOutsideModule(t, "..", "example.com/worker", files)
	if !strings.Contains(out, "pinged t-1 0f5e3c52-5e8e-4d2c-9d7c-1a2b3c4d5e6f") || !strings.Contains(out, "failures 0") {
		t.Fatalf("the outside program printed %q", out)
	}
}
