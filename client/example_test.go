package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/runstwice/runstwice/client"
)

// exampleAPI stands in for a runstwice API in the examples: it creates a job
// for a new Idempotency-Key, replays the answer for a known one, and rejects
// a second welcome job with RejectAlways.
func exampleAPI() *httptest.Server {
	var mu sync.Mutex
	seen := map[string]bool{}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jobId":"0b6d7c3e-0000-4000-8000-000000000001","type":"email.welcome.v1","key":"welcome:u-123","state":"Succeeded","attempts":1}`)
		case bytes.Contains(body, []byte("RejectAlways")):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"type":"urn:runstwice:problem:duplicate-job-rejected","title":"Conflict","status":409,`+
				`"detail":"a finished job has this key","existingJobId":"0b6d7c3e-0000-4000-8000-000000000001","policy":"RejectAlways"}`)
		default:
			key := r.Header.Get("Idempotency-Key")
			if seen[key] {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			seen[key] = true
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Location", "/v1/jobs/0b6d7c3e-0000-4000-8000-000000000001")
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"jobId":"0b6d7c3e-0000-4000-8000-000000000001","type":"email.welcome.v1","state":"Enqueued","key":"welcome:u-123","deduplicated":false}`)
		}
	}))
}

// A producer service signs with its own AWS identity, from the standard
// configuration chain (environment, profile, SSO, ECS task or Lambda role).
func ExampleLoad() {
	ctx := context.Background()
	c, err := client.Load(ctx, "https://abc123.execute-api.eu-west-1.amazonaws.com")
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u-123"}, client.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("job %s is %s", res.JobID, res.State)
}

// Against the local stack (`make run`), requests go unsigned and name their
// caller. Giving the same Idempotency-Key again, e.g. after a crash, is safe:
// the API answers as the first time and says it replayed.
func ExampleClient_Welcome() {
	api := exampleAPI() // the local stack would be http://127.0.0.1:3000
	defer api.Close()
	c, err := client.New(api.URL, client.WithCaller("alice"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	opts := client.EnqueueOptions{IdempotencyKey: "signup-4711"}
	for range 2 {
		res, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u-123"}, opts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(res.StatusCode, res.JobID, res.State, "replayed:", res.Replayed)
	}
	// Output:
	// 202 0b6d7c3e-0000-4000-8000-000000000001 Enqueued replayed: false
	// 202 0b6d7c3e-0000-4000-8000-000000000001 Enqueued replayed: true
}

// An error answer is a *Problem; the common ones also match sentinel errors.
func ExampleProblem() {
	api := exampleAPI()
	defer api.Close()
	c, err := client.New(api.URL, client.WithCaller("alice"))
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Welcome(context.Background(), client.WelcomeArgs{UserID: "u-123"},
		client.EnqueueOptions{DuplicatePolicy: client.RejectAlways})
	var p *client.Problem
	if errors.Is(err, client.ErrDuplicateRejected) && errors.As(err, &p) {
		fmt.Println(p.Status, p.Policy, "existing job:", p.ExistingJobID)
	}
	// Output:
	// 409 RejectAlways existing job: 0b6d7c3e-0000-4000-8000-000000000001
}

// Wait reads a job until it has finished. (Each example opens its client
// again, on purpose: the docs show every example whole.)
func ExampleClient_Wait() {
	api := exampleAPI()
	defer api.Close()
	c, err := client.New(api.URL, client.WithCaller("alice"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Enqueue(ctx, client.TypeWelcome, map[string]string{"userId": "u-123"}, client.EnqueueOptions{})
	if err != nil {
		log.Fatal(err)
	}
	job, err := c.Wait(ctx, res.JobID, time.Second/2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Type, job.State)
	// Output:
	// email.welcome.v1 Succeeded
}
