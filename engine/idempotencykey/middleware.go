// Package idempotencykey is the HTTP Idempotency-Key layer of the IETF
// draft ("The Idempotency-Key HTTP Header Field") as net/http middleware,
// on any engine.Store (memstore in tests, aws/dynamostore in production)
// and built on engine.Do, so a stale request can never overwrite the
// answer of the one that took its key over:
//
//   - a request with the header runs once per (caller, key): its response
//     (status, headers, body) is kept, and a repeat with the same
//     fingerprint (method, path, query and body) gets it back with
//     Idempotent-Replayed: true, without running the handler;
//   - a repeat with another fingerprint: 422 problem+json;
//   - a repeat while the first is still running: 409 problem+json with
//     Retry-After (the seconds left on the first request's lease);
//   - a 5xx response is not kept (a retry runs the handler again), nor is
//     a 408, 425 or 429, any status Options.Keep refuses, or what a
//     handler wrote for a request whose context ended;
//   - no header: passed through, or 400 problem+json when Options.Required;
//     a safe method (GET, HEAD, OPTIONS, TRACE) always passes through;
//   - keys are scoped by Options.Caller: one caller never sees another's
//     response.
package idempotencykey

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// The header names the middleware reads and writes.
const (
	HeaderKey        = "Idempotency-Key"
	HeaderReplayed   = "Idempotent-Replayed"
	HeaderRetryAfter = "Retry-After"
)

// Defaults of Options.
const (
	DefaultName      = "http"
	DefaultLease     = 30 * time.Second
	DefaultRetention = 24 * time.Hour
	DefaultMaxBody   = 1 << 20
)

// Options set the middleware. All are optional.
type Options struct {
	// Name is the keys' namespace in the store (DefaultName if ""): two
	// APIs on one table keep theirs apart.
	Name string
	// Required refuses a request without the header (400) instead of
	// passing it through.
	Required bool
	// Caller names a request's caller; keys are scoped by it (nil: one
	// scope for everybody).
	Caller func(*http.Request) string
	// Keep says whether a response of status is kept and replayed (nil:
	// every status below 500 but 408, 425 and 429, which say "not now").
	// A response it refuses leaves the key free, as a 5xx always does, and
	// so does any response to a request whose context ended (a client gone
	// away, a deadline): what the handler wrote then is not its answer.
	Keep func(status int) bool
	// Fingerprint identifies a request's content (nil: its method, path,
	// query and body, a JSON body in canonical form, so the order of its
	// members and its spacing do not count).
	Fingerprint func(r *http.Request, body []byte) []byte
	// Lease is how long a request holds its key while it runs
	// (DefaultLease if 0): at least the handler's timeout.
	Lease time.Duration
	// Retention is how long a response is kept (DefaultRetention if 0);
	// the handler may keep it longer with engine.KeepUntil on the
	// request's context.
	Retention time.Duration
	// MaxBody bounds the body the fingerprint reads (DefaultMaxBody if 0):
	// a larger one is 413.
	MaxBody int64
	// Problem writes the middleware's own error responses (nil:
	// application/problem+json, RFC 9457, with Retry-After for a 409).
	Problem func(w http.ResponseWriter, r *http.Request, p Problem)
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Problem is one of the middleware's own answers.
type Problem struct {
	// Status is 400 (no or a bad key, an unreadable body), 409 (in flight,
	// or a response too large to replay), 413 (the body is larger than
	// MaxBody), 422 (the key was used for another request) or 503 (the
	// store failed).
	Status int
	// Kind names it: "idempotency-key-missing", "idempotency-key-invalid",
	// "request-in-flight", "payload-too-large", "idempotency-key-reused",
	// "service-unavailable".
	Kind   string
	Detail string
	// RetryAfter is how long a 409's caller waits before it tries again.
	RetryAfter time.Duration
	// Err is why, for a log (the store's error for a 503).
	Err error
}

// The problem kinds.
const (
	KindMissing     = "idempotency-key-missing"
	KindInvalid     = "idempotency-key-invalid"
	KindInFlight    = "request-in-flight"
	KindTooLarge    = "payload-too-large"
	KindReused      = "idempotency-key-reused"
	KindUnavailable = "service-unavailable"
	// KindUnreadable: the request's body could not be read (the client
	// went away mid-upload); the key is fine.
	KindUnreadable = "request-body-unreadable"
	// KindNotReplayable: the first request with the key ran, but its
	// response was too large to keep, so it cannot be replayed (409).
	KindNotReplayable = "response-not-replayable"
)

// response is a kept response.
type response struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
}

// notKept is the error a handler's run ends with when its response is not
// kept (a 5xx, or a status Keep refuses): Do keeps nothing, and the
// response still goes to this caller.
type notKept struct{ resp response }

func (notKept) Error() string { return "idempotencykey: response not kept" }

// Middleware returns the Idempotency-Key layer on store with o.
func Middleware(store engine.Store, o Options) func(http.Handler) http.Handler {
	o = o.withDefaults()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if safe(r.Method) {
				next.ServeHTTP(w, r) // a read is not kept: it changes nothing
				return
			}
			header := r.Header.Get(HeaderKey)
			if header == "" {
				if o.Required {
					o.Problem(w, r, Problem{Status: http.StatusBadRequest, Kind: KindMissing, Detail: "the Idempotency-Key header is required"})
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			key, err := ParseKey(header)
			if err != nil {
				o.Problem(w, r, Problem{Status: http.StatusBadRequest, Kind: KindInvalid, Detail: err.Error()})
				return
			}
			body, err := io.ReadAll(io.LimitReader(r.Body, o.MaxBody+1))
			if err != nil {
				o.Problem(w, r, Problem{Status: http.StatusBadRequest, Kind: KindUnreadable, Detail: "the request body could not be read; retry with the same key", Err: err})
				return
			}
			if int64(len(body)) > o.MaxBody {
				o.Problem(w, r, Problem{Status: http.StatusRequestEntityTooLarge, Kind: KindTooLarge,
					Detail: fmt.Sprintf("the body is larger than %d bytes", o.MaxBody)})
				return
			}
			scoped := key
			if o.Caller != nil {
				scoped = scope(o.Caller(r)) + "\x00" + key
			}
			var replayed bool
			resp, err := engine.Do(r.Context(), store, o.Name, scoped, func(ctx context.Context) (response, error) {
				rec := &recorder{header: http.Header{}, status: http.StatusOK}
				req := r.Clone(ctx)
				req.Body = io.NopCloser(bytes.NewReader(body))
				req.ContentLength = int64(len(body))
				next.ServeHTTP(rec, req)
				resp := response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
				if resp.Status >= 500 || !o.Keep(resp.Status) || ctx.Err() != nil {
					return resp, notKept{resp}
				}
				return resp, nil
			}, engine.WithFingerprint(o.Fingerprint(r, body)), engine.WithLease(o.Lease), engine.WithRetention(o.Retention),
				engine.WithClock(o.Now), engine.WithReplayed(&replayed))
			var nk notKept
			var ip *engine.InProgressError
			switch {
			case errors.As(err, &nk):
				write(w, nk.resp, false)
			case errors.As(err, &ip):
				wait := max(ip.Until.Sub(o.Now()), time.Second)
				o.Problem(w, r, Problem{Status: http.StatusConflict, Kind: KindInFlight, RetryAfter: wait,
					Detail: "a request with this Idempotency-Key is still being processed; retry later"})
			case errors.Is(err, engine.ErrResultTooLarge) && resp.Status == 0:
				o.Problem(w, r, Problem{Status: http.StatusConflict, Kind: KindNotReplayable,
					Detail: "the first request with this Idempotency-Key ran, but its response was too large to keep and cannot be replayed"})
			case errors.Is(err, engine.ErrFingerprint):
				o.Problem(w, r, Problem{Status: http.StatusUnprocessableEntity, Kind: KindReused,
					Detail: "this Idempotency-Key was used for a different request; use a new key"})
			case err != nil && resp.Status != 0:
				// The handler ran but its response could not be kept: it
				// still goes to this caller (never run twice on purpose).
				write(w, resp, false)
			case err != nil:
				o.Problem(w, r, Problem{Status: http.StatusServiceUnavailable, Kind: KindUnavailable,
					Detail: "the idempotency store is unavailable; retry with the same key", Err: err})
			default:
				write(w, resp, replayed)
			}
		})
	}
}

func (o Options) withDefaults() Options {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Keep == nil {
		o.Keep = func(status int) bool {
			return status != http.StatusRequestTimeout && status != http.StatusTooEarly && status != http.StatusTooManyRequests
		}
	}
	if o.Fingerprint == nil {
		o.Fingerprint = Fingerprint
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Problem == nil {
		o.Problem = WriteProblem
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// write sends a kept (or just made) response to w.
func write(w http.ResponseWriter, resp response, replayed bool) {
	h := w.Header()
	maps.Copy(h, resp.Header)
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// recorder keeps what a handler writes.
type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if !r.wrote && status >= 200 { // an informational 1xx (103 Early Hints) is not the answer
		r.status, r.wrote = status, true
	}
}

// Flush does nothing: the response goes out whole once it is kept (a
// handler that flushes as it writes still works).
func (r *recorder) Flush() {}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// Fingerprint is the default fingerprint of a request: its method, its
// path, its query and its body, a JSON body in canonical form (members
// sorted, spacing dropped, numbers as written), any other byte for byte.
func Fingerprint(r *http.Request, body []byte) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", strings.ToUpper(r.Method), r.URL.Path, r.URL.RawQuery)
	if canon, err := canonicalJSON(body); err == nil {
		h.Write(canon)
	} else {
		h.Write(body)
	}
	return h.Sum(nil)
}

// safe reports whether method is a safe one (RFC 9110): a read changes
// nothing, so it is never held to a key, nor its answer kept.
func safe(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// maxCaller is the longest caller kept as it is in a key; a longer one is
// kept as its SHA-256, so a long principal (an assumed role's session ARN)
// and a key of MaxKeyLen always fit the store's key.
const maxCaller = 256

// scope is caller as the keys' scope.
func scope(caller string) string {
	if len(caller) <= maxCaller {
		return caller
	}
	sum := sha256.Sum256([]byte(caller))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// canonicalJSON is body as canonical JSON, or an error when it is not one
// JSON value.
func canonicalJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps are encoded with sorted keys
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// WriteProblem writes p as application/problem+json (RFC 9457), with
// Retry-After when it says how long to wait.
func WriteProblem(w http.ResponseWriter, _ *http.Request, p Problem) {
	if p.RetryAfter > 0 {
		w.Header().Set(HeaderRetryAfter, strconv.Itoa(int((p.RetryAfter+time.Second-1)/time.Second)))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "urn:idempotency-key:" + p.Kind, "title": http.StatusText(p.Status), "status": p.Status, "detail": p.Detail,
	})
}
