package enqueue

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/idempotencykey"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/obs"
)

// APIKeys names the API's Idempotency-Keys in the request layer's store
// (idempotency.KeyOf): the name the middleware gives engine.Do.
const APIKeys = "runstwice.api"

// keyedRequest is a validated POST that runs under its Idempotency-Key.
type keyedRequest struct {
	// key is its Idempotency-Key, route the path its fingerprint names
	// (/v1/jobs/<type>, /v1/batches), body its body.
	key, route string
	body       []byte
	// keep says which statuses the route may keep (keepsJob, keepsBatch):
	// the middleware never keeps another, and leaves its key free.
	keep func(status int) bool
}

// keepsJob: POST /v1/jobs/{type} keeps a 202 (a new job), a 200 (a
// duplicate) and a 409 refusing a duplicate by its policy; never a
// validation failure, a refusal that may pass later (a parent not found,
// 404; a key taken by another request, 409 request-in-flight; too many
// continuations, 409) nor a 5xx. A 409 it may not keep is left free by the
// handler (keyed).
func keepsJob(status int) bool {
	return status == http.StatusOK || status == http.StatusAccepted || status == http.StatusConflict
}

// keepsBatch: POST /v1/batches keeps its 202 only; every refusal leaves
// the key free (no job was made).
func keepsBatch(status int) bool { return status == http.StatusAccepted }

// keyed runs do for the validated request q under the Idempotency-Key
// middleware (engine/idempotencykey) on the request layer's table (Keys):
// a replay, another request under the key (422) or one still in flight
// (409 with Retry-After) never reaches do. The middleware's lease is the
// request's lock: do keeps its answer itself under it, with the writes
// that must land with it (the job's promotion, the batch's acceptance) in
// one transaction (Idempotency.Complete), and reports whether it did; an
// answer do did not keep leaves the key free. Its problems are the API's.
func (h *Handler) keyed(w http.ResponseWriter, r *http.Request, c *call, q keyedRequest, do func(context.Context, idempotency.Lock) (reply, bool)) {
	hd := &holder{pk: idempotency.PK(c.caller, q.key)}
	r = r.WithContext(context.WithValue(r.Context(), holderKey{}, hd))
	r.Body = io.NopCloser(bytes.NewReader(q.body))
	r.Header.Set(HeaderIdempotencyKey, headerValue(r.Header, HeaderIdempotencyKey))  // as validated: one value
	fingerprint, _ := idempotency.FingerprintInput(http.MethodPost, q.route, q.body) // the body is valid JSON
	mw := idempotencykey.Middleware(heldStore{h.Idempotency.Keys(APIKeys)}, idempotencykey.Options{
		Name:        APIKeys,
		Required:    true,
		Caller:      func(*http.Request) string { return c.caller },
		Keep:        q.keep,
		Fingerprint: func(*http.Request, []byte) []byte { return fingerprint },
		Lease:       idempotency.DefaultLockTimeout,
		Retention:   idempotency.DefaultRetention,
		MaxBody:     MaxBatchBytes,
		Problem: func(w http.ResponseWriter, _ *http.Request, p idempotencykey.Problem) {
			keyProblem(c, p).response(c.corr).write(w)
		},
		Now: h.now,
	})
	mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, kept := do(r.Context(), hd.held())
		hd.keep(kept)
		resp.write(w)
	})).ServeHTTP(w, r)
}

// keyProblem is the API's problem for one of the middleware's own.
func keyProblem(c *call, p idempotencykey.Problem) *Problem {
	switch p.Kind {
	case idempotencykey.KindInFlight:
		return inFlight(p.RetryAfter)
	case idempotencykey.KindReused:
		return keyMismatch()
	case idempotencykey.KindTooLarge:
		return newProblem(http.StatusRequestEntityTooLarge, ProblemTooLarge, p.Detail)
	case idempotencykey.KindMissing, idempotencykey.KindInvalid:
		return validation("header "+HeaderIdempotencyKey, p.Detail)
	}
	c.log.Error("enqueue: idempotency begin", obs.KeyError, obs.Redact(p.Err))
	up := newProblem(http.StatusServiceUnavailable, ProblemUnavailable, "a backing service failed; retry (a POST with the same Idempotency-Key)")
	up.retryAfter = time.Second
	return up
}

// keyMismatch is the 422 of an Idempotency-Key used for another request.
func keyMismatch() *Problem {
	return newProblem(http.StatusUnprocessableEntity, ProblemKeyMismatch, "this Idempotency-Key was used for a different request; use a new key")
}

// inFlight is the 409 of a request whose key another request holds, for
// wait more.
func inFlight(wait time.Duration) *Problem {
	p := newProblem(http.StatusConflict, ProblemInFlight, "a request with this Idempotency-Key is still being processed; retry later")
	p.retryAfter = wait
	return p
}

// holder is one request's part in the request layer: the lock its lease
// took (heldStore.Lease) and whether it kept its answer under it.
type holder struct {
	mu   sync.Mutex
	pk   string
	lock idempotency.Lock
	kept bool
}

type holderKey struct{}

func holderOf(ctx context.Context) (*holder, bool) {
	hd, ok := ctx.Value(holderKey{}).(*holder)
	return hd, ok
}

func (hd *holder) held() idempotency.Lock {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.lock
}

func (hd *holder) keep(kept bool) {
	hd.mu.Lock()
	hd.kept = kept
	hd.mu.Unlock()
}

// heldStore is the request layer's store as the middleware runs on it:
//   - PeekBatch reads nothing: the lease's conditional put returns the
//     record it fails on (a replay, another fingerprint, a request in
//     flight), which engine.Do answers from as from a peek, so a new
//     request costs one write and a replay one call;
//   - Lease gives the request's holder the lock it took;
//   - Claim finds the answer the handler kept under that lock (written
//     with its companions, in one transaction, before the handler answered:
//     it must know whether a companion's condition held to say what it
//     answers) and writes nothing; an answer the handler did not keep
//     releases the lock, so the key is free at once.
type heldStore struct{ engine.Store }

// PeekBatch implements engine.Store: nothing is read (see heldStore).
func (heldStore) PeekBatch(context.Context, []engine.Key) (map[engine.Key]engine.Record, error) {
	return map[engine.Key]engine.Record{}, nil
}

// Lease implements engine.Store. The lock lives the store's retention from
// now, as Begin's does (engine.Do asks for the retention past the lease).
func (s heldStore) Lease(ctx context.Context, k engine.Key, m engine.Mark) (engine.Record, error) {
	m.Expires = time.Time{}
	r, err := s.Store.Lease(ctx, k, m)
	if hd, ok := holderOf(ctx); ok && err == nil {
		hd.mu.Lock()
		hd.lock = idempotency.Lock{PK: hd.pk, Owner: m.Owner, Fingerprint: m.Fingerprint, LockedUntil: r.LeaseUntil}
		hd.mu.Unlock()
	}
	return r, err
}

// Claim implements engine.Store.
func (s heldStore) Claim(ctx context.Context, k engine.Key, m engine.Mark) (bool, error) {
	hd, ok := holderOf(ctx)
	if !ok {
		return s.Store.Claim(ctx, k, m)
	}
	hd.mu.Lock()
	kept := hd.kept && hd.lock.Owner == m.Owner
	hd.mu.Unlock()
	if kept {
		return true, nil
	}
	return false, s.Store.Release(ctx, k, m.Owner)
}
