package chaos

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// attempt is one HTTP attempt of an enqueue the client made.
type attempt struct {
	IdemKey string
	Status  int // 0: no response (connection error)
	// Injected: the campaign's front answered it (a fault), not the API.
	Injected bool
	// InFlight: a 409 "request in flight" answer.
	InFlight bool
	// Detail is the start of a 5xx answer's body (what said it failed).
	Detail string
	Time   time.Time
}

// front is the campaign's HTTP transport to the API: it records every
// enqueue attempt and injects the planned fault into the first attempt of
// some requests, a 503 before the API sees it or a 502 after the API
// answered (the answer lost), so the client retries with the same
// Idempotency-Key.
type front struct {
	next http.RoundTripper
	now  func() time.Time
	mu   sync.Mutex
	plan map[string]frontFault // by Idempotency-Key, first attempt only
	log  []attempt
}

func newFront(next http.RoundTripper) *front {
	return &front{next: next, now: time.Now, plan: map[string]frontFault{}}
}

// inject plans fault f for the first attempt of the request with key.
func (f *front) inject(key string, fault frontFault) {
	if fault == frontNone {
		return
	}
	f.mu.Lock()
	f.plan[key] = fault
	f.mu.Unlock()
}

// RoundTrip implements http.RoundTripper.
func (f *front) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	if req.Method != http.MethodPost || key == "" {
		return f.next.RoundTrip(req)
	}
	f.mu.Lock()
	fault := f.plan[key]
	delete(f.plan, key)
	f.mu.Unlock()
	a := attempt{IdemKey: key, Time: f.now()}
	if fault == frontBefore {
		a.Status, a.Injected = http.StatusServiceUnavailable, true
		f.record(a)
		return injected(req, http.StatusServiceUnavailable), nil
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		f.record(a)
		return nil, err
	}
	if fault == frontAfter {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		a.Status, a.Injected = http.StatusBadGateway, true
		f.record(a)
		return injected(req, http.StatusBadGateway), nil
	}
	a.Status = resp.StatusCode
	if resp.StatusCode == http.StatusConflict || resp.StatusCode >= http.StatusInternalServerError {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a.InFlight = resp.StatusCode == http.StatusConflict && strings.Contains(string(body), "request-in-flight")
		if resp.StatusCode >= http.StatusInternalServerError {
			a.Detail = string(body[:min(len(body), 300)])
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
	}
	f.record(a)
	return resp, nil
}

func (f *front) record(a attempt) {
	f.mu.Lock()
	f.log = append(f.log, a)
	f.mu.Unlock()
}

func (f *front) attempts() []attempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]attempt(nil), f.log...)
}

// injected is the front's own error answer, as a gateway sends it.
func injected(req *http.Request, status int) *http.Response {
	body := `{"message":"injected by the chaos campaign's front"}`
	return &http.Response{
		StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req,
	}
}
