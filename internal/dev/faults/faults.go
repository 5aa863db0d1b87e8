// Package faults injects into the local stack's AWS calls the faults AWS
// really produces: throttling with each service's own error shape, 500 and
// 503 answers, cut connections, delays, outages, and the hardest one: a
// call that is applied and whose response is lost. An Injector is an
// awsproxy hook; rules (Parse) say which calls, which fault and how often.
// Every fault it injects is kept as an Event, so a ledger can tell which
// anomalies the faults explain.
package faults

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	smithytime "github.com/aws/smithy-go/time"
	"golang.org/x/time/rate"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
)

// Event is one fault the injector applied.
type Event struct {
	Time      time.Time `json:"time"`
	Service   string    `json:"service"`
	Operation string    `json:"operation"`
	Kind      Kind      `json:"kind"`
	// Applied reports that the call was applied upstream before its
	// response was lost (drop, drop500); Status is the upstream's answer.
	Applied bool `json:"applied,omitempty"`
	Status  int  `json:"status,omitempty"`
	// body is the start of the request body (Mentions reads it).
	body []byte
}

// Mentions reports whether the call's request body contains s (a job id,
// an Idempotency-Key): which job or request a fault touched.
func (e Event) Mentions(s string) bool {
	return s != "" && bytes.Contains(e.body, []byte(s))
}

// Body returns the start of the call's request body (at most 4 KiB).
func (e Event) Body() []byte { return e.body }

// keepBody is how much of each faulted request's body an Event keeps.
const keepBody = 4 << 10

// Injector applies rules to the calls passing an awsproxy. It is safe for
// concurrent use.
type Injector struct {
	paused atomic.Bool
	mu     sync.Mutex
	rules  []*rule
	rng    *rand.Rand
	start  time.Time
	events []Event
	// Now is the clock (time.Now if nil); set it before the first call.
	Now func() time.Time
}

type rule struct {
	Rule
	fired int
	// bucket lets a rated throttle's calls through at its Rate.
	bucket *rate.Limiter
}

// New returns an injector of rules whose randomness comes from seed (the
// same seed draws the same sequence). Windows count from now.
func New(rules []Rule, seed uint64) *Injector {
	in := &Injector{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), start: time.Now()}
	for _, r := range rules {
		in.Add(r)
	}
	return in
}

func (in *Injector) now() time.Time {
	if in.Now != nil {
		return in.Now()
	}
	return time.Now()
}

// Add adds a rule while the injector runs (an outage a campaign scripts)
// and returns what removes it again. Its window counts from the
// injector's start.
func (in *Injector) Add(r Rule) (remove func()) {
	if r.P <= 0 || r.P > 1 {
		r.P = 1
	}
	if r.Kind == Delay && r.Delay <= 0 {
		r.Delay = DefaultDelay
	}
	rs := &rule{Rule: r}
	if r.Kind == Throttle && r.Rate > 0 {
		rs.bucket = rate.NewLimiter(rate.Limit(r.Rate), max(1, int(math.Ceil(r.Rate))))
	}
	in.mu.Lock()
	in.rules = append(in.rules, rs)
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		for i, x := range in.rules {
			if x == rs {
				in.rules = append(in.rules[:i], in.rules[i+1:]...)
				return
			}
		}
	}
}

// Pause stops every fault (calls pass unchanged) until Resume.
func (in *Injector) Pause() { in.paused.Store(true) }

// Resume applies the rules again after Pause.
func (in *Injector) Resume() { in.paused.Store(false) }

// Events returns the faults applied so far, oldest first.
func (in *Injector) Events() []Event {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]Event(nil), in.events...)
}

// Counts returns how many faults of each kind were applied so far.
func (in *Injector) Counts() map[Kind]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[Kind]int{}
	for _, e := range in.events {
		out[e.Kind]++
	}
	return out
}

// draw picks the fault for a call, if any: the first rule that matches
// and whose draw hits. A rated throttle lets a call through while its bucket
// holds a token (the call takes it) and only then draws.
func (in *Injector) draw(service, operation string, body []byte) (Rule, int, bool) {
	if in.paused.Load() || service == "" {
		return Rule{}, 0, false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	elapsed := in.now().Sub(in.start)
	for _, r := range in.rules {
		if !r.matches(service, operation, body, elapsed) || (r.Limit > 0 && r.fired >= r.Limit) {
			continue
		}
		if r.bucket != nil && r.bucket.AllowN(in.now(), 1) {
			continue
		}
		if r.P < 1 && in.rng.Float64() >= r.P {
			continue
		}
		r.fired++
		return r.Rule, in.rng.IntN(2), true
	}
	return Rule{}, 0, false
}

func (in *Injector) record(e Event) {
	in.mu.Lock()
	in.events = append(in.events, e)
	in.mu.Unlock()
}

// Hook is the awsproxy hook that applies the faults. Put it first (outermost),
// so that a dropped response was still seen by the hooks after it.
func (in *Injector) Hook(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := awsproxy.CallOf(r)
		if c == nil {
			next.ServeHTTP(w, r)
			return
		}
		rl, pick, ok := in.draw(c.Service, c.Operation, append([]byte(c.Path+" "), c.Body...))
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		ev := Event{Time: in.now(), Service: c.Service, Operation: c.Operation, Kind: rl.Kind,
			body: bytes.Clone(c.Body[:min(len(c.Body), keepBody)])}
		// Each fault is recorded before the caller can see it.
		switch rl.Kind {
		case Throttle:
			in.record(ev)
			throttle(c.Service, pick).write(w)
		case Error500, Error503:
			in.record(ev)
			status := http.StatusInternalServerError
			if rl.Kind == Error503 {
				status = http.StatusServiceUnavailable
			}
			serverError(c.Service, status).write(w)
		case Reset, Down:
			in.record(ev)
			cut(w, c.Service)
		case Delay:
			if smithytime.SleepWithContext(r.Context(), rl.Delay) != nil {
				return // the caller went away while it waited: nothing was sent
			}
			in.record(ev)
			next.ServeHTTP(w, r)
		case Drop, Drop500:
			// Applied whatever the caller does meanwhile; then the answer
			// is lost.
			buf := &bufferedResponse{header: http.Header{}, status: http.StatusOK}
			next.ServeHTTP(buf, r.WithContext(context.WithoutCancel(r.Context())))
			ev.Applied, ev.Status = true, buf.status
			in.record(ev)
			if rl.Kind == Drop {
				cut(w, c.Service)
			} else {
				serverError(c.Service, http.StatusInternalServerError).write(w)
			}
		}
	})
}

// cut resets the caller's connection (TCP RST, no response). Where the
// connection cannot be taken over it answers 503 instead, which the SDKs
// also retry.
func cut(w http.ResponseWriter, service string) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		serverError(service, http.StatusServiceUnavailable).write(w)
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with RST, not FIN
	}
	_ = conn.Close()
}

// bufferedResponse takes a response that is never sent on.
type bufferedResponse struct {
	header http.Header
	status int
}

func (b *bufferedResponse) Header() http.Header         { return b.header }
func (b *bufferedResponse) WriteHeader(status int)      { b.status = status }
func (b *bufferedResponse) Write(p []byte) (int, error) { return len(p), nil }
