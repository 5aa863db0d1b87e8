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
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/message"
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
		caller := Caller
		if a[i].Source == viaOutbox {
			caller = "outbox:" + Producer
			if a[i].Twins > 0 || a[i].Cancel || a[i].Front != frontNone {
				t.Fatalf("job %d goes through the outbox with an HTTP treatment: %+v", i, a[i])
			}
		}
		if a[i].After != b[i].After || a[i].AfterPolicy != b[i].AfterPolicy || a[i].BatchKey != b[i].BatchKey || a[i].BatchAt != b[i].BatchAt {
			t.Fatalf("job %d's chain or batch differs between two plans with one seed", i)
		}
		want := message.DeriveMessageID(caller, a[i].IdemKey)
		if a[i].batched() {
			want = enqueue.BatchJobID(caller, a[i].BatchKey, a[i].BatchAt)
		}
		if a[i].JobID != want {
			t.Fatalf("job %d: id %s is not derived from its caller %s and Idempotency-Key", i, a[i].JobID, caller)
		}
		count[a[i].Kind.Type]++
		for name, on := range map[string]bool{"delayed": a[i].Delay > 0, "twins": a[i].Twins > 0, "copies": a[i].Copies > 0,
			"cancel": a[i].Cancel, "front": a[i].Front != frontNone, "poisoned": a[i].Poisoned,
			"outbox": a[i].Source == viaOutbox, "rewrite": a[i].Rewrite, "refuse": a[i].Refuse,
			"after": a[i].continuation(), "batched": a[i].batched()} {
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
	for _, name := range []string{"delayed", "twins", "copies", "cancel", "front", "poisoned", "outbox", "rewrite", "refuse"} {
		if count[name] == 0 || count[name] > 200 {
			t.Errorf("%d jobs %s out of 400", count[name], name)
		}
	}
	if count["outbox"] < 40 || count["outbox"] > 80 || count["rewrite"] >= count["outbox"] || count["refuse"] >= count["outbox"] {
		t.Errorf("%d jobs through the outbox (%d rewritten, %d refused) out of 400; want about 15%%, some of them rewritten and refused", count["outbox"], count["rewrite"], count["refuse"])
	}
	checkChainsAndBatches(t, a)
	if count["after"] < 20 || count["after"] > 60 || count["batched"] < 20 || count["batched"] > 80 {
		t.Errorf("%d continuations and %d batched jobs out of 400; want about 10%% each", count["after"], count["batched"])
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
		`{"msg":"killpoint","step":"mid-invocation","function":"outbox","pid":13}`,
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
	if len(s.Calls) != 2 || s.Calls[0].Lost || !s.Calls[1].Lost || strings.Join(s.Calls[1].JobIDs, ",") != "job-1,job-2" || s.Records["email"] != 6 {
		t.Fatalf("calls %+v, records %v", s.Calls, s.Records)
	}
	if len(s.Kills) != 2 || s.Kills[0].Step != "after-effect" || s.Kills[1].Step != "outbox mid-invocation" || o.killCount() != 2 {
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
	// A stream batch (the outbox relay's) counts its records; it names no
	// job a mail could be explained by.
	stream, _ := json.Marshal(events.DynamoDBEvent{Records: make([]events.DynamoDBEventRecord, 2)})
	relay := o.wrap("outbox", invokerFunc(func(context.Context, []byte) ([]byte, error) { return []byte("{}"), nil }))
	if _, err := relay.Invoke(context.Background(), stream); err != nil {
		t.Fatal(err)
	}
	if s := o.snapshot(); s.Records["outbox"] != 2 || len(s.Calls[2].JobIDs) != 0 {
		t.Fatalf("relay call %+v, records %v", s.Calls[2], s.Records)
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

// The ticks' times are Mondays at 09:00 UTC of three distinct weeks before
// now's, whatever the day, and the second time of a week is in that week.
func TestWeeksBeforeAreMondaysOfPastWeeks(t *testing.T) {
	for day := range 7 {
		now := time.Date(2026, 11, 30, 8, 59, 0, 0, time.UTC).AddDate(0, 0, day) // Monday 30 November, before 09:00
		w := weeksBefore(now)
		seen := map[string]bool{}
		for _, at := range []time.Time{w.off, w.on, w.other} {
			if at.Weekday() != time.Monday || at.Hour() != 9 || !at.Before(now) || seen[contract.ISOWeek(at)] {
				t.Fatalf("%s: weeks %+v; want Mondays 09:00 of three distinct past weeks", now.Weekday(), w)
			}
			seen[contract.ISOWeek(at)] = true
		}
		if contract.ISOWeek(w.onAgain) != contract.ISOWeek(w.on) || w.onAgain.Equal(w.on) || contract.ISOWeek(w.other) == contract.ISOWeek(now) {
			t.Fatalf("%s: weeks %+v", now.Weekday(), w)
		}
	}
}

// The kills from outside: none of a fan-out page before its switch is on
// (or of a batch without one), the first page's batch after it surely, never
// the same pages twice; every relay batch, early, until a kill of the relay
// has landed, then some of them.
func TestKillerChoosesItsBatches(t *testing.T) {
	on, landed, relayLanded := false, 0, 0
	k := newKiller(1, func() bool { return on }, func(function string) int {
		if function == "outbox" {
			return relayLanded
		}
		return landed
	})
	batch := func(bodies ...string) []byte {
		ev := events.SQSEvent{}
		for _, b := range bodies {
			ev.Records = append(ev.Records, events.SQSMessage{Body: b})
		}
		b, _ := json.Marshal(ev)
		return b
	}
	tick := batch(`{"v":1,"type":"email.partner-digest-fanout.v1","schedule":"partner-digest-weekly","scheduledTime":"2026-11-16T09:00:00Z"}`)
	digest := batch(`{"v":1,"messageId":"m-1","type":"email.partner-digest.v1"}`)
	if k.during("email", tick) != 0 {
		t.Fatal("a fan-out batch killed while its switch is off")
	}
	on = true
	if k.during("email", digest) != 0 {
		t.Fatal("a batch without a fan-out page killed")
	}
	for range 2 { // until a kill lands, every fan-out batch
		if d := k.during("email", tick); d < 100*time.Millisecond || d > time.Second {
			t.Fatalf("a fan-out batch after the switch, no kill landed yet: kill after %v; want 0.1 to 1 s", d)
		}
	}
	landed = 1
	for range 100 {
		if k.during("email", tick) != 0 {
			t.Fatal("the same page killed again after a kill landed")
		}
	}
	page := batch(`{"v":1,"messageId":"page-2","type":"email.partner-digest-fanout.v1"}`)
	chosen := 0
	for range 100 {
		if k.during("email", page) > 0 {
			chosen++
			break
		}
	}
	if landed = 2; chosen == 0 || k.during("email", batch(`{"messageId":"page-3","type":"email.partner-digest-fanout.v1"}`)) != 0 {
		t.Fatalf("a new page chosen %d times; then, with the kills used up, a page killed", chosen)
	}
	for range 20 {
		if d := k.during("outbox", nil); d < time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("a relay batch before a relay kill landed: kill after %v; want 1 to 10 ms", d)
		}
	}
	relayLanded = 1
	relay := 0
	for range 1000 {
		if d := k.during("outbox", nil); d > 0 {
			relay++
			if d < 5*time.Millisecond || d > 155*time.Millisecond {
				t.Fatalf("relay kill after %v", d)
			}
		}
	}
	if relay < 100 || relay > 200 {
		t.Fatalf("%d of 1000 relay batches killed; want about 15%%", relay)
	}
}

// checkChainsAndBatches: a continuation waits for an earlier HTTP job, has
// no delay and no copies, and half of them (about) wait for a parent that
// will not succeed; a batch's jobs are HTTP jobs without twins, numbered
// from 0, its first one carrying the batch's front fault, and a parent
// outside a batch comes before it.
func checkChainsAndBatches(t *testing.T, a []plannedJob) {
	t.Helper()
	failing, lead := 0, map[string]int{}
	for i, j := range a {
		if j.continuation() {
			p := a[j.parent()]
			if j.parent() >= i || p.Source != viaHTTP || j.Delay != 0 || j.Copies != 0 || j.AfterPolicy == "" {
				t.Fatalf("job %d: continuation of %d: %+v", i, j.parent(), j)
			}
			if p.Cancel || p.Poisoned {
				failing++
			}
			if j.batched() && p.BatchKey != j.BatchKey && j.parent() >= j.Lead-1 {
				t.Fatalf("job %d of batch %s waits for job %d, outside the batch and after its start", i, j.BatchKey, j.parent())
			}
		}
		if !j.batched() {
			continue
		}
		if j.Source != viaHTTP || j.Twins != 0 || (j.BatchAt > 0 && j.Front != frontNone) {
			t.Fatalf("job %d in batch %s: %+v", i, j.BatchKey, j)
		}
		if j.BatchAt == 0 {
			lead[j.BatchKey] = i
		} else if j.Lead != lead[j.BatchKey]+1 || !a[lead[j.BatchKey]].leads() {
			t.Fatalf("job %d: #%d of batch %s that starts at %d, not %d", i, j.BatchAt, j.BatchKey, j.Lead-1, lead[j.BatchKey])
		}
	}
	if failing == 0 {
		t.Error("no continuation waits for a parent that will not succeed")
	}
}
