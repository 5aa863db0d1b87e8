package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/client"
)

// answer is one scripted answer of the fake API.
type answer struct {
	status int
	header map[string]string
	body   string
	drop   bool // close the connection without answering
}

// fakeAPI answers requests from a script (the last answer repeats) and
// records what it received.
type fakeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	script   []answer
	requests []*http.Request
	bodies   []string
}

func newFakeAPI(t *testing.T, script ...answer) *fakeAPI {
	t.Helper()
	f := &fakeAPI{script: script}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.requests)
		f.requests = append(f.requests, r.Clone(context.Background()))
		f.bodies = append(f.bodies, string(b))
		a := f.script[min(n, len(f.script)-1)]
		f.mu.Unlock()
		if a.drop {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) received() ([]*http.Request, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests), slices.Clone(f.bodies)
}

// fast is a client of f that retries without noticeable waits.
func fast(t *testing.T, f *fakeAPI, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(f.URL, append([]client.Option{client.WithCaller("alice"), client.WithRetry(4, time.Millisecond, 2*time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var (
	created = answer{status: 202, header: map[string]string{"Content-Type": "application/json", "Location": "/v1/jobs/j-1"},
		body: `{"jobId":"j-1","type":"email.welcome.v1","state":"Enqueued","key":"welcome:u-1","deduplicated":false,"correlationId":"c-1"}`}
	problemJSON = map[string]string{"Content-Type": "application/problem+json"}
)

func problem(status int, kind, extra string) string {
	return fmt.Sprintf(`{"type":"%s%s","title":%q,"status":%d,"detail":"d"%s}`, client.ProblemTypePrefix, kind, http.StatusText(status), status, extra)
}

func TestEnqueueSendsTheRequestAndSurfacesTheAnswer(t *testing.T) {
	f := newFakeAPI(t, created)
	res, err := fast(t, f).Welcome(context.Background(), client.WelcomeArgs{UserID: "u-1"},
		client.EnqueueOptions{Key: "k", DuplicatePolicy: client.RejectAlways, DelaySeconds: 30, IdempotencyKey: "idem-1", CorrelationID: "c-1"})
	if err != nil {
		t.Fatal(err)
	}
	reqs, bodies := f.received()
	r := reqs[0]
	if r.Method != "POST" || r.URL.Path != "/v1/jobs/email.welcome.v1" || r.Header.Get("Idempotency-Key") != "idem-1" ||
		r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Caller") != "alice" || r.Header.Get("X-Correlation-Id") != "c-1" {
		t.Fatalf("request %s %s %v", r.Method, r.URL, r.Header)
	}
	if want := `{"args":{"userId":"u-1"},"key":"k","delaySeconds":30,"duplicatePolicy":"RejectAlways"}`; bodies[0] != want {
		t.Fatalf("body %s; want %s", bodies[0], want)
	}
	want := client.Result{JobID: "j-1", Type: "email.welcome.v1", State: client.StateEnqueued, Key: "welcome:u-1", CorrelationID: "c-1",
		Location: "/v1/jobs/j-1", StatusCode: 202, IdempotencyKey: "idem-1", Attempts: 1}
	if *res != want {
		t.Fatalf("result %+v; want %+v", *res, want)
	}
}

// RunAt goes out as runAt in RFC 3339, in UTC.
func TestEnqueueSendsRunAt(t *testing.T) {
	f := newFakeAPI(t, created)
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	if _, err := fast(t, f).Welcome(context.Background(), client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{RunAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, bodies := f.received(); bodies[0] != `{"args":{"userId":"u-1"},"runAt":"2026-12-03T09:00:00Z"}` {
		t.Fatalf("body %s", bodies[0])
	}
}

func TestTypedMethodsSendTheirTypeAndArgs(t *testing.T) {
	f := newFakeAPI(t, created)
	c := fast(t, f)
	ctx := context.Background()
	calls := []struct {
		do   func() (*client.Result, error)
		path string
		body string
	}{
		{func() (*client.Result, error) {
			return c.PartnerVerification(ctx, client.PartnerVerificationArgs{UserID: "u-1", RoleCode: "owner", CountryCode: "BD"}, client.EnqueueOptions{})
		}, "/v1/jobs/email.partner-verification.v1", `{"args":{"userId":"u-1","roleCode":"owner","countryCode":"BD"}}`},
		{func() (*client.Result, error) {
			return c.PasswordReset(ctx, client.PasswordResetArgs{UserID: "u-1", CountryCode: "BD"}, client.EnqueueOptions{})
		}, "/v1/jobs/email.password-reset.v1", `{"args":{"userId":"u-1","countryCode":"BD"}}`},
		{func() (*client.Result, error) {
			return c.Welcome(ctx, client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{})
		}, "/v1/jobs/email.welcome.v1", `{"args":{"userId":"u-1"}}`},
		{func() (*client.Result, error) {
			return c.PartnerDigest(ctx, client.PartnerDigestArgs{UserID: "u-1", DigestID: "2026-W48"}, client.EnqueueOptions{})
		}, "/v1/jobs/email.partner-digest.v1", `{"args":{"userId":"u-1","digestId":"2026-W48"}}`},
		{func() (*client.Result, error) {
			return c.Enqueue(ctx, "email.future.v2", map[string]string{"x": "1"}, client.EnqueueOptions{})
		}, "/v1/jobs/email.future.v2", `{"args":{"x":"1"}}`},
		{func() (*client.Result, error) {
			return c.Enqueue(ctx, "email.noargs.v1", nil, client.EnqueueOptions{})
		}, "/v1/jobs/email.noargs.v1", `{"args":{}}`},
	}
	keys := map[string]bool{}
	for i, call := range calls {
		res, err := call.do()
		if err != nil {
			t.Fatal(err)
		}
		reqs, bodies := f.received()
		if reqs[i].URL.Path != call.path || bodies[i] != call.body {
			t.Errorf("sent %s %s; want %s %s", reqs[i].URL.Path, bodies[i], call.path, call.body)
		}
		if k := reqs[i].Header.Get("Idempotency-Key"); k == "" || k != res.IdempotencyKey || keys[k] {
			t.Errorf("Idempotency-Key %q (result %q): want a new generated key per call", k, res.IdempotencyKey)
		}
		keys[reqs[i].Header.Get("Idempotency-Key")] = true
	}
}

func TestRetries(t *testing.T) {
	inFlight := answer{status: 409, header: map[string]string{"Content-Type": "application/problem+json", "Retry-After": "0"}, body: problem(409, "request-in-flight", "")}
	replayed := created
	replayed.header = map[string]string{"Content-Type": "application/json", "Idempotent-Replayed": "true", "Location": "/v1/jobs/j-1"}
	for _, tc := range []struct {
		name     string
		script   []answer
		attempts int
		replayed bool
		wantErr  error // matched with errors.Is; nil: success
		status   int   // the *Problem's status when wantErr is set
	}{
		{name: "503 then created", script: []answer{{status: 503, header: problemJSON, body: problem(503, "service-unavailable", "")}, created}, attempts: 2},
		{name: "gateway 500 then replayed", script: []answer{{status: 500, header: map[string]string{"Content-Type": "application/json"}, body: `{"message":"Internal Server Error"}`}, replayed}, attempts: 2, replayed: true},
		{name: "in flight twice then replayed", script: []answer{inFlight, inFlight, replayed}, attempts: 3, replayed: true},
		{name: "throttled then created", script: []answer{{status: 429, body: `{"message":"Too Many Requests"}`}, created}, attempts: 2},
		{name: "connection lost then created", script: []answer{{drop: true}, created}, attempts: 2},
		{name: "5xx every time gives up after the attempts", script: []answer{{status: 502, body: "bad gateway"}}, attempts: 4, wantErr: &client.Problem{}, status: 502},
		{name: "duplicate rejected is final", script: []answer{{status: 409, header: problemJSON, body: problem(409, "duplicate-job-rejected", `,"existingJobId":"j-0","policy":"RejectAlways"`)}},
			attempts: 1, wantErr: client.ErrDuplicateRejected, status: 409},
		{name: "key reused is final", script: []answer{{status: 422, header: problemJSON, body: problem(422, "idempotency-key-reused", "")}}, attempts: 1, wantErr: client.ErrKeyReused, status: 422},
		{name: "validation is final", script: []answer{{status: 400, header: problemJSON, body: problem(400, "validation-failed", `,"errors":[{"field":"args.userId","reason":"required"}]`)}}, attempts: 1, wantErr: &client.Problem{}, status: 400},
		{name: "schedule quota reached is final", script: []answer{{status: 503, header: problemJSON, body: problem(503, "schedule-quota-exceeded", "")}, created},
			attempts: 1, wantErr: client.ErrScheduleQuota, status: 503},
		{name: "refused signature is final", script: []answer{{status: 403, body: `{"message":"The request signature we calculated does not match"}`}}, attempts: 1, wantErr: &client.Problem{}, status: 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, tc.script...)
			res, err := fast(t, f).Welcome(context.Background(), client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{})
			reqs, bodies := f.received()
			if len(reqs) != tc.attempts {
				t.Fatalf("%d requests; want %d", len(reqs), tc.attempts)
			}
			for i := range reqs {
				if reqs[i].Header.Get("Idempotency-Key") != reqs[0].Header.Get("Idempotency-Key") || bodies[i] != bodies[0] {
					t.Fatalf("attempt %d sent key %q body %s; want the first attempt's %q %s", i+1,
						reqs[i].Header.Get("Idempotency-Key"), bodies[i], reqs[0].Header.Get("Idempotency-Key"), bodies[0])
				}
			}
			if tc.wantErr == nil {
				if err != nil || res.Attempts != tc.attempts || res.Replayed != tc.replayed || res.JobID != "j-1" {
					t.Fatalf("result %+v, %v; want job j-1 after %d attempts, replayed %v", res, err, tc.attempts, tc.replayed)
				}
				return
			}
			var p *client.Problem
			if !errors.As(err, &p) || p.Status != tc.status {
				t.Fatalf("error %v; want a *Problem with status %d", err, tc.status)
			}
			if _, isProblem := tc.wantErr.(*client.Problem); !isProblem && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v; want it to match %v", err, tc.wantErr)
			}
			if tc.status == 409 && (p.ExistingJobID != "j-0" || p.Policy != "RejectAlways") {
				t.Fatalf("duplicate problem %+v; want existingJobId and policy", p)
			}
			if tc.status == 400 && (len(p.Errors) != 1 || p.Errors[0].Field != "args.userId") {
				t.Fatalf("validation problem %+v; want its field errors", p)
			}
			if tc.status == 403 && !strings.Contains(p.Detail, "signature we calculated") {
				t.Fatalf("gateway refusal %+v; want its message as detail", p)
			}
		})
	}
}

// TestRetryAfterIsHonoured: an in-flight answer asking for 30 s is not
// retried sooner, so a context shorter than that ends the call after one
// attempt, with both the context's error and the problem.
func TestRetryAfterIsHonoured(t *testing.T) {
	f := newFakeAPI(t,
		answer{status: 409, header: map[string]string{"Content-Type": "application/problem+json", "Retry-After": "30"}, body: problem(409, "request-in-flight", "")},
		created)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := fast(t, f).Welcome(ctx, client.WelcomeArgs{UserID: "u-1"}, client.EnqueueOptions{})
	var p *client.Problem
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &p) || p.Type != client.ProblemInFlight || p.RetryAfter != 30*time.Second {
		t.Fatalf("error %v; want the deadline and the in-flight problem", err)
	}
	if reqs, _ := f.received(); len(reqs) != 1 {
		t.Fatalf("%d requests; want 1 (Retry-After: 30 was not honoured)", len(reqs))
	}
}

func TestContextBoundsTheRetries(t *testing.T) {
	f := newFakeAPI(t, answer{status: 503, body: "down"})
	c, err := client.New(f.URL, client.WithCaller(""), client.WithRetry(1000, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = c.Get(ctx, "j-1")
	var p *client.Problem
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &p) || p.Status != 503 {
		t.Fatalf("error %v; want the deadline and the last 503", err)
	}
	if reqs, _ := f.received(); len(reqs) >= 1000 || reqs[0].Header.Get("X-Caller") != "" {
		t.Fatalf("%d requests (X-Caller %q); want fewer than the attempts and no X-Caller", len(reqs), reqs[0].Header.Get("X-Caller"))
	}
}

func TestGetAndCancel(t *testing.T) {
	jobBody := `{"jobId":"j-1","type":"email.welcome.v1","key":"welcome:u-1","state":"Succeeded","attempts":2,` +
		`"createdAt":"2026-01-02T03:04:05Z","updatedAt":"2026-01-02T03:04:06Z","runAt":"2026-01-02T03:04:05Z",` +
		`"lastOutcome":"sent","lastReason":"","traceId":"1-abc","somethingNew":{"x":1}}`
	for _, tc := range []struct {
		name   string
		cancel bool
		answer answer
		state  client.State
		is     error
	}{
		{"get", false, answer{status: 200, header: map[string]string{"Content-Type": "application/json"}, body: jobBody}, client.StateSucceeded, nil},
		{"get someone else's", false, answer{status: 404, header: problemJSON, body: problem(404, "not-found", "")}, "", client.ErrNotFound},
		{"cancel", true, answer{status: 202, header: map[string]string{"Content-Type": "application/json"}, body: `{"jobId":"j-1","state":"Cancelled"}`}, client.StateCancelled, nil},
		{"cancel a finished job", true, answer{status: 409, header: problemJSON, body: problem(409, "job-finished", `,"state":"Succeeded"`)}, client.StateSucceeded, client.ErrConflict},
		{"cancel someone else's", true, answer{status: 404, header: problemJSON, body: problem(404, "not-found", "")}, "", client.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeAPI(t, tc.answer)
			c := fast(t, f)
			do, method := c.Get, "GET"
			if tc.cancel {
				do, method = c.Cancel, "DELETE"
			}
			j, err := do(context.Background(), "j-1")
			if reqs, _ := f.received(); len(reqs) != 1 || reqs[0].Method != method || reqs[0].URL.Path != "/v1/jobs/j-1" {
				t.Fatalf("requests %v; want one %s /v1/jobs/j-1", reqs, method)
			}
			if tc.is != nil {
				var p *client.Problem
				if !errors.Is(err, tc.is) || !errors.As(err, &p) || p.State != tc.state {
					t.Fatalf("error %v; want %v with state %q", err, tc.is, tc.state)
				}
				return
			}
			if err != nil || j.JobID != "j-1" || j.State != tc.state {
				t.Fatalf("job %+v, %v; want j-1 %s", j, err, tc.state)
			}
			if !tc.cancel && (j.Attempts != 2 || j.TraceID != "1-abc" || j.LastOutcome != "sent" || j.CreatedAt.IsZero()) {
				t.Fatalf("job %+v: fields not read", j)
			}
		})
	}
}

func TestWaitReturnsTheFinishedJob(t *testing.T) {
	running := answer{status: 200, body: `{"jobId":"j-1","state":"Enqueued"}`}
	f := newFakeAPI(t, running, running, answer{status: 200, body: `{"jobId":"j-1","state":"Failed","lastReason":"dead-lettered"}`})
	j, err := fast(t, f).Wait(context.Background(), "j-1", time.Millisecond)
	if err != nil || j.State != client.StateFailed || j.LastReason != "dead-lettered" {
		t.Fatalf("Wait = %+v, %v; want the Failed job", j, err)
	}
	if reqs, _ := f.received(); len(reqs) != 3 {
		t.Fatalf("%d reads; want 3", len(reqs))
	}
}

func TestBadInputIsAnError(t *testing.T) {
	f := newFakeAPI(t, created)
	c := fast(t, f)
	ctx := context.Background()
	for name, do := range map[string]func() error{
		"type with a slash": func() error { _, err := c.Enqueue(ctx, "a/b", nil, client.EnqueueOptions{}); return err },
		"empty type":        func() error { _, err := c.Enqueue(ctx, "", nil, client.EnqueueOptions{}); return err },
		"negative delay": func() error {
			_, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u"}, client.EnqueueOptions{DelaySeconds: -1})
			return err
		},
		"runAt with a delay": func() error {
			_, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u"}, client.EnqueueOptions{DelaySeconds: 5, RunAt: time.Now().Add(time.Hour)})
			return err
		},
		"key with a newline": func() error {
			_, err := c.Welcome(ctx, client.WelcomeArgs{UserID: "u"}, client.EnqueueOptions{IdempotencyKey: "a\nb"})
			return err
		},
		"args that are not JSON": func() error { _, err := c.Enqueue(ctx, "t.v1", func() {}, client.EnqueueOptions{}); return err },
		"job id with a slash":    func() error { _, err := c.Get(ctx, "../x"); return err },
		"no authentication":      func() error { _, err := client.New(f.URL); return err },
		"signed and unsigned": func() error {
			_, err := client.New(f.URL, client.WithCaller("a"), client.WithCredentials(staticCreds("k", "s"), "us-east-1"))
			return err
		},
		"not a URL": func() error { _, err := client.New("ftp://x", client.WithCaller("a")); return err },
		"no region": func() error {
			_, err := client.New(f.URL, client.WithCredentials(staticCreds("k", "s"), ""))
			return err
		},
		"zero attempts": func() error {
			_, err := client.New(f.URL, client.WithCaller("a"), client.WithRetry(0, time.Second, time.Second))
			return err
		},
		"nil HTTP client": func() error {
			_, err := client.New(f.URL, client.WithCaller("a"), client.WithHTTPClient(nil))
			return err
		},
	} {
		if err := do(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if reqs, _ := f.received(); len(reqs) != 0 {
		t.Fatalf("bad input reached the API: %d requests", len(reqs))
	}
}

func TestWaitStopsWithTheContext(t *testing.T) {
	f := newFakeAPI(t, answer{status: 200, body: `{"jobId":"j-1","state":"Scheduled"}`})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	j, err := fast(t, f).Wait(ctx, "j-1", time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) || j == nil || j.State != client.StateScheduled {
		t.Fatalf("Wait = %+v, %v; want the last job read and the deadline", j, err)
	}
	if _, err := fast(t, f).Wait(context.Background(), "j-1", 0); err == nil {
		t.Fatal("Wait with no interval: no error")
	}
}
