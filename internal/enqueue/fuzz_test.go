package enqueue_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/message"
)

func fingerprintOf(t testing.TB, typ string, body []byte) string {
	t.Helper()
	fp, err := idempotency.Fingerprint(http.MethodPost, "/v1/jobs/"+typ, body)
	if err != nil {
		t.Fatal(err)
	}
	return fp
}

var fuzzSeeds = []string{
	welcomeU1, verifyBody,
	`{"args":{"userId":"u-1"},"key":"k","delaySeconds":900,"duplicatePolicy":"RejectAlways"}`,
	`{"args":{"userId":"u-1","digestId":"2026-W48"}}`,
	`{"args":{"userId":{"a":1}}}`, `{"args":[]}`, `[]`, `null`, `""`, `{`, ``, `{"args":{}}`,
	`{"args":{"userId":"a@b"}}`, `{"delaySeconds":1e3}`, `{"delaySeconds":-0}`, "{\"args\":{\"\xff\":\"x\"}}",
	`{"args":{"userId":"u-1"}} x`, `{"args":{"userId":"u-1"},"args":{"userId":"u-2"}}`,
}

// FuzzDecodeBody: the decoder never panics, and whatever it accepts is a
// valid job: args valid for the type, a valid key, a delay in range, a known
// policy, and an envelope that encodes.
func FuzzDecodeBody(f *testing.F) {
	reg := contract.Registry()
	for _, s := range fuzzSeeds {
		for _, name := range reg.Names() {
			f.Add(name, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		jt, err := reg.Lookup(typ)
		if err != nil {
			return
		}
		req, err := contract.DecodeBody(jt, body)
		if err != nil {
			if _, ok := err.(*message.ValidationError); !ok {
				t.Fatalf("error %T %v is not a *message.ValidationError", err, err)
			}
			return
		}
		if err := jt.ValidateArgs(req.Args); err != nil {
			t.Fatalf("accepted invalid args %v: %v", req.Args, err)
		}
		if !message.ValidKey(req.Key) || req.Delay < 0 || req.Delay > contract.MaxDelaySeconds*time.Second {
			t.Fatalf("accepted %+v", req)
		}
		if _, ok := contract.ParsePolicy(string(req.Policy)); !ok || req.Policy == "" {
			t.Fatalf("accepted policy %q", req.Policy)
		}
		env := message.Envelope{V: 1, MessageID: message.NewMessageID(), Type: jt.Name, Key: req.Key, CorrelationID: "c", Args: req.Args, EnqueuedAt: time.Now()}
		if _, err := env.Encode(); err != nil {
			t.Fatalf("accepted a request whose envelope does not encode: %v", err)
		}
	})
}

// FuzzHandle: no input makes the handler panic, fail or answer 5xx (with
// working fakes), and every error is a problem+json.
func FuzzHandle(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add("POST", "/v1/jobs/"+welcome, "k", "application/json", s)
	}
	f.Add("GET", "/v1/jobs/x", "", "", "")
	f.Add("POST", "/v1/jobs/%zz", `"q"`, "application/json; charset=utf-8", welcomeU1)
	f.Fuzz(func(t *testing.T, method, path, key, contentType, body string) {
		w := newWorld()
		h := newHandler(w)
		req := request(method, path, body, withHeader("Idempotency-Key", key), withHeader("Content-Type", contentType))
		resp, err := h.Handle(context.Background(), req)
		if err != nil || resp.StatusCode >= 500 || resp.StatusCode < 200 {
			t.Fatalf("%s %q: %d %v %s", method, path, resp.StatusCode, err, resp.Body)
		}
		if resp.StatusCode >= 400 && resp.Headers["Content-Type"] != enqueue.ContentTypeProblem {
			t.Fatalf("%d without problem+json", resp.StatusCode)
		}
		if resp.StatusCode < 300 && !strings.HasPrefix(resp.Body, "{") {
			t.Fatalf("success body %q", resp.Body)
		}
	})
}
