package devstack

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/dev/proc"
	"github.com/runstwice/runstwice/internal/webhook"
)

// WebhookPath is where the local receiver takes webhook events.
const WebhookPath = "/events"

// Delivery is one POST the local webhook receiver took.
type Delivery struct {
	// Key is its Idempotency-Key: the job id.
	Key   string
	Event webhook.Event
	Time  time.Time
	// Duplicate is true for a POST whose key an earlier POST carried: the
	// receiver answered it as done and recorded no new event.
	Duplicate bool
}

// Receiver is the local stack's webhook receiver, the webhook function's
// WEBHOOK_URL: it answers 200 to every well-formed POST and records each
// by its Idempotency-Key, one event per key, as a receiver that dedups by
// that key does. A POST without the key or without a JSON event is 400.
type Receiver struct {
	// URL is where it takes events, e.g. http://127.0.0.1:41234/events.
	URL string
	// OnDelivery, when set, is told of every POST taken.
	OnDelivery func(Delivery)

	srv        *http.Server
	mu         sync.Mutex
	delay      func(Delivery) time.Duration
	deliveries []Delivery
	events     map[string]int // POSTs by key
}

// StartReceiver starts a receiver on addr (127.0.0.1:0 for a free port).
func StartReceiver(addr string) (*Receiver, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("devstack: the webhook receiver: %w", err)
	}
	r := &Receiver{URL: "http://" + ln.Addr().String() + WebhookPath, events: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+WebhookPath, r.take)
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *Receiver) take(w http.ResponseWriter, req *http.Request) {
	var ev webhook.Event
	key := req.Header.Get(webhook.IdempotencyKeyHeader)
	if err := json.NewDecoder(io.LimitReader(req.Body, 1<<16)).Decode(&ev); err != nil || key == "" {
		http.Error(w, "want a JSON event and an Idempotency-Key", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	d := Delivery{Key: key, Event: ev, Time: time.Now(), Duplicate: r.events[key] > 0}
	r.events[key]++
	r.deliveries = append(r.deliveries, d)
	on, delay := r.OnDelivery, r.delay
	r.mu.Unlock()
	if on != nil {
		on(d)
	}
	if delay != nil {
		select {
		case <-time.After(delay(d)):
		case <-req.Context().Done():
			return // the sender is gone: nobody reads the answer
		}
	}
	w.WriteHeader(http.StatusOK)
}

// SetDelay makes the receiver wait delay(d), after recording a POST d,
// before answering it (nil: answer at once): a slow receiver, or one a
// test kills the function under while the event is taken but not yet
// answered.
func (r *Receiver) SetDelay(delay func(Delivery) time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = delay
}

// Events returns how many events the receiver holds under key: 1 once any
// POST carried it, however many did.
func (r *Receiver) Events(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return min(r.events[key], 1)
}

// Deliveries returns every POST taken so far, duplicates included.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.deliveries)
}

// Close stops the receiver. It is safe on a nil receiver.
func (r *Receiver) Close() {
	if r == nil {
		return
	}
	proc.Shutdown(r.srv, 2*time.Second)
}

// Webhook prints a delivery the local receiver took.
func (r *Reporter) Webhook(d Delivery) {
	what := "webhook"
	if d.Duplicate {
		what = "webhook again"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "%s  %-14s event=%s  key=%s\n", d.Time.Format(time.TimeOnly), what, d.Event.EventID, d.Key)
}
