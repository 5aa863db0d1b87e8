package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
)

func TestPlanIsSeededAndMixed(t *testing.T) {
	a, b := plan(400, 3, DefaultMix, 7, "7"), plan(400, 3, DefaultMix, 7, "7")
	other := plan(400, 3, DefaultMix, 8, "8")
	count := map[string]int{}
	sameAsOther := true
	for i := range a {
		if a[i].IdemKey != b[i].IdemKey || a[i].User != b[i].User || a[i].Delay != b[i].Delay || a[i].Copies != b[i].Copies {
			t.Fatalf("job %d differs between two plans with one seed", i)
		}
		sameAsOther = sameAsOther && a[i].User == other[i].User && a[i].Delay == other[i].Delay
		if a[i].JobID != contract.DeriveMessageID(Caller, a[i].IdemKey) {
			t.Fatalf("job %d: id %s is not derived from its Idempotency-Key", i, a[i].JobID)
		}
		count[a[i].Kind.Type]++
		for name, on := range map[string]bool{"delayed": a[i].Delay > 0, "twins": a[i].Twins > 0, "copies": a[i].Copies > 0,
			"cancel": a[i].Cancel, "front": a[i].Front != frontNone, "poisoned": a[i].Poisoned} {
			if on {
				count[name]++
			}
		}
	}
	if sameAsOther {
		t.Fatal("two seeds drew the same plan")
	}
	for _, k := range kinds {
		if count[k.Type] != 100 {
			t.Errorf("%d jobs of %s; want 100", count[k.Type], k.Type)
		}
	}
	for _, name := range []string{"delayed", "twins", "copies", "cancel", "front", "poisoned"} {
		if count[name] == 0 || count[name] > 200 {
			t.Errorf("%d jobs %s out of 400", count[name], name)
		}
	}
	if count["poisoned"] != 4 {
		t.Errorf("%d poisoned; want exactly 1%% of 400", count["poisoned"])
	}
}

func TestObserverSeesBatchesKillsAndOutcomes(t *testing.T) {
	o := newObserver()
	read := time.Unix(2_000_000, 0)
	o.now = func() time.Time { return read }
	ev := events.SQSEvent{Records: []events.SQSMessage{{Body: `{"v":1,"messageId":"job-1"}`}, {Body: "poison"}, {Body: `{"messageId":"job-2"}`}}}
	payload, _ := json.Marshal(ev)
	ok := o.wrap("email", invokerFunc(func(context.Context, []byte) ([]byte, error) { return []byte("{}"), nil }))
	died := o.wrap("email", invokerFunc(func(context.Context, []byte) ([]byte, error) { return nil, errors.New("exited") }))
	if _, err := ok.Invoke(context.Background(), payload); err != nil {
		t.Fatal(err)
	}
	if _, err := died.Invoke(context.Background(), payload); err == nil {
		t.Fatal("the wrapper swallowed the error")
	}
	for _, line := range []string{
		`{"function":"email","msg":"killpoint","step":"after-effect","pid":12}`,
		`{"time":"2026-12-01T08:30:30.123+00:00","function":"email","level":"INFO","msg":"job outcome","outcome":"claim-failed","jobId":"job-1","reason":"r"}`,
		`{"function":"email","level":"INFO","msg":"job outcome","outcome":"retry","jobId":"job-2","reason":"r"}`,
		`{"function":"email","level":"INFO","msg":"mail sent","jobId":"job-1"}`,
		`not json at all`,
	} {
		if n, err := o.Write([]byte(line)); err != nil || n != len(line) {
			t.Fatalf("Write(%q) = %d, %v", line, n, err)
		}
	}
	s := o.snapshot()
	if len(s.Calls) != 2 || s.Calls[0].Lost || !s.Calls[1].Lost || strings.Join(s.Calls[1].JobIDs, ",") != "job-1,job-2" || s.Records["email"] != 4 {
		t.Fatalf("calls %+v, records %v", s.Calls, s.Records)
	}
	if len(s.Kills) != 1 || s.Kills[0].Step != "after-effect" || o.killCount() != 1 {
		t.Fatalf("kills %+v", s.Kills)
	}
	// An outcome line is dated by its own time (when the function wrote
	// it), or by when the observer read it.
	logged := time.Date(2026, 12, 1, 8, 30, 30, 123e6, time.UTC)
	if outs := s.Outcomes["job-1"]; len(outs) != 1 || outs[0].Line.Outcome != "claim-failed" || !outs[0].At.Equal(logged) {
		t.Fatalf("outcomes %+v; want job-1's claim-failed at %v", s.Outcomes, logged)
	}
	if outs := s.Outcomes["job-2"]; len(outs) != 1 || !outs[0].At.Equal(read) {
		t.Fatalf("outcomes %+v; want job-2's read at %v", s.Outcomes, read)
	}
	if o.inFlight.Load() != 0 {
		t.Fatalf("%d invocations in flight after both ended", o.inFlight.Load())
	}
}

func TestFrontInjectsAndRecords(t *testing.T) {
	reached := 0
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached++
		if r.Header.Get("Idempotency-Key") == "busy" {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"type":"https://runstwice.dev/problems/request-in-flight"}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer api.Close()
	f := newFront(http.DefaultTransport)
	f.inject("before", frontBefore)
	f.inject("after", frontAfter)
	post := func(key string) int {
		req, _ := http.NewRequest(http.MethodPost, api.URL+"/v1/jobs/x", strings.NewReader("{}"))
		req.Header.Set("Idempotency-Key", key)
		resp, err := f.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if key == "busy" && !strings.Contains(string(body), "request-in-flight") {
			t.Fatalf("the 409's body was lost: %q", body)
		}
		return resp.StatusCode
	}
	got := []int{post("before"), post("before"), post("after"), post("after"), post("busy")}
	want := []int{503, 202, 502, 202, 409}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v; want %v", got, want)
		}
	}
	if reached != 4 {
		t.Fatalf("the API saw %d requests; want 4 (the 503 never reaches it, the 502 does)", reached)
	}
	a := f.attempts()
	if len(a) != 5 || !a[0].Injected || a[1].Injected || !a[2].Injected || !a[4].InFlight {
		t.Fatalf("attempts %+v", a)
	}
}

func TestWitnessSeesMailsAndClaims(t *testing.T) {
	aws := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/email/outbound-emails" {
			_, _ = io.WriteString(w, `{"MessageId":"m-1"}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer aws.Close()
	s := newWitness()
	p, err := awsproxy.New(aws.URL, s.Hook)
	if err != nil {
		t.Fatal(err)
	}
	call := func(service, target, path, body string) int {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/"+service+"/aws4_request, SignedHeaders=host, Signature=x")
		if target != "" {
			r.Header.Set("X-Amz-Target", target)
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, r)
		return rec.Code
	}
	codes := []int{
		call("ses", "", "/v2/email/outbound-emails", `{"EmailTags":[{"Name":"jobId","Value":"job-9"}]}`),
		call("dynamodb", "DynamoDB_20120810.PutItem", "/", `{"Item":{"HandlerName":{"S":"email.welcome.v1#job-9"},"MessageKey":{"S":"job-9"},"state":{"S":"DONE"}}}`),
		call("dynamodb", "DynamoDB_20120810.PutItem", "/", `{"Item":{"HandlerName":{"S":"email.welcome.v1#job-8"},"MessageKey":{"S":"job-8"},"state":{"S":"LEASED"}}}`),
		call("dynamodb", "DynamoDB_20120810.PutItem", "/", `{"Item":{"pk":{"S":"job#job-7"},"state":{"S":"DONE"}}}`),
	}
	sends, claims := s.snapshot()
	if len(sends) != 1 || sends[0].JobID != "job-9" || sends[0].MessageID != "m-1" || sends[0].CallerGone || s.count() != 1 {
		t.Fatalf("sends %+v", sends)
	}
	if len(claims) != 1 || claims[0].JobID != "job-9" {
		t.Fatalf("claims %+v; want job-9's alone (a lease and another table's item are no claims)", claims)
	}
	for _, c := range codes {
		if c != http.StatusOK {
			t.Fatalf("answers %v; want each passed on", codes)
		}
	}
}
