//go:build integration

package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestPollerDeletesSuccessesAndLetsFailuresRedrive: the poller behaves like
// an event source mapping, so a record the function keeps failing reaches
// the DLQ through the queue's own redrive policy.
func TestPollerDeletesSuccessesAndLetsFailuresRedrive(t *testing.T) {
	client := testenv.SQS(t)
	dlq := testenv.NewQueue(t, client, "dlq", nil)
	// As AWS asks of a queue behind an event source mapping, the visibility
	// timeout is well above the batching window plus the function's run: a
	// received record must not come back while its own batch still gathers.
	q := testenv.NewQueue(t, client, "work", map[string]string{
		"VisibilityTimeout": "2", "RedrivePolicy": testenv.RedrivePolicy(dlq.ARN, 2),
	})
	ctx := context.Background()
	for _, body := range []string{"good", "bad"} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(body)}); err != nil {
			t.Fatal(err)
		}
	}
	var seen []events.SQSMessage
	p := &Poller{
		Client: client, QueueURL: q.URL, QueueARN: q.ARN, Region: testenv.Region, BatchSize: 10, Window: 200 * time.Millisecond,
		IdleWait: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Function: fnFunc(func(_ context.Context, payload []byte) ([]byte, error) {
			var ev events.SQSEvent
			if err := json.Unmarshal(payload, &ev); err != nil {
				return nil, err
			}
			var resp events.SQSEventResponse
			for _, r := range ev.Records {
				seen = append(seen, r)
				if r.Body == "bad" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
				}
			}
			return json.Marshal(resp)
		}),
	}
	deadline := time.Now().Add(40 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := p.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if got := testenv.Receive(t, client, dlq.URL, 0); len(got) == 1 {
			if aws.ToString(got[0].Body) != "bad" {
				t.Fatalf("DLQ got %q; want the failing record", aws.ToString(got[0].Body))
			}
			goods := 0
			for _, r := range seen {
				if r.Body == "good" {
					goods++
				}
				if r.EventSourceARN != q.ARN || r.EventSource != "aws:sqs" || r.Attributes["ApproximateReceiveCount"] == "" {
					t.Fatalf("record not shaped like Lambda's: %+v", r)
				}
			}
			if goods != 1 {
				t.Fatalf("the successful record was delivered %d times; want 1 (deleted after success)", goods)
			}
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatal("the failing record never reached the DLQ through the redrive policy")
}

// TestPollerGathersAFullBatchWithinTheWindow: records that trickle in
// during the batching window reach the function as one full batch, as an
// event source mapping with MaximumBatchingWindowInSeconds delivers them;
// a batch that does not fill goes out when the window ends.
func TestPollerGathersAFullBatchWithinTheWindow(t *testing.T) {
	client := testenv.SQS(t)
	q := testenv.NewQueue(t, client, "burst", nil)
	ctx := context.Background()
	send := func(body string) {
		t.Helper()
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(body)}); err != nil {
			t.Error(err)
		}
	}
	var batches [][]string
	p := &Poller{
		Client: client, QueueURL: q.URL, QueueARN: q.ARN, Region: testenv.Region, BatchSize: 10, Window: 20 * time.Second,
		IdleWait: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Function: fnFunc(func(_ context.Context, payload []byte) ([]byte, error) {
			var ev events.SQSEvent
			if err := json.Unmarshal(payload, &ev); err != nil {
				return nil, err
			}
			var bodies []string
			for _, r := range ev.Records {
				bodies = append(bodies, r.Body)
			}
			batches = append(batches, bodies)
			return []byte(`{"batchItemFailures":[]}`), nil
		}),
	}
	send("m0")
	go func() {
		// A burst that trickles in one message at a time.
		for i := 1; i < 10; i++ {
			time.Sleep(30 * time.Millisecond)
			send(fmt.Sprintf("m%d", i))
		}
	}()
	n, err := p.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 10 || len(batches) != 1 || len(batches[0]) != 10 {
		t.Fatalf("batches %v; want one batch of all 10 records", batches)
	}

	// Fewer records than a batch: one invocation with all of them once the
	// window ends.
	p.Window = time.Second
	for _, b := range []string{"a", "b", "c"} {
		send(b)
	}
	if n, err := p.Once(ctx); err != nil || n != 3 {
		t.Fatalf("Once = %d, %v; want the 3 records in one batch (batches %v)", n, err, batches)
	}
}
