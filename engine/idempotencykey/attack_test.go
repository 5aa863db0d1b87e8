package idempotencykey_test

// Attacks on the middleware: each test names a way a request is lost, run
// twice, or answered in a false state, and fails while the defect is there.

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/idempotencykey"
	"github.com/runstwice/runstwice/engine/memstore"
)

// serve runs h under the middleware with o on a fresh store and clock.
func serve(h http.Handler, o idempotencykey.Options) (http.Handler, *memstore.Store, *enginetest.Clock) {
	clock := enginetest.NewClock(time.Now())
	store := memstore.New()
	store.Now = clock.Now
	o.Now = clock.Now
	return idempotencykey.Middleware(store, o)(h), store, clock
}

func send(h http.Handler, method, target, key, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// A response too large to keep (over engine.MaxResultBytes once encoded:
// its body is base64 in the JSON, so a body of 270 KiB is enough) goes to
// the first caller. A repeat gets 503 "the idempotency store is
// unavailable; retry with the same key": the store is fine, the handler
// ran, and the advice loops the client on that key for the whole
// retention (24 h). The repeat's answer must say what happened, not that
// the store is down.
func TestAttackTooLargeResponseReplaysAs503(t *testing.T) {
	var runs atomic.Int32
	big := strings.Repeat("x", 300*1024)
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, big)
	}), idempotencykey.Options{})
	if first := send(h, http.MethodPost, "/reports", "k-1", `{}`); first.Code != http.StatusCreated {
		t.Fatalf("first: %d", first.Code)
	}
	again := send(h, http.MethodPost, "/reports", "k-1", `{}`)
	if again.Code == http.StatusServiceUnavailable || strings.Contains(again.Body.String(), idempotencykey.KindUnavailable) {
		t.Fatalf("repeat: %d %s; a response too large to keep is answered as a store outage (retry with the same key, for 24 h)", again.Code, again.Body)
	}
}

// A handler may send 103 Early Hints before its final status (net/http
// allows any number of 1xx before it). The recorder takes the first
// WriteHeader as the status, so it keeps 103 and drops the 201: the first
// caller gets 103, then an implicit 200 with the body, and every repeat
// the same. The caller sees 200 for a 201 (a Location it may ignore), and
// the kept status is an informational one.
func TestAttackEarlyHintsReplaceTheFinalStatus(t *testing.T) {
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Set("Location", "/charges/ch-1")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"charge":1}`)
	}), idempotencykey.Options{})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, which := range []string{"first", "repeat"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/charges", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", "k-1")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("%s: status %d; want the handler's final 201, not its 103 Early Hints", which, resp.StatusCode)
		}
	}
}

// The default fingerprint is the method, the path and the body: the query
// string is not in it. POST /transfers?to=bob and POST /transfers?to=carol
// under one key are different requests, yet the second gets bob's kept
// 201 with Idempotent-Replayed: true, and carol's transfer never runs.
// Another request under a used key must be 422.
func TestAttackTheQueryIsNotInTheFingerprint(t *testing.T) {
	var mu sync.Mutex
	var to []string
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		to = append(to, r.URL.Query().Get("to"))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"to":"`+r.URL.Query().Get("to")+`"}`)
	}), idempotencykey.Options{})
	send(h, http.MethodPost, "/transfers?to=bob&amount=10", "k-1", "")
	carol := send(h, http.MethodPost, "/transfers?to=carol&amount=10", "k-1", "")
	if carol.Code != http.StatusUnprocessableEntity {
		t.Fatalf("another request under a used key: %d %s (replayed %q), transfers run %v; want 422",
			carol.Code, carol.Body, carol.Header().Get("Idempotent-Replayed"), to)
	}
}

// By default every status below 500 is kept for 24 h, 429 and 408
// included: a request refused by a rate limiter (429 with Retry-After) or
// timed out (408) is answered with that refusal on every retry with its
// key, as the client was told to do, for a day: the request never runs.
// These say "not now", not "done": they must not be kept (as a 5xx is
// not).
func TestAttackATransientRefusalIsKept(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusRequestTimeout} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var refuse atomic.Bool
			refuse.Store(true)
			var runs atomic.Int32
			h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if refuse.Load() {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(status)
					return
				}
				runs.Add(1)
				w.WriteHeader(http.StatusCreated)
			}), idempotencykey.Options{})
			send(h, http.MethodPost, "/charges", "k-1", `{}`)
			refuse.Store(false)
			retry := send(h, http.MethodPost, "/charges", "k-1", `{}`)
			if retry.Code != http.StatusCreated || runs.Load() != 1 {
				t.Fatalf("the retry after a %d: %d (replayed %q), runs %d; want it run", status, retry.Code, retry.Header().Get("Idempotent-Replayed"), runs.Load())
			}
		})
	}
}

// A client that gives up (its connection closes) cancels the request's
// context; a handler that sees it and returns without writing (the usual
// `if ctx.Err() != nil { return }`) leaves the recorder's default: 200
// with an empty body. That is kept, so the client's retry with the same
// key gets an empty 200 replayed and the work never runs: lost.
func TestAttackACancelledRequestKeepsAnEmpty200(t *testing.T) {
	var runs atomic.Int32
	var cancelFirst context.CancelFunc
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if cancelFirst != nil {
			cancelFirst() // the client hangs up while the handler works
			cancelFirst = nil
		}
		if r.Context().Err() != nil {
			return
		}
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}), idempotencykey.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancelFirst = cancel
	r := httptest.NewRequest(http.MethodPost, "/charges", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set("Idempotency-Key", "k-1")
	h.ServeHTTP(httptest.NewRecorder(), r)
	retry := send(h, http.MethodPost, "/charges", "k-1", `{}`)
	if retry.Code != http.StatusCreated || runs.Load() != 1 {
		t.Fatalf("the retry: %d (replayed %q), runs %d; want the handler run, not the cancelled request's empty 200 replayed",
			retry.Code, retry.Header().Get("Idempotent-Replayed"), runs.Load())
	}
}

// A handler that panics (net/http recovers it and drops the connection)
// leaves its key leased: engine.Do neither releases nor records anything
// on a panic. For the whole lease (30 s by default) every retry is 409
// "still being processed", with a Retry-After, for a request that is not
// running at all; an error would have freed the key at once.
func TestAttackAPanickingHandlerHoldsItsKey(t *testing.T) {
	var panics atomic.Bool
	panics.Store(true)
	var runs atomic.Int32
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panics.Load() {
			var m map[string]int
			m["boom"]++ // a nil map: the handler's bug
		}
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}), idempotencykey.Options{})
	func() {
		defer func() { _ = recover() }() // as net/http does
		send(h, http.MethodPost, "/charges", "k-1", `{}`)
	}()
	panics.Store(false)
	retry := send(h, http.MethodPost, "/charges", "k-1", `{}`)
	if retry.Code != http.StatusCreated || runs.Load() != 1 {
		t.Fatalf("the retry after a panic: %d %s (Retry-After %q); want it run: no request holds the key",
			retry.Code, retry.Body, retry.Header().Get("Retry-After"))
	}
}

// Keys are scoped by caller as caller + "\x00" + key, and engine.Do
// refuses a name and key over engine.MaxKeyBytes. A caller id of some
// length (a federated principal, an ARN with a long session name) with a
// valid 255-character key overflows it, and the answer is 503 "the
// idempotency store is unavailable; retry with the same key", forever:
// the store is fine, the request is refused for its length. The scoped
// key must fit (a hash of the caller), or the answer must say why.
func TestAttackALongCallerIsAStoreOutage(t *testing.T) {
	caller := "arn:aws:sts::123456789012:assumed-role/" + strings.Repeat("r", 64) + "/" + strings.Repeat("s", 700)
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }),
		idempotencykey.Options{Caller: func(*http.Request) string { return caller }})
	w := send(h, http.MethodPost, "/charges", strings.Repeat("k", idempotencykey.MaxKeyLen), `{}`)
	if w.Code == http.StatusServiceUnavailable {
		t.Fatalf("%d %s; a long caller with a valid key is answered as a store outage", w.Code, w.Body)
	}
}

// errBody is a request body whose read fails (the client went away
// mid-upload).
type errBody struct{}

func (errBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

// A body that cannot be read is answered 400 with the type
// "idempotency-key-invalid": the key is fine, the body is not. A client
// that branches on the problem type (a new key for an invalid one) throws
// away a good key and may run its request twice.
func TestAttackAnUnreadableBodyIsCalledAnInvalidKey(t *testing.T) {
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }), idempotencykey.Options{})
	r := httptest.NewRequest(http.MethodPost, "/charges", errBody{})
	r.Header.Set("Idempotency-Key", "k-1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if strings.Contains(w.Body.String(), idempotencykey.KindInvalid) {
		t.Fatalf("%d %s; the key is valid, the body could not be read", w.Code, w.Body)
	}
}

// GET, HEAD and OPTIONS are idempotent by definition (RFC 9110 §9.2.2)
// and the draft's header is for POST and PATCH. With Required, a safe
// request without the header is refused 400 (a middleware around a whole
// API breaks every read, and a CORS preflight, which never carries custom
// headers, fails); with the header, a GET's answer is kept and replayed
// for 24 h, so a poll with a fixed key reads stale data for a day.
func TestAttackSafeMethodsAreHeldToTheKey(t *testing.T) {
	var n atomic.Int32
	h, _, _ := serve(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "state "+string(rune('0'+n.Add(1))))
	}), idempotencykey.Options{Required: true})
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodOptions} {
		if w := send(h, m, "/charges/ch-1", "", ""); w.Code != http.StatusOK {
			t.Errorf("%s without the header: %d; want it passed through", m, w.Code)
		}
	}
	send(h, http.MethodGet, "/charges/ch-1", "poll", "")
	if w := send(h, http.MethodGet, "/charges/ch-1", "poll", ""); w.Header().Get("Idempotent-Replayed") == "true" {
		t.Errorf("a GET with the header: %q replayed; want it run (a read is not kept)", w.Body)
	}
}
