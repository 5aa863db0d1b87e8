//go:build integration

package devstack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	"github.com/runstwice/runstwice/message"
)

// outcomes collects, from the functions' application log, every job
// outcome by job id.
type outcomes struct {
	mu    sync.Mutex
	byID  map[string][]string
	kills int // kill lines (devstack.KillLineMsg)
}

func (o *outcomes) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"msg":"`+devstack.KillLineMsg+`"`)) {
		o.mu.Lock()
		o.kills++
		o.mu.Unlock()
	}
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
	h := startHookStack(t, devstack.Chaos{})
	const eventID = "evt-local-1"
	jobID := h.enqueue(t, eventID)
	h.sendCopy(t, jobID, eventID) // races the API's message
	h.waitSucceeded(t, jobID)
	h.sendCopy(t, jobID, eventID) // after the job succeeded

	// Three deliveries of one job: wait for the outcomes of all three.
	outcomes := h.waitOutcomes(t, jobID, 3)
	if succeeded := count(outcomes, "succeeded"); len(outcomes) < 3 || succeeded != 1 {
		t.Errorf("job %s outcomes %v; want three deliveries, one succeeded (then a retry while leased, or duplicates)", jobID, outcomes)
	}
	if n, posts := h.received(t, jobID, eventID); n != 1 || posts != 1 {
		t.Errorf("the receiver holds %d events and took %d POSTs under %s; want exactly one of each (deliveries %+v)", n, posts, jobID, h.l.Webhooks().Deliveries())
	}
	h.waitSucceeded(t, jobID)
}

// TestWebhookKilledBetweenPostAndClaimIsOneEvent: the webhook function's
// process is killed (SIGKILL, as Lambda ends a timed-out or crashed
// environment) while its first POST is at the receiver, which took the
// event and has not answered yet: the effect happened, its claim did not.
// The record comes back (a short visibility timeout; the lease lasts until
// the killed invocation's deadline), and the redelivery POSTs again under
// the same Idempotency-Key, the job id: the receiver took two POSTs, holds
// one event, and the job reads Succeeded.
func TestWebhookKilledBetweenPostAndClaimIsOneEvent(t *testing.T) {
	var first atomic.Bool
	h := startHookStack(t, devstack.Chaos{
		FunctionTimeout: 8 * time.Second, VisibilityTimeout: 2 * time.Second,
		KillDuring: func(function string, _ []byte) time.Duration {
			if function == "webhook" && first.CompareAndSwap(false, true) {
				return 3 * time.Second // while the receiver holds the first POST
			}
			return 0
		},
	})
	h.l.Webhooks().SetDelay(func(d devstack.Delivery) time.Duration {
		if !d.Duplicate {
			return 6 * time.Second // the first POST is answered after the kill
		}
		return 0
	})
	const eventID = "evt-local-2"
	jobID := h.enqueue(t, eventID)
	h.waitSucceeded(t, jobID)
	n, posts := h.received(t, jobID, eventID)
	if n != 1 || posts != 2 {
		t.Errorf("the receiver holds %d events and took %d POSTs under %s; want one event from two POSTs (deliveries %+v, outcomes %v)",
			n, posts, jobID, h.l.Webhooks().Deliveries(), h.seen.of(jobID))
	}
	h.seen.mu.Lock()
	kills := h.seen.kills
	h.seen.mu.Unlock()
	if kills != 1 {
		t.Errorf("%d kills; want the one of the first delivery", kills)
	}
	if !strings.Contains(h.out.String(), "webhook again") {
		t.Errorf("make run's output shows no repeated delivery:\n%s", h.out)
	}
}

// hookStack is a running local stack with the webhook type's helpers.
type hookStack struct {
	l     *devstack.Local
	seen  *outcomes
	out   *testkit.Buffer
	api   *client.Client
	sqs   *sqs.Client
	queue string
}

func startHookStack(t *testing.T, chaos devstack.Chaos) *hookStack {
	t.Helper()
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	h := &hookStack{seen: &outcomes{byID: map[string][]string{}}, out: &testkit.Buffer{}}
	chaos.AppLog = h.seen
	h.l, err = devstack.StartOnFreePorts(context.Background(), devstack.Options{
		Root: root, StateDir: filepath.Join(t.TempDir(), ".devstack"), APIAddr: "127.0.0.1:0", Out: h.out, Chaos: chaos,
	})
	if err != nil {
		t.Fatalf("the local stack did not start: %v\n%s", err, h.out)
	}
	t.Cleanup(func() {
		h.l.Stop()
		if t.Failed() {
			t.Logf("the stack printed:\n%s", h.out)
		}
	})
	q, ok := h.l.Stack.Physical("WebhooksQueue")
	if !ok {
		t.Fatal("the stack has no WebhooksQueue")
	}
	h.queue = q.URL
	h.sqs = sqs.NewFromConfig(moto.Config(h.l.Endpoint, moto.Region))
	if h.api, err = client.New(h.l.APIURL, client.WithCaller("webhook-test"), client.WithRetry(5, 100*time.Millisecond, time.Second)); err != nil {
		t.Fatal(err)
	}
	return h
}

// enqueue enqueues a webhook of eventID through the local API.
func (h *hookStack) enqueue(t *testing.T, eventID string) string {
	t.Helper()
	res, err := h.api.WebhookDeliver(context.Background(), client.WebhookDeliverArgs{EventID: eventID}, client.EnqueueOptions{IdempotencyKey: "hook-" + eventID})
	if err != nil {
		t.Fatal(err)
	}
	return res.JobID
}

// sendCopy sends a copy of the job's message straight to the webhooks
// queue, as SQS delivers a message again.
func (h *hookStack) sendCopy(t *testing.T, jobID, eventID string) {
	t.Helper()
	args := map[string]string{"eventId": eventID}
	body, err := json.Marshal(message.Envelope{V: 1, MessageID: jobID, Type: contract.WebhookDeliver.Name, Key: contract.WebhookDeliver.DeriveKey(args),
		CorrelationID: "webhook-test", Args: args, EnqueuedAt: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: aws.String(h.queue), MessageBody: aws.String(string(body))}); err != nil {
		t.Fatal(err)
	}
}

// waitSucceeded waits (2 minutes at most) for the job to read Succeeded.
func (h *hookStack) waitSucceeded(t *testing.T, jobID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job, err := h.api.Wait(ctx, jobID, 200*time.Millisecond)
	if err != nil || job.State != client.StateSucceeded {
		t.Fatalf("job %s: %+v, %v; want Succeeded (outcomes %v)", jobID, job, err, h.seen.of(jobID))
	}
}

// waitOutcomes waits (a minute at most) for n outcomes of the job.
func (h *hookStack) waitOutcomes(t *testing.T, jobID string, n int) []string {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); len(h.seen.of(jobID)) < n && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
	}
	return h.seen.of(jobID)
}

// received returns the events the receiver holds under the job id and the
// POSTs it took under it, each checked to carry the job's event.
func (h *hookStack) received(t *testing.T, jobID, eventID string) (events, posts int) {
	t.Helper()
	for _, d := range h.l.Webhooks().Deliveries() {
		if d.Key == jobID {
			posts++
			if d.Event != (webhook.Event{EventID: eventID, JobID: jobID, Type: contract.WebhookDeliver.Name}) {
				t.Errorf("the receiver got %+v under %s", d.Event, d.Key)
			}
		}
	}
	return h.l.Webhooks().Events(jobID), posts
}

func count(list []string, s string) int {
	n := 0
	for _, v := range list {
		if v == s {
			n++
		}
	}
	return n
}
