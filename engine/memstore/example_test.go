package memstore_test

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

// A lease keeps a twin out while the effect runs; the claim settles the
// marker, and a second claim reports that the job is done already.
func ExampleNew() {
	ctx := context.Background()
	s := memstore.New()
	k := engine.Key{Type: "billing.invoice-ready.v1", JobID: "job-1"}
	_, err := s.Lease(ctx, k, "worker-a", time.Now().Add(time.Minute))
	fmt.Println("a leases:", err)
	_, err = s.Lease(ctx, k, "worker-b", time.Now().Add(time.Minute))
	fmt.Println("b leases:", err)
	won, err := s.Claim(ctx, k, "worker-a", time.Time{})
	fmt.Println("a claims:", won, err)
	won, err = s.Claim(ctx, k, "", time.Time{})
	fmt.Println("claim again:", won, err)
	// Output:
	// a leases: <nil>
	// b leases: marker: lease held by another worker
	// a claims: true <nil>
	// claim again: false <nil>
}

// The smallest runner: a registry and a handler. The store is in memory,
// each switch answers its type's default, and a job that would park is
// retried by its queue instead.
func ExampleNewRunner() {
	greet := engine.JobType{
		Name: "acme.greet.v1", Args: []engine.ArgSpec{{Name: "userId", Required: true}},
		Queue: "default", EnabledByDefault: true, KeyPrefix: "greet", KeyArgs: []string{"userId"},
	}
	reg, err := engine.NewRegistry(greet)
	if err != nil {
		panic(err)
	}
	r, err := memstore.NewRunner(engine.Config{
		Registry: reg,
		Handlers: map[string]engine.Handler{greet.Name: engine.HandlerFunc(func(_ context.Context, job engine.Job) error {
			fmt.Println("hello", job.Envelope.Args["userId"])
			return nil
		})},
		Logger: engine.NewLogger(io.Discard, "error"),
	})
	if err != nil {
		panic(err)
	}
	env, err := engine.NewEnvelope(greet, map[string]string{"userId": "u-1"})
	if err != nil {
		panic(err)
	}
	body, _ := env.Encode()
	resp, err := r.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: string(body)}}})
	fmt.Println(len(resp.BatchItemFailures), err)
	// Output:
	// hello u-1
	// 0 <nil>
}
