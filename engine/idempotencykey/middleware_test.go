package idempotencykey_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/idempotencykey"
	"github.com/runstwice/runstwice/engine/memstore"
)

// charges is the handler under the middleware: it "charges" once per call,
// answers 201 with the charge, or the status the test asks for.
type charges struct {
	made   atomic.Int32
	status atomic.Int32 // 0: 201
	gate   chan struct{}
}

func (c *charges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.gate != nil {
		<-c.gate
	}
	n := c.made.Add(1)
	body, _ := io.ReadAll(r.Body)
	status := int(c.status.Load())
	if status == 0 {
		status = http.StatusCreated
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/charges/ch-"+string(rune('0'+n)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(`{"charge":` + string(rune('0'+n)) + `,"request":` + string(body) + `}`))
}

type setup struct {
	h     http.Handler
	c     *charges
	store *memstore.Store
	clock *enginetest.Clock
}

func newSetup(o idempotencykey.Options) *setup {
	s := &setup{c: &charges{}, store: memstore.New(), clock: enginetest.NewClock(time.Now())}
	s.store.Now = s.clock.Now
	o.Now = s.clock.Now
	if o.Caller == nil {
		o.Caller = func(r *http.Request) string { return r.Header.Get("X-Caller") }
	}
	s.h = idempotencykey.Middleware(s.store, o)(s.c)
	return s
}

func (s *setup) post(key, caller, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	r.Header.Set("X-Caller", caller)
	w := httptest.NewRecorder()
	s.h.ServeHTTP(w, r)
	return w
}

// The first request runs; a repeat gets the kept status, headers and body
// with Idempotent-Replayed: true, and never runs the handler again; a JSON
// body whose members are in another order or spaced otherwise is the same
// request.
func TestReplay(t *testing.T) {
	s := newSetup(idempotencykey.Options{})
	first := s.post("k-1", "alice", `{"amount":12,"currency":"EUR"}`)
	if first.Code != http.StatusCreated || first.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v", first.Code, first.Header())
	}
	again := s.post("k-1", "alice", `{ "currency": "EUR", "amount": 12 }`)
	if again.Code != first.Code || again.Body.String() != first.Body.String() || again.Header().Get("Location") != first.Header().Get("Location") ||
		again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %q %v; want the first answer replayed", again.Code, again.Body, again.Header())
	}
	if n := s.c.made.Load(); n != 1 {
		t.Fatalf("%d charges; want one", n)
	}
}

// problem decodes a problem+json answer.
func problem(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("content type %q; want application/problem+json", ct)
	}
	var p map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The same key with another body is 422 problem+json, and runs nothing.
func TestAnotherFingerprintIs422(t *testing.T) {
	s := newSetup(idempotencykey.Options{})
	s.post("k-1", "alice", `{"amount":12}`)
	w := s.post("k-1", "alice", `{"amount":99}`)
	if w.Code != http.StatusUnprocessableEntity || problem(t, w)["type"] != "urn:idempotency-key:"+idempotencykey.KindReused || s.c.made.Load() != 1 {
		t.Fatalf("%d %s, %d charges; want 422 and one charge", w.Code, w.Body, s.c.made.Load())
	}
}

// A repeat while the first request runs is 409 problem+json with
// Retry-After: what is left of the first one's lease.
func TestInFlightIs409WithRetryAfter(t *testing.T) {
	s := newSetup(idempotencykey.Options{Lease: 20 * time.Second})
	s.c.gate = make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.post("k-1", "alice", `{"amount":12}`) }()
	s.waitHeld(t, "alice", "k-1")
	w := s.post("k-1", "alice", `{"amount":12}`)
	close(s.c.gate)
	wg.Wait()
	if w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "20" || problem(t, w)["type"] != "urn:idempotency-key:"+idempotencykey.KindInFlight {
		t.Fatalf("%d %v %s; want 409 with Retry-After 20", w.Code, w.Header(), w.Body)
	}
	if s.c.made.Load() != 1 {
		t.Fatalf("%d charges; want one", s.c.made.Load())
	}
}

// A 5xx is not kept: a retry runs the handler again. So is a status Keep
// refuses.
func TestA5xxIsNotKept(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		keep   func(int) bool
	}{
		{"5xx", http.StatusServiceUnavailable, nil},
		{"refused by Keep", http.StatusBadRequest, func(s int) bool { return s != http.StatusBadRequest }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(idempotencykey.Options{Keep: tc.keep})
			s.c.status.Store(int32(tc.status))
			if w := s.post("k-1", "alice", `{}`); w.Code != tc.status {
				t.Fatalf("first: %d", w.Code)
			}
			s.c.status.Store(0)
			if w := s.post("k-1", "alice", `{}`); w.Code != http.StatusCreated || w.Header().Get("Idempotent-Replayed") != "" {
				t.Fatalf("retry: %d %v; want the handler run again", w.Code, w.Header())
			}
		})
	}
}

// Without the header a request passes through (run every time), or is 400
// when the header is required; a malformed key is 400; a body over MaxBody
// is 413.
func TestHeaderRules(t *testing.T) {
	s := newSetup(idempotencykey.Options{})
	s.post("", "alice", `{}`)
	s.post("", "alice", `{}`)
	if n := s.c.made.Load(); n != 2 {
		t.Fatalf("%d charges without the header; want it passed through twice", n)
	}
	req := newSetup(idempotencykey.Options{Required: true})
	if w := req.post("", "alice", `{}`); w.Code != http.StatusBadRequest || problem(t, w)["type"] != "urn:idempotency-key:"+idempotencykey.KindMissing {
		t.Fatalf("required, missing: %d %s", w.Code, w.Body)
	}
	if w := req.post("k\x01", "alice", `{}`); w.Code != http.StatusBadRequest {
		t.Fatalf("bad key: %d", w.Code)
	}
	small := newSetup(idempotencykey.Options{MaxBody: 8})
	if w := small.post("k-1", "alice", `{"amount":12}`); w.Code != http.StatusRequestEntityTooLarge || small.c.made.Load() != 0 {
		t.Fatalf("too large: %d", w.Code)
	}
	if k, err := idempotencykey.ParseKey(`"a \"quoted\" key"`); err != nil || k != `a "quoted" key` {
		t.Fatalf("quoted form: %q, %v", k, err)
	}
}

// Keys are scoped by the caller: another caller's same key is another
// request, and never sees the first one's answer.
func TestKeysAreScopedByCaller(t *testing.T) {
	s := newSetup(idempotencykey.Options{})
	a := s.post("k-1", "alice", `{"amount":12}`)
	b := s.post("k-1", "bob", `{"amount":99}`)
	if b.Code != http.StatusCreated || b.Header().Get("Idempotent-Replayed") != "" || b.Body.String() == a.Body.String() || s.c.made.Load() != 2 {
		t.Fatalf("bob: %d %s; want his own request run", b.Code, b.Body)
	}
}

// A request whose lease ran out while it ran, and whose key a retry took
// over, never overwrites the retry's kept answer: the retry's is what
// every later repeat gets.
func TestAStaleRequestNeverOverwritesTheNewer(t *testing.T) {
	s := newSetup(idempotencykey.Options{Lease: 10 * time.Second})
	s.c.gate = make(chan struct{})
	slow := make(chan *httptest.ResponseRecorder)
	go func() { slow <- s.post("k-1", "alice", `{"amount":12}`) }()
	s.waitHeld(t, "alice", "k-1")
	s.clock.Advance(time.Minute) // its lease ran out
	fast := &charges{}
	newer := idempotencykey.Middleware(s.store, idempotencykey.Options{Now: s.clock.Now,
		Caller: func(r *http.Request) string { return r.Header.Get("X-Caller") }})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fast.made.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"charge":"newer"}`))
	}))
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{"amount":12}`))
	r.Header.Set("Idempotency-Key", "k-1")
	r.Header.Set("X-Caller", "alice")
	w := httptest.NewRecorder()
	newer.ServeHTTP(w, r)
	if w.Body.String() != `{"charge":"newer"}` {
		t.Fatalf("the retry: %d %s", w.Code, w.Body)
	}
	close(s.c.gate) // the stale request finishes, late
	<-slow
	if again := s.post("k-1", "alice", `{"amount":12}`); again.Body.String() != `{"charge":"newer"}` || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the kept answer: %s; want the retry's, never the stale request's", again.Body)
	}
}

// waitHeld waits until a request of caller holds key.
func (s *setup) waitHeld(t *testing.T, caller, key string) {
	t.Helper()
	for range 1000 {
		if r, _, _ := s.store.Peek(t.Context(), engine.Key{Type: idempotencykey.DefaultName, JobID: caller + "\x00" + key}); r.State == engine.StateLeased {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no request took the key")
}
