// Package idempotency is the request-level idempotency layer of the enqueue
// endpoint (docs/api.md): the first response to a request carrying an
// Idempotency-Key is stored and replayed for every retry of the same request.
//
// The rules:
//   - Keys are namespaced by the caller: the item key is caller#key, so one
//     caller never sees another's response.
//   - A request is identified by its fingerprint (method, route and canonical
//     JSON body). The same key with another fingerprint is a mismatch (422).
//   - The first request writes an IN_PROGRESS record with an owner and a
//     lockedUntil; while the lock is held a retry is told to come back later
//     (409 with Retry-After). A crashed request's lock expires, and the next
//     retry with the same fingerprint takes over.
//   - Completion and release are conditional on the owner, so a request whose
//     lock expired can never overwrite the response of the one that took
//     over.
//   - Validation failures never reach the store, and 5xx responses are not
//     stored: the caller releases the lock, and the key stays usable.
//   - Records live 24 h (expiresAt); reads check it themselves.
//
// The table has two views on the same items. Store's Begin, TakeOver,
// Complete and Release are the request layer as calls; Keys is the table as
// an engine.Store (a lease is the IN_PROGRESS record, a claim the COMPLETED
// one), which engine.Do and so engine/idempotencykey's middleware run on:
// the API's HTTP requests take their lock through the middleware and keep
// their answer with Complete, the outbox relay uses TakeOver.
package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/ddb"
)

// Defaults.
const (
	// DefaultRetention is how long a record lives (expiresAt).
	DefaultRetention = 24 * time.Hour
	// DefaultLockTimeout is how long an IN_PROGRESS record blocks retries: at
	// least the enqueue function's timeout.
	DefaultLockTimeout = 30 * time.Second
)

// Fingerprint identifies a request: a SHA-256 over the method, the route (the
// request path, e.g. /v1/jobs/email.welcome.v1) and the canonical form of
// the JSON body (object keys sorted, insignificant whitespace removed,
// numbers kept as written), in hex. Two requests with the same fingerprint
// are the same request. body must be one JSON value.
func Fingerprint(method, route string, body []byte) (string, error) {
	in, err := FingerprintInput(method, route, body)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(in)
	return hex.EncodeToString(sum[:]), nil
}

// FingerprintInput is what Fingerprint hashes: the method, the route and
// the canonical JSON body. The Idempotency-Key middleware's fingerprint is
// it (engine.WithFingerprint keeps its SHA-256 in hex, which is
// Fingerprint), so the records it reads and those Begin wrote agree.
func FingerprintInput(method, route string, body []byte) ([]byte, error) {
	canon, err := CanonicalJSON(body)
	if err != nil {
		return nil, err
	}
	in := fmt.Appendf(nil, "%s\n%s\n", strings.ToUpper(method), route)
	return append(in, canon...), nil
}

// CanonicalJSON returns body as canonical JSON: object keys sorted,
// insignificant whitespace removed, numbers as written.
func CanonicalJSON(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("idempotency: canonical JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("idempotency: canonical JSON: trailing data")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // maps are encoded with sorted keys
		return nil, fmt.Errorf("idempotency: canonical JSON: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// State is the state of a stored request.
type State string

// The record states.
const (
	StateInProgress State = "IN_PROGRESS"
	StateCompleted  State = "COMPLETED"
)

// Response is a stored HTTP response.
type Response struct {
	Status  int               `dynamodbav:"status"`
	Headers map[string]string `dynamodbav:"headers,omitempty"`
	Body    string            `dynamodbav:"body"`
	// KeepUntil, when later than the store's retention from now, is how
	// long the answer must be kept: as long as what it answers for can
	// still be asked again (a job due a year ahead keeps its answer until
	// its last delivery). It is not stored as part of the answer.
	KeepUntil time.Time `dynamodbav:"-"`
}

// Lock is the IN_PROGRESS record a request holds while it runs.
type Lock struct {
	// PK is the record's key (caller#key).
	PK string
	// Owner is the random id of this holder.
	Owner string
	// Fingerprint is the request's fingerprint.
	Fingerprint string
	// LockedUntil is when the lock expires.
	LockedUntil time.Time
}

// Outcome is what Begin found.
type Outcome int

// The outcomes of Begin.
const (
	// Acquired: the request is new (or took over a crashed one's expired
	// lock); Result.Lock is held. Complete or Release it.
	Acquired Outcome = iota + 1
	// Replay: the request was completed before; Result.Response is the
	// stored response.
	Replay
	// Mismatch: the key was used for a different request (422).
	Mismatch
	// InFlight: the first request with this key is still running (409 with
	// Retry-After: Result.RetryAfter).
	InFlight
)

// Result is the result of Begin.
type Result struct {
	Outcome    Outcome
	Lock       Lock
	Response   Response
	RetryAfter time.Duration
}

// PK returns the record key of (caller, key). The caller is escaped so that a
// '#' in it cannot make two pairs share a key.
func PK(caller, key string) string {
	return ddb.EscapeKeyPart(caller) + "#" + key
}
