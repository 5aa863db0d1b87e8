//go:build integration

package devstack_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/internal/webhook"
)

// outcomes collects, from the functions' application log, every job
// outcome by job id.
type outcomes struct {
	mu   sync.Mutex
	byID map[string][]string
}

func (o *outcomes) Write(p []byte) (int, error) {
	if out, ok := devstack.ParseOutcome(p); ok && out.JobID != "" {
		o.mu.Lock()
		o.byID[out.JobID] = append(o.byID[out.JobID], out.Outcome)
		o.mu.Unlock()
	}
	return len(p), nil
}

func (o *outcomes) of(id string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.byID[id]...)
}

// TestWebhookDeliveredOnceHoweverOftenItIsDelivered runs the whole local
// stack (make run's): a webhook.deliver.v1 job enqueued through the local
// API is delivered by the webhook function, under aws-lambda-rie, to the
// stack's own receiver (its WEBHOOK_URL). Its message is then delivered
// twice more, as copies sent straight to the webhooks queue: one at once,
// racing the first delivery, one after the job has succeeded. The
// receiver saw exactly one POST, and so one event, under the job id, and
// the job reads Succeeded.
func TestWebhookDeliveredOnceHoweverOftenItIsDelivered(t *testing.T) {
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	seen := &outcomes{byID: map[string][]string{}}
	out := &testkit.Buffer{}
	ctx := context.Background()
	l, err := devstack.StartOnFreePorts(ctx, devstack.Options{
		Root: root, StateDir: filepath.Join(t.TempDir(), ".devstack"), APIAddr: "127.0.0.1:0", Out: out,
		Chaos: devstack.Chaos{AppLog: seen},
	})
	if err != nil {
		t.Fatalf("the local stack did not start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		l.Stop()
		if t.Failed() {
			t.Logf("the stack printed:\n%s", out)
		}
	})
	queue, ok := l.Stack.Physical("WebhooksQueue")
	if !ok {
		t.Fatal("the stack has no WebhooksQueue")
	}
	api, err := client.New(l.APIURL, client.WithCaller("webhook-test"), client.WithRetry(5, 100*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	const eventID = "evt-local-1"
	res, err := api.Enqueue(ctx, webhook.Deliver.Name, map[string]string{"eventId": eventID}, client.EnqueueOptions{IdempotencyKey: "hook-" + eventID})
	if err != nil {
		t.Fatal(err)
	}
	// The message the API sent, as SQS would deliver it again.
	body, err := json.Marshal(contract.Envelope{V: 1, MessageID: res.JobID, Type: webhook.Deliver.Name, Key: webhook.Deliver.DeriveKey(map[string]string{"eventId": eventID}),
		CorrelationID: "webhook-test", Args: map[string]string{"eventId": eventID}, EnqueuedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	sq := sqs.NewFromConfig(moto.Config(l.Endpoint, moto.Region))
	sendCopy := func() {
		t.Helper()
		if _, err := sq.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queue.URL), MessageBody: aws.String(string(body))}); err != nil {
			t.Fatal(err)
		}
	}
	sendCopy() // races the API's message

	wait, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	job, err := api.Wait(wait, res.JobID, 200*time.Millisecond)
	if err != nil || job.State != client.StateSucceeded {
		t.Fatalf("job %s: %+v, %v; want Succeeded (outcomes %v)", res.JobID, job, err, seen.of(res.JobID))
	}
	sendCopy() // after the job succeeded

	// Three deliveries of one job: wait for the outcomes of all three.
	for len(seen.of(res.JobID)) < 3 && wait.Err() == nil {
		time.Sleep(200 * time.Millisecond)
	}
	outcomes := seen.of(res.JobID)
	succeeded := 0
	for _, o := range outcomes {
		if o == "succeeded" {
			succeeded++
		}
	}
	if len(outcomes) < 3 || succeeded != 1 {
		t.Errorf("job %s outcomes %v; want three deliveries, one succeeded (then a retry while leased, or duplicates)", res.JobID, outcomes)
	}
	var posts int
	for _, d := range l.Webhooks().Deliveries() {
		if d.Key == res.JobID {
			posts++
			if d.Event != (webhook.Event{EventID: eventID, JobID: res.JobID, Type: webhook.Deliver.Name}) {
				t.Errorf("the receiver got %+v under %s", d.Event, d.Key)
			}
		}
	}
	if n := l.Webhooks().Events(res.JobID); n != 1 || posts != 1 {
		t.Errorf("the receiver holds %d events and took %d POSTs under %s; want exactly one of each (deliveries %+v)", n, posts, res.JobID, l.Webhooks().Deliveries())
	}
	if job, err := api.Get(ctx, res.JobID); err != nil || job.State != client.StateSucceeded {
		t.Errorf("job %s afterwards: %+v, %v; want Succeeded", res.JobID, job, err)
	}
}
