package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

const batchAnswer = `{"batchId":"4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f","jobs":[` +
	`{"index":0,"jobId":"j-0","state":"Enqueued","deduplicated":false},{"index":1,"jobId":"j-1","state":"AwaitingContinuation","deduplicated":true}]}`

// enqueue --batch sends the file's jobs as one batch, each with its fields
// (runAt in UTC, after "#0"), and prints each job's id and state.
func TestEnqueueBatchFile(t *testing.T) {
	noAWSCredentials(t)
	srv, got := fakeEnqueueAPI(t, http.StatusAccepted, batchAnswer)
	file := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(file, []byte(`{"jobs":[
		{"type":"email.welcome.v1","args":{"userId":"u-1"},"key":"k-0","runAt":"2026-12-10T10:00:00+01:00"},
		{"type":"email.password-reset.v1","args":{"userId":"u-1","countryCode":"DE"},"after":"#0","afterPolicy":"OnAnyEnd"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := jobctl("enqueue", "--batch", file, "--idempotency-key", "idem-b", "--api", srv.URL, "--caller", "alice")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	want := `{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"},"key":"k-0","runAt":"2026-12-10T09:00:00Z"},` +
		`{"type":"email.password-reset.v1","args":{"userId":"u-1","countryCode":"DE"},"after":"#0","afterPolicy":"OnAnyEnd"}]}`
	if got.bodies[0] != want || got.headers[0].Get("Idempotency-Key") != "idem-b" {
		t.Fatalf("body %s (Idempotency-Key %q)\nwant %s", got.bodies[0], got.headers[0].Get("Idempotency-Key"), want)
	}
	for _, want := range []string{"4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f", "accepted, HTTP 202", "j-1", "email.password-reset.v1", "AwaitingContinuation", "yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// A refused batch exits 2 and names each job's field; a file that is no
// batch, or --batch with a type or args, is a usage error with nothing
// sent.
func TestEnqueueBatchRefusals(t *testing.T) {
	noAWSCredentials(t)
	srv, got := fakeEnqueueAPI(t, http.StatusBadRequest, `{"type":"urn:runstwice:problem:validation-failed","title":"Bad Request","status":400,`+
		`"detail":"the batch is refused: 1 problems; no job was made","errors":[{"field":"jobs[1].after","reason":"#1 must name an earlier job"}]}`)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	_ = os.WriteFile(good, []byte(`{"jobs":[{"type":"email.welcome.v1","args":{"userId":"u-1"}},{"type":"email.welcome.v1","after":"#1"}]}`), 0o600)
	_ = os.WriteFile(bad, []byte(`{"jobs":[{"type":"email.welcome.v1","arg":{}}]}`), 0o600)
	if code, _, stderr := jobctl("enqueue", "--batch", good, "--api", srv.URL, "--caller", "alice"); code != exitUsage || !strings.Contains(stderr, "no job was made") {
		t.Fatalf("a refused batch: exit %d, stderr %s; want 2 and the API's problem", code, stderr)
	}
	for _, args := range [][]string{
		{"enqueue", "--batch", bad},
		{"enqueue", "--batch", filepath.Join(dir, "missing.json")},
		{"enqueue", "email.welcome.v1", "--batch", good},
		{"enqueue", "--batch", good, "userId=u-1"},
		{"enqueue", "--batch", good, "--after", "j-0"},
	} {
		if code, _, stderr := jobctl(append(args, "--api", srv.URL, "--caller", "alice")...); code != exitUsage {
			t.Errorf("jobctl %s: exit %d (%s); want 2", strings.Join(args, " "), code, stderr)
		}
	}
	if len(got.bodies) != 1 {
		t.Fatalf("%d requests; only the refused batch was to be sent", len(got.bodies))
	}
}

// --after makes a continuation; its refusals have their exit codes: a
// parent that is not the caller's 3, one with 100 waiting 4.
func TestEnqueueAfter(t *testing.T) {
	noAWSCredentials(t)
	srv, got := fakeEnqueueAPI(t, http.StatusAccepted, `{"jobId":"j-2","type":"email.welcome.v1","state":"AwaitingContinuation","key":"k"}`)
	code, out, stderr := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--after", "j-1", "--after-policy", "onanyend", "--api", srv.URL, "--caller", "alice")
	if code != exitOK || !strings.Contains(out, "AwaitingContinuation") {
		t.Fatalf("exit %d, out %s, stderr %s", code, out, stderr)
	}
	var body struct{ After, AfterPolicy string }
	if json.Unmarshal([]byte(got.bodies[0]), &body); body.After != "j-1" || body.AfterPolicy != "OnAnyEnd" {
		t.Fatalf("body %s", got.bodies[0])
	}
	for _, tc := range []struct {
		status int
		body   string
		code   int
	}{
		{404, `{"type":"urn:runstwice:problem:not-found","title":"Not Found","status":404,"detail":"you have no job j-1"}`, exitNotFound},
		{409, `{"type":"urn:runstwice:problem:too-many-continuations","title":"Conflict","status":409,"detail":"job j-1 already has 100 continuations"}`, exitRefused},
	} {
		srv, _ := fakeEnqueueAPI(t, tc.status, tc.body)
		if code, _, stderr := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--after", "j-1", "--api", srv.URL, "--caller", "alice"); code != tc.code {
			t.Errorf("%d %s: exit %d (%s); want %d", tc.status, tc.body, code, stderr, tc.code)
		}
	}
	for _, args := range [][]string{
		{"enqueue", "email.welcome.v1", "--after", "j-1", "--delay", "5"},
		{"enqueue", "email.welcome.v1", "--after", "j-1", "--run-at", "2h"},
		{"enqueue", "email.welcome.v1", "--after-policy", "OnAnyEnd"},
		{"enqueue", "email.welcome.v1", "--after", "j-1", "--after-policy", "Sometimes"},
	} {
		if code, _, stderr := jobctl(args...); code != exitUsage {
			t.Errorf("jobctl %s: exit %d (%s); want 2", strings.Join(args, " "), code, stderr)
		}
	}
}

// batches get reads the batch through the API and prints its state, the
// count per state and each job with its type (read from the job) and
// whether it deduplicated; another caller's is not found (3).
func TestBatchesGet(t *testing.T) {
	noAWSCredentials(t)
	var callers []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		callers = append(callers, r.Header.Get("X-Caller"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/batches/4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f":
			_, _ = io.WriteString(w, `{"batchId":"4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f","state":"Accepting",`+
				`"jobs":[{"index":0,"jobId":"j-0","state":"Succeeded","deduplicated":true},{"index":1,"jobId":"j-1","state":"AwaitingContinuation","deduplicated":false},`+
				`{"index":2,"jobId":"j-2","state":"Pending","deduplicated":false}],"counts":{"Succeeded":1,"AwaitingContinuation":1,"Pending":1}}`)
		case "/v1/jobs/j-0":
			_, _ = io.WriteString(w, `{"jobId":"j-0","type":"email.welcome.v1","state":"Succeeded"}`)
		case "/v1/jobs/j-1":
			_, _ = io.WriteString(w, `{"jobId":"j-1","type":"email.password-reset.v1","state":"AwaitingContinuation"}`)
		default: // j-2: a job of the cut-short accept, not made yet
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"type":"urn:runstwice:problem:not-found","title":"Not Found","status":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	code, out, stderr := jobctl("batches", "get", "4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f", "--api", srv.URL, "--caller", "alice")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	for _, c := range callers {
		if c != "alice" {
			t.Errorf("a request as %q; want every one as the caller alice", c)
		}
	}
	if !strings.Contains(out, "batch 4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f: Accepting, 3 jobs (") {
		t.Errorf("output lacks the batch's line:\n%s", out)
	}
	rows := map[string][]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 5 {
			rows[f[1]] = f[2:]
		}
	}
	for id, want := range map[string][]string{
		"j-0": {"email.welcome.v1", "Succeeded", "yes"},
		"j-1": {"email.password-reset.v1", "AwaitingContinuation", "no"},
		"j-2": {"-", "Pending", "no"},
	} {
		if strings.Join(rows[id], " ") != strings.Join(want, " ") {
			t.Errorf("row of %s: TYPE STATE DEDUPLICATED = %q; want %q\n%s", id, rows[id], want, out)
		}
	}
	missing, _ := fakeEnqueueAPI(t, 404, `{"type":"urn:runstwice:problem:not-found","title":"Not Found","status":404,"detail":"you have no batch"}`)
	if code, _, _ := jobctl("batches", "get", "4f7c2b1e-8d3a-4e6f-9b0c-1a2b3c4d5e6f", "--api", missing.URL, "--caller", "bob"); code != exitNotFound {
		t.Fatalf("another caller's batch: exit %d; want 3", code)
	}
	for _, args := range [][]string{{"batches", "get"}, {"batches", "get", "a", "b"}, {"batches", "get", "x", "--bogus", "1"}} {
		if code, _, _ := jobctl(args...); code != exitUsage {
			t.Errorf("jobctl %s: exit %d; want 2", strings.Join(args, " "), code)
		}
	}
}
