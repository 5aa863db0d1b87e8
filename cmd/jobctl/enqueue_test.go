package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/sigv4"
)

// seen is what the fake API received.
type seen struct {
	mu      sync.Mutex
	headers []http.Header
	bodies  []string
	signers []string
}

// fakeEnqueueAPI answers POST /v1/jobs/{type} with status and body, and
// verifies signed requests against test/test in us-east-1 as API Gateway
// would.
func fakeEnqueueAPI(t *testing.T, status int, body string) (*httptest.Server, *seen) {
	t.Helper()
	s := &seen{}
	v := &sigv4.Verifier{Service: "execute-api", Region: "us-east-1", Lookup: func(k string) (sigv4.Credentials, bool) {
		return sigv4.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, k == "test"
	}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.headers, s.bodies = append(s.headers, r.Header.Clone()), append(s.bodies, string(b))
		s.mu.Unlock()
		if sigv4.Signed(r) {
			creds, err := v.Verify(r, b)
			if err != nil {
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"message":"Forbidden"}`)
				return
			}
			s.mu.Lock()
			s.signers = append(s.signers, creds.AccessKeyID)
			s.mu.Unlock()
		}
		ct := "application/json"
		if status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Location", "/v1/jobs/j-1")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, s
}

// noAWSCredentials leaves the standard chain nothing to find.
func noAWSCredentials(t *testing.T) {
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_REGION", "us-east-1")
}

func jobctl(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, func(k string) string {
		if k == "STAGE" || k == "RUNSTWICE_API_URL" {
			return ""
		}
		return os.Getenv(k)
	})
	return code, out.String(), errOut.String()
}

const acceptedBody = `{"jobId":"j-1","type":"email.welcome.v1","state":"Enqueued","key":"k-1","deduplicated":false,"correlationId":"c-1"}`

func TestEnqueueSendsTheJobThroughTheClient(t *testing.T) {
	noAWSCredentials(t)
	srv, got := fakeEnqueueAPI(t, http.StatusAccepted, acceptedBody)
	code, out, stderr := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "note=a=b", "--key", "k-1", "--policy", "rejectalways",
		"--delay=5m", "--idempotency-key", "idem-1", "--api", srv.URL, "--caller", "arn:aws:sts::123456789012:assumed-role/ci/run-7")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	h := got.headers[0]
	if h.Get("X-Caller") != "arn:aws:sts::123456789012:assumed-role/ci/run-7" || h.Get("Idempotency-Key") != "idem-1" || h.Get("Authorization") != "" {
		t.Fatalf("headers %v", h)
	}
	if want := `{"args":{"note":"a=b","userId":"u-1"},"key":"k-1","delaySeconds":300,"duplicatePolicy":"RejectAlways"}`; got.bodies[0] != want {
		t.Fatalf("body %s; want %s", got.bodies[0], want)
	}
	for _, want := range []string{"j-1", "Enqueued", "new job, HTTP 202", srv.URL + "/v1/jobs/j-1", "idem-1", "X-Caller"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// --run-at takes an RFC 3339 time (sent in UTC) or a duration from now.
func TestEnqueueRunAt(t *testing.T) {
	noAWSCredentials(t)
	for _, tc := range []struct {
		arg  string
		want func(time.Time) bool
	}{
		{"2026-12-03T10:00:00+01:00", func(at time.Time) bool { return at.Equal(time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)) }},
		{"3d", func(at time.Time) bool {
			d := time.Until(at)
			return d > 3*24*time.Hour-time.Minute && d <= 3*24*time.Hour
		}},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			srv, got := fakeEnqueueAPI(t, http.StatusAccepted, acceptedBody)
			code, _, stderr := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--run-at", tc.arg, "--api", srv.URL, "--caller", "alice")
			if code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, stderr)
			}
			var body struct {
				RunAt string `json:"runAt"`
			}
			if err := json.Unmarshal([]byte(got.bodies[0]), &body); err != nil {
				t.Fatal(err)
			}
			at, err := time.Parse(time.RFC3339Nano, body.RunAt)
			if err != nil || !strings.HasSuffix(body.RunAt, "Z") || !tc.want(at) {
				t.Fatalf("body %s; runAt %s, %v", got.bodies[0], at, err)
			}
		})
	}
}

// remote makes every API count as remote for the test (its fake listens on
// loopback).
func remote(t *testing.T) {
	t.Helper()
	isLocal = func(string) bool { return false }
	t.Cleanup(func() { isLocal = localapi.IsLocal })
}

func TestEnqueueSignsWithTheConfigurationChain(t *testing.T) {
	noAWSCredentials(t)
	remote(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	srv, got := fakeEnqueueAPI(t, http.StatusAccepted, acceptedBody)
	code, out, stderr := jobctl("--json", "enqueue", "email.welcome.v1", "userId=u-1", "--api", srv.URL)
	if code != exitOK || len(got.signers) != 1 || got.signers[0] != "test" {
		t.Fatalf("exit %d, signers %v, stderr %s; want a verified signature", code, got.signers, stderr)
	}
	var res struct {
		JobID          string `json:"jobId"`
		StatusCode     int    `json:"statusCode"`
		IdempotencyKey string `json:"idempotencyKey"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.JobID != "j-1" || res.StatusCode != 202 || res.IdempotencyKey == "" {
		t.Fatalf("--json output %q: %+v, %v", out, res, err)
	}
}

func TestEnqueueWithoutCredentials(t *testing.T) {
	noAWSCredentials(t)
	srv, got := fakeEnqueueAPI(t, http.StatusAccepted, acceptedBody)
	// The local stack: signed as its test identity, whatever the environment holds.
	code, out, stderr := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--api", srv.URL)
	if code != exitOK || len(got.signers) != 1 || got.signers[0] != "test" || !strings.Contains(out, "test identity") {
		t.Fatalf("exit %d, signers %v, out %s, stderr %s; want a request signed as test", code, got.signers, out, stderr)
	}
	// A remote API needs credentials: nothing is sent without them.
	remote(t)
	code, _, stderr = jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--api", srv.URL)
	if code != exitError || !strings.Contains(stderr, "credentials") || len(got.headers) != 1 {
		t.Fatalf("remote without credentials: exit %d, stderr %s, %d requests; want 1, a clear message and nothing sent", code, stderr, len(got.headers))
	}
}

func TestEnqueueExitCodes(t *testing.T) {
	noAWSCredentials(t)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		code   int
		stderr string
	}{
		{"deduplicated", 200, `{"jobId":"j-0","type":"t","state":"Enqueued","deduplicated":true}`, exitOK, ""},
		{"duplicate rejected", 409, `{"type":"urn:runstwice:problem:duplicate-job-rejected","title":"Conflict","status":409,"detail":"job j-0 is Succeeded","existingJobId":"j-0","policy":"RejectAlways"}`, exitRefused, "refused: job j-0 is Succeeded"},
		{"unknown type", 404, `{"type":"urn:runstwice:problem:unknown-job-type","title":"Not Found","status":404,"detail":"unknown job type x; did you mean email.welcome.v1?"}`, exitRefused, "did you mean"},
		{"invalid args", 400, `{"type":"urn:runstwice:problem:validation-failed","title":"Bad Request","status":400,"detail":"invalid","errors":[{"field":"args.userId","reason":"required"}]}`, exitUsage, "args.userId required"},
		{"forbidden", 403, `{"message":"Forbidden"}`, exitError, "403"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeEnqueueAPI(t, tc.status, tc.body)
			code, _, stderr := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--api", srv.URL, "--caller", "alice")
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d containing %q", code, stderr, tc.code, tc.stderr)
			}
		})
	}
	t.Run("--json prints the refusal", func(t *testing.T) {
		srv, _ := fakeEnqueueAPI(t, 409, `{"type":"urn:runstwice:problem:duplicate-job-rejected","title":"Conflict","status":409,"existingJobId":"j-0","policy":"RejectAlways"}`)
		code, out, _ := jobctl("enqueue", "email.welcome.v1", "userId=u-1", "--api", srv.URL, "--caller", "alice", "--json")
		var p struct{ ExistingJobID, Policy string }
		if code != exitRefused || json.Unmarshal([]byte(out), &p) != nil || p.ExistingJobID != "j-0" {
			t.Fatalf("exit %d, out %q", code, out)
		}
	})
}

func TestEnqueueUsageErrors(t *testing.T) {
	noAWSCredentials(t)
	for _, args := range [][]string{
		{"enqueue"},
		{"enqueue", "email.welcome.v1", "userId"},
		{"enqueue", "email.welcome.v1", "=x"},
		{"enqueue", "email.welcome.v1", "a=1", "a=2"},
		{"enqueue", "email.welcome.v1", "--policy", "Sometimes"},
		{"enqueue", "email.welcome.v1", "--delay", "-1"},
		{"enqueue", "email.welcome.v1", "--delay", "1.5s"},
		{"enqueue", "email.welcome.v1", "--key"},
		{"enqueue", "email.welcome.v1", "--run-at", "tomorrow"},
		{"enqueue", "email.welcome.v1", "--run-at", "2026-12-03T09:00:00"},
		{"enqueue", "email.welcome.v1", "--run-at", "2h", "--delay", "5"},
		{"enqueue", "email.welcome.v1", "--bogus", "1"},
		{"--stage", "prod", "enqueue", "email.welcome.v1", "userId=u-1"},
	} {
		if code, _, stderr := jobctl(args...); code != exitUsage {
			t.Errorf("jobctl %s: exit %d (%s); want 2", strings.Join(args, " "), code, stderr)
		}
	}
}
