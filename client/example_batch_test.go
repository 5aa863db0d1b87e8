package client_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/runstwice/runstwice/client"
)

// A signup enqueues its welcome and, after it, a password reset, in one
// all-or-nothing batch: the reset waits (AwaitingContinuation) until the
// welcome has succeeded. A retry with the same Idempotency-Key names the
// same jobs.
func ExampleClient_EnqueueBatch() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // a local stack would check and store the batch
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"batchId":"2a4cd1b7-8f0e-5d3a-9c61-0e7b5f3d2c19","jobs":[`+
			`{"index":0,"jobId":"5f1c0a7e-2b9d-5e43-8a06-c1d2e3f4a5b6","state":"Enqueued","deduplicated":false},`+
			`{"index":1,"jobId":"9e8d7c6b-5a49-5382-9170-6f5e4d3c2b1a","state":"AwaitingContinuation","deduplicated":false}]}`)
	}))
	defer api.Close()
	c, err := client.New(api.URL, client.WithCaller("alice"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := c.EnqueueBatch(context.Background(), []client.BatchJob{
		{Type: client.TypeWelcome, Args: client.WelcomeArgs{UserID: "u-123"}},
		{Type: client.TypePasswordReset, Args: client.PasswordResetArgs{UserID: "u-123", CountryCode: "DE"}, After: client.BatchRef(0)},
	}, client.BatchOptions{IdempotencyKey: "signup-u-123"})
	if err != nil {
		log.Fatal(err)
	}
	for _, j := range b.Jobs {
		fmt.Println(j.Index, j.State)
	}
	// Output:
	// 0 Enqueued
	// 1 AwaitingContinuation
}
