package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/testkit"
	"github.com/runstwice/runstwice/internal/webhook"
	"github.com/runstwice/runstwice/message"
)

// receiver is a webhook receiver that records every POST by its
// Idempotency-Key and answers status.
type receiver struct {
	mu     sync.Mutex
	posts  map[string][]webhook.Event
	status int
}

func newReceiver(t *testing.T, status int) (*receiver, *httptest.Server) {
	r := &receiver{posts: map[string][]webhook.Event{}, status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev webhook.Event
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || json.NewDecoder(req.Body).Decode(&ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.posts[req.Header.Get(webhook.IdempotencyKeyHeader)] = append(r.posts[req.Header.Get(webhook.IdempotencyKeyHeader)], ev)
		r.mu.Unlock()
		w.WriteHeader(r.status)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.posts[key])
}

func handler(t *testing.T, url string) runner.Handler {
	t.Helper()
	hs, err := webhook.Handlers(webhook.Config{URL: url, Client: &http.Client{Timeout: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return hs[contract.WebhookDeliver.Name]
}

func job(id, eventID string) runner.Job {
	return runner.Job{Type: contract.WebhookDeliver, Envelope: message.Envelope{V: 1, MessageID: id, Type: contract.WebhookDeliver.Name,
		Key: "webhook:" + eventID, Args: map[string]string{"eventId": eventID}}}
}

// TestDeliverPostsTheEventUnderTheJobID: the POST carries the job id as its
// Idempotency-Key and in its body, with the event id.
func TestDeliverPostsTheEventUnderTheJobID(t *testing.T) {
	r, srv := newReceiver(t, http.StatusAccepted)
	if err := handler(t, srv.URL).Handle(context.Background(), job("j-1", "evt-1")); err != nil {
		t.Fatal(err)
	}
	got := r.posts["j-1"]
	if len(got) != 1 || got[0] != (webhook.Event{EventID: "evt-1", JobID: "j-1", Type: contract.WebhookDeliver.Name}) {
		t.Fatalf("receiver got %v under j-1; want one event evt-1", r.posts)
	}
}

// TestReceiverStatuses: a 2xx is done, a 4xx but 408 and 429 is
// permanent, anything else is retried.
func TestReceiverStatuses(t *testing.T) {
	for _, tc := range []struct {
		status   int
		ok, perm bool
	}{
		{200, true, false}, {204, true, false}, {400, false, true}, {404, false, true}, {410, false, true},
		{408, false, false}, {429, false, false}, {500, false, false}, {503, false, false}, {302, false, false},
	} {
		_, srv := newReceiver(t, tc.status)
		err := handler(t, srv.URL).Handle(context.Background(), job("j", "e"))
		if (err == nil) != tc.ok || engine.IsPermanent(err) != tc.perm {
			t.Errorf("HTTP %d: %v; want ok %v, permanent %v", tc.status, err, tc.ok, tc.perm)
		}
	}
}

// TestAnUnreachableReceiverIsRetried: a transport error is transient.
func TestAnUnreachableReceiverIsRetried(t *testing.T) {
	_, srv := newReceiver(t, 200)
	srv.Close()
	err := handler(t, srv.URL).Handle(context.Background(), job("j", "e"))
	if err == nil || engine.IsPermanent(err) {
		t.Fatalf("closed receiver: %v; want a transient error", err)
	}
}

// TestHandlersRefuseABadConfig: no relative URL, no nil client.
func TestHandlersRefuseABadConfig(t *testing.T) {
	for _, cfg := range []webhook.Config{
		{URL: "receiver.example.com/events", Client: http.DefaultClient},
		{URL: "ftp://receiver.example.com/", Client: http.DefaultClient},
		{URL: "https://receiver.example.com/events"},
	} {
		if _, err := webhook.Handlers(cfg); err == nil {
			t.Errorf("Handlers(%+v) accepted it", cfg)
		}
	}
}

// TestDeliverConverges runs the handler through the real runner in every
// RunTwice scenario against a real HTTP receiver: at most one POST per job
// id, but where a crash fell between the POST and the claim, and then the
// repeat carries the same Idempotency-Key.
func TestDeliverConverges(t *testing.T) {
	r, srv := newReceiver(t, http.StatusOK)
	testkit.RunTwice(t, testkit.Case{Type: contract.WebhookDeliver, Handler: handler(t, srv.URL), Effects: r.count})
}
