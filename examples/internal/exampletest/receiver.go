// Package exampletest is the test scaffolding the examples share: a fake
// HTTP service that keeps what it is POSTed and can be told to fail one
// id, the example's event files, its handler on the in-memory store, its
// bootstrap under aws-lambda-rie against moto, and the checks every
// example makes of its wiring and imports. It is test support of
// examples/ only; the examples themselves import nothing internal.
package exampletest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Receiver is a fake HTTP service an example POSTs JSON payloads of type T
// to: it keeps every POST, with its Idempotency-Key, and answers the
// status it was made with, or the status Fail names for a payload's id. A
// body that is not a T is kept too, with as much of its payload as
// decodes, and answered 400.
type Receiver[T any] struct {
	*httptest.Server
	status int
	id     func(T) string
	mu     sync.Mutex
	// failing is the status to answer instead, by payload id.
	failing map[string]int
	posts   []received[T]
}

// received is one POST as the receiver kept it.
type received[T any] struct {
	Post[T]
	body     string
	accepted bool // answered with a 2xx
}

// Post is one POST a receiver got: its Idempotency-Key and its payload.
type Post[T any] struct {
	Key     string
	Payload T
}

// Sent is one POST a receiver got: its Idempotency-Key and its body as
// written.
type Sent struct {
	Key  string
	Body string
}

// NewReceiver starts a receiver answering status, which knows a payload
// by id; it is closed when t ends.
func NewReceiver[T any](t testing.TB, status int, id func(T) string) *Receiver[T] {
	r := &Receiver[T]{status: status, id: id, failing: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var p T
		body, err := io.ReadAll(req.Body)
		if err == nil {
			err = json.Unmarshal(body, &p)
		}
		r.mu.Lock()
		status, fails := r.failing[id(p)]
		switch {
		case err != nil:
			status = http.StatusBadRequest
		case !fails:
			status = r.status
		}
		r.posts = append(r.posts, received[T]{
			Post:     Post[T]{req.Header.Get("Idempotency-Key"), p},
			body:     string(body),
			accepted: status >= 200 && status < 300,
		})
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.Close)
	return r
}

// Fail makes the receiver answer status to every POST of the payload id
// (0: answer its own status again).
func (r *Receiver[T]) Fail(id string, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if status == 0 {
		delete(r.failing, id)
		return
	}
	r.failing[id] = status
}

// Posts lists the POSTs the receiver got, in order, with their payloads.
func (r *Receiver[T]) Posts() []Post[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	posts := make([]Post[T], 0, len(r.posts))
	for _, p := range r.posts {
		posts = append(posts, p.Post)
	}
	return posts
}

// Sent lists the POSTs the receiver got, in order, with their bodies as
// written.
func (r *Receiver[T]) Sent() []Sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent := make([]Sent, 0, len(r.posts))
	for _, p := range r.posts {
		sent = append(sent, Sent{p.Key, p.body})
	}
	return sent
}

// Posted lists the payload ids of the POSTs, in order, separated by
// spaces: those the receiver failed too.
func (r *Receiver[T]) Posted() string {
	var ids []string
	for _, p := range r.Posts() {
		ids = append(ids, r.id(p.Payload))
	}
	return strings.Join(ids, " ")
}

// Effects counts the effects of the payload id at a service that dedups
// by the Idempotency-Key: its POSTs the receiver accepted (a 2xx), less
// those that repeat an accepted POST's key, which the service absorbs. A
// POST without a key is an effect every time.
func (r *Receiver[T]) Effects(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, keys := 0, map[string]bool{}
	for _, p := range r.posts {
		if r.id(p.Payload) == id && p.accepted && (p.Key == "" || !keys[p.Key]) {
			keys[p.Key] = true
			n++
		}
	}
	return n
}
