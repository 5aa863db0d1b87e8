package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// TestDeliverAnswersByTheReceiversStatus: a 2xx is done; a 4xx other than
// 408 and 429 is permanent (the DLQ); a 408, a 429, a 5xx and a receiver
// that cannot be reached are retried. Every POST carries the event and
// the job's key as its Idempotency-Key.
func TestDeliverAnswersByTheReceiversStatus(t *testing.T) {
	cases := []struct {
		status          int
		ok, permanent   bool
		closedBeforeRun bool
	}{
		{status: http.StatusOK, ok: true},
		{status: http.StatusAccepted, ok: true},
		{status: http.StatusNoContent, ok: true},
		{status: http.StatusBadRequest, permanent: true},
		{status: http.StatusGone, permanent: true},
		{status: http.StatusUnprocessableEntity, permanent: true},
		{status: http.StatusRequestTimeout},
		{status: http.StatusTooManyRequests},
		{status: http.StatusInternalServerError},
		{status: http.StatusServiceUnavailable},
		{status: http.StatusOK, closedBeforeRun: true},
	}
	for _, c := range cases {
		name := http.StatusText(c.status)
		if c.closedBeforeRun {
			name = "unreachable"
		}
		t.Run(name, func(t *testing.T) {
			var key, body string
			receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				key, body = r.Header.Get("Idempotency-Key"), string(b)
				w.WriteHeader(c.status)
			}))
			if c.closedBeforeRun {
				receiver.Close()
			}
			defer receiver.Close()
			hook := Webhook{URL: receiver.URL, Client: receiver.Client()}
			err := hook.Deliver(context.Background(), engine.Job[Event]{Key: "e-1", Payload: Event{ID: "e-1"}, Attempt: 1, Logger: slog.Default()})
			if (err == nil) != c.ok || engine.IsPermanent(err) != c.permanent {
				t.Fatalf("Deliver = %v; want ok %v, permanent %v", err, c.ok, c.permanent)
			}
			if !c.closedBeforeRun && (key != "e-1" || body != `{"eventId":"e-1"}`) {
				t.Fatalf("the receiver got Idempotency-Key %q and body %s", key, body)
			}
		})
	}
}

// TestDeliverConvergesOnAReceiverThatDedups: run through the real runner
// twice, concurrently and across a crash at each step, an event is one
// event at a receiver that dedups by the Idempotency-Key (ExactlyOnce: the
// crash between the POST and the claim repeats the POST, with the same
// key).
func TestDeliverConvergesOnAReceiverThatDedups(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		got  = map[string]int{} // event id -> events the receiver kept
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e Event
		if err := json.NewDecoder(r.Body).Decode(&e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if k := r.Header.Get("Idempotency-Key"); !seen[k] {
			seen[k] = true
			got[e.ID]++
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer receiver.Close()
	hook := Webhook{URL: receiver.URL, Client: receiver.Client()}
	enginetest.RunTwice(t, enginetest.Case[Event]{
		Kind:        Deliver,
		Work:        hook.Deliver,
		New:         func(key string) Event { return Event{ID: key} },
		Effects:     func(key string) int { mu.Lock(); defer mu.Unlock(); return got[key] },
		ExactlyOnce: true,
	})
}
