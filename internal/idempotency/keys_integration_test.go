//go:build integration

package idempotency_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/idempotencykey"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/idempotency"
)

// The idempotency-keys table as an engine.Store keeps every rule of the
// engine's conformance suite, on DynamoDB (moto).
func TestIntegrationKeysAreAnEngineStore(t *testing.T) {
	client := testenv.DynamoDB(t)
	table := testenv.NewTable(t, client, "idem", idempotency.AttrPK, "")
	enginetest.RunStore(t, func(_ *testing.T, clock *enginetest.Clock) engine.Store {
		s := idempotency.NewStore(client, table)
		s.Now = clock.Now
		return s.Keys("acme.api")
	})
}

// apiRequest is the request the middleware tests send: caller-a's POST
// under Idempotency-Key k-1.
func apiRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/jobs/email.welcome.v1", strings.NewReader(body))
	r.Header.Set("Idempotency-Key", "k-1")
	return r
}

// middleware is engine/idempotencykey's middleware on s's Keys, with the
// API's fingerprint, in front of a handler that counts its runs.
func middleware(s *idempotency.Store, clock *enginetest.Clock, runs *int) http.Handler {
	return idempotencykey.Middleware(s.Keys("api"), idempotencykey.Options{
		Name:   "api",
		Caller: func(*http.Request) string { return "caller-a" },
		Fingerprint: func(r *http.Request, body []byte) []byte {
			in, _ := idempotency.FingerprintInput(r.Method, r.URL.Path, body)
			return in
		},
		Now: clock.Now,
	})(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		*runs++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"jobId":"new"}` + "\n"))
	}))
}

// A request the request layer completed (Begin, then Complete: how the API
// keeps its answers, and how a version before the middleware kept them) is
// replayed by the middleware byte for byte, with Idempotent-Replayed, and
// never runs again: a rolling deploy replays the answers of both.
func TestIntegrationMiddlewareReplaysWhatCompleteKept(t *testing.T) {
	s, clock, counter, _ := newStore(t)
	ctx := context.Background()
	body := `{"args":{"userId":"u-1"}}`
	fp, _ := idempotency.Fingerprint(http.MethodPost, "/v1/jobs/email.welcome.v1", []byte(body))
	r, err := s.Begin(ctx, "caller-a", "k-1", fp)
	if err != nil || r.Outcome != idempotency.Acquired {
		t.Fatalf("begin: %+v, %v", r, err)
	}
	kept := idempotency.Response{Status: 202, Headers: map[string]string{
		"Content-Type": "application/json", "Location": "/v1/jobs/j-1", "X-Correlation-Id": "corr-1",
	}, Body: `{"jobId":"j-1","state":"Enqueued"}` + "\n"}
	if err := s.Complete(ctx, r.Lock, kept); err != nil {
		t.Fatal(err)
	}
	runs := 0
	h := middleware(s, clock, &runs)
	counter.Reset()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(`{ "args": { "userId": "u-1" } }`))
	if runs != 0 || rec.Code != 202 || rec.Body.String() != kept.Body || rec.Header().Get("Idempotent-Replayed") != "true" ||
		len(rec.Header()) != 4 || rec.Header().Get("Location") != "/v1/jobs/j-1" || rec.Header().Get("X-Correlation-Id") != "corr-1" {
		t.Fatalf("replay: runs %d, %d %v %q", runs, rec.Code, rec.Header(), rec.Body)
	}
	t.Logf("AWS calls of a replay through the middleware (its peek): %s", counter)
	// Another request under the key: 422, never run.
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, apiRequest(`{"args":{"userId":"u-2"}}`))
	if runs != 0 || rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another request: runs %d, %d %s", runs, rec.Code, rec.Body)
	}
}

// A lease the middleware takes is Begin's lock: Begin sees the request in
// flight, and the lease's owner completes it with Complete (the API keeps
// its answer so, with the job's promotion), which the middleware then
// replays. Another request under a dead lease is still refused (422),
// never run over it.
func TestIntegrationLeaseIsBeginsLock(t *testing.T) {
	s, clock, _, _ := newStore(t)
	ctx := context.Background()
	keys := s.Keys("api")
	fp, _ := idempotency.Fingerprint(http.MethodPost, "/v1/jobs/email.welcome.v1", []byte(`{"args":{"userId":"u-1"}}`))
	k := idempotency.KeyOf("api", "caller-a", "k-1")
	leased, err := keys.Lease(ctx, k, engine.Mark{Owner: "o-1", Until: clock.Now().Add(30 * time.Second), Fingerprint: fp})
	if err != nil || leased.State != engine.StateLeased {
		t.Fatalf("lease: %+v, %v", leased, err)
	}
	if r, err := s.Begin(ctx, "caller-a", "k-1", fp); err != nil || r.Outcome != idempotency.InFlight || r.RetryAfter <= 29*time.Second || r.RetryAfter > 30*time.Second {
		t.Fatalf("begin during the lease: %+v, %v; want in flight for 30 s", r, err)
	}
	other, _ := idempotency.Fingerprint(http.MethodPost, "/v1/jobs/email.welcome.v1", []byte(`{"args":{"userId":"u-2"}}`))
	clock.Advance(time.Minute) // the lease is dead
	if r, err := keys.Lease(ctx, k, engine.Mark{Owner: "o-2", Until: clock.Now().Add(30 * time.Second), Fingerprint: other}); !errors.Is(err, engine.ErrLeaseHeld) || r.Fingerprint != fp {
		t.Fatalf("another request over a dead lease: %+v, %v; want the lease found (ErrLeaseHeld) with its fingerprint", r, err)
	}
	if _, err := keys.Lease(ctx, k, engine.Mark{Owner: "o-3", Until: clock.Now().Add(30 * time.Second), Fingerprint: fp}); err != nil {
		t.Fatalf("the same request over a dead lease takes it over: %v", err)
	}
	lock := idempotency.Lock{PK: idempotency.PK("caller-a", "k-1"), Owner: "o-1", Fingerprint: fp}
	if err := s.Complete(ctx, lock, idempotency.Response{Status: 202, Body: "{}"}); !errors.Is(err, idempotency.ErrLockLost) {
		t.Fatalf("complete by the dead lease's owner: %v; want ErrLockLost", err)
	}
	lock.Owner = "o-3"
	if err := s.Complete(ctx, lock, idempotency.Response{Status: 202, Headers: map[string]string{"Content-Type": "application/json"}, Body: "{}\n"}); err != nil {
		t.Fatal(err)
	}
	runs := 0
	rec := httptest.NewRecorder()
	middleware(s, clock, &runs).ServeHTTP(rec, apiRequest(`{"args":{"userId":"u-1"}}`))
	if runs != 0 || rec.Code != 202 || rec.Body.String() != "{}\n" || rec.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: runs %d, %d %v %q", runs, rec.Code, rec.Header(), rec.Body)
	}
}
