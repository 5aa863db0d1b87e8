package outbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/outbox"
	"github.com/runstwice/runstwice/message"
)

// An item that breaks a rule is filed, and traced, under the job of the
// producer its pk proves, never under the producer it names: billing's item
// claiming to be signup's is billing's letter, and signup's own letter for
// the same key is left as it was. An item whose pk proves no producer is
// filed under its stream record, naming no job.
func TestLetterIsFiledUnderTheProducerThePKProves(t *testing.T) {
	signupJob, billingJob := message.DeriveMessageID("outbox:signup", "k-1"), message.DeriveMessageID("outbox:billing", "k-1")
	for _, tc := range []struct {
		name, pk, producer, key string
		wantID, wantJob         string
	}{
		{"another producer's name", "billing#k-1", "signup", "k-1", outbox.LetterID(billingJob), billingJob},
		{"another key", "billing#k-1", "billing", "k-2", outbox.LetterID(billingJob), billingJob},
		{"a pk of no producer", "Billing#k-1", "signup", "k-1", "outbox:", ""},
		{"a pk without #", "billing", "signup", "k-1", "outbox:", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			own := deadletter.Record{ID: outbox.LetterID(signupJob), JobID: signupJob, Type: "email.welcome.v1", Body: `{"pk":"signup#k-1"}`,
				Reason: "signup's own", SourceQueue: outbox.SourceOutbox, Status: deadletter.StatusDead}
			h.letters.recs[own.ID] = own
			tracer := tracetest.NewSpanRecorder()
			h.relay.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracer))
			img := image(tc.producer, tc.key, "u-1")
			img["pk"] = s(tc.pk)
			rec := record("INSERT", img)
			if failed := h.handle(t, rec); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			if len(h.api.asked) != 0 {
				t.Fatal("an item whose pk is not its producer's reached the API")
			}
			if got := h.letters.recs[own.ID]; !reflect.DeepEqual(got, own) {
				t.Fatalf("signup's letter became %+v; want it untouched", got)
			}
			id := tc.wantID
			if id == "outbox:" {
				id += rec.EventID
			}
			dl, ok := h.letters.recs[id]
			if !ok || dl.JobID != tc.wantJob || !strings.Contains(dl.Reason, "pk must be") || len(h.letters.recs) != 2 {
				t.Fatalf("letters %v; want one under %s naming job %q", keys(h.letters.recs), id, tc.wantJob)
			}
			if logs := h.logs.String(); tc.wantJob != "" && !strings.Contains(logs, `"jobId":"`+tc.wantJob+`","producer":"billing"`) {
				t.Fatalf("the log lines do not name billing's job: %s", logs)
			}
			if a := attrs(tracer.Ended()[0]); a[engine.AttrJobID] != tc.wantJob && (tc.wantJob != "" || a[engine.AttrJobID] != "") {
				t.Fatalf("the span names job %q; want %q", a[engine.AttrJobID], tc.wantJob)
			}
		})
	}
}

func keys(m map[string]deadletter.Record) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The letter of an item too large to keep whole holds a summary that
// fits: its key, its fields' names and sizes and the start of its JSON,
// marked shortened; an item that fits is kept whole, its <, > and &
// unescaped.
func TestLetterOfALargeItemIsASummary(t *testing.T) {
	for _, tc := range []struct {
		name  string
		arg   string
		whole bool
	}{
		{"fits", strings.Repeat("<>&", 20<<10), true},
		{"fits only unescaped", strings.Repeat("<>&", 70<<10), true},
		{"too large", strings.Repeat("<>&", 130<<10), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness()
			h.api.answerOf = func(enqueue.Request) enqueue.Answer {
				return enqueue.Answer{Status: http.StatusRequestEntityTooLarge, Problem: enqueue.ProblemTooLarge, Detail: "the request is too large"}
			}
			img := image("signup", "k-1", "u-1")
			img["args"] = events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"userId": s(tc.arg)})
			if failed := h.handle(t, record("INSERT", img)); len(failed) != 0 {
				t.Fatalf("failures %v", failed)
			}
			dl := h.letters.recs[outbox.LetterID(message.DeriveMessageID("outbox:signup", "k-1"))]
			if len(dl.Body) > deadletter.MaxBody || dl.BodyTruncated == tc.whole || reflect.DeepEqual(deadletter.Fit(dl), dl) == false {
				t.Fatalf("letter of %d bytes, truncated %t; want at most %d, truncated %t, fitted", len(dl.Body), dl.BodyTruncated, deadletter.MaxBody, !tc.whole)
			}
			var body map[string]any
			if err := json.Unmarshal([]byte(dl.Body), &body); err != nil {
				t.Fatalf("the letter's body is not JSON: %v", err)
			}
			if tc.whole {
				if args, _ := body["args"].(map[string]any); args["userId"] != tc.arg || dl.BodyBytes != 0 {
					t.Fatalf("the letter does not keep the item whole")
				}
				return
			}
			fields, _ := body["fields"].(map[string]any)
			if body["pk"] != "signup#k-1" || fields["args"] != float64(3+len("userId")+len(tc.arg)+1) || body["excerpt"] == "" ||
				dl.BodyBytes < len(tc.arg) || !strings.HasSuffix(dl.Reason, deadletter.TruncatedNote) {
				t.Fatalf("summary %.300s, whole %d, reason %q", dl.Body, dl.BodyBytes, dl.Reason)
			}
		})
	}
}

// A letter the table refuses (not for its size: it always fits) is no
// reason to stop the shard: no retry would store it. It is counted and
// alerted with the item's key, and the items after it are relayed; a
// table that does not answer is still a retry.
func TestRefusedLetterDoesNotBlockTheShard(t *testing.T) {
	h := newHarness()
	h.letters.err = fmt.Errorf("%w: save outbox:x: ValidationException", deadletter.ErrRefused)
	bad := image("signup", "k-bad", "u-1")
	bad["email"] = s("x@y.z") // an unknown attribute
	recs := []events.DynamoDBEventRecord{record("INSERT", bad), record("INSERT", image("signup", "k-2", "u-2"))}
	if failed := h.handle(t, recs...); len(failed) != 0 {
		t.Fatalf("failures %v; a refused letter never blocks the shard", failed)
	}
	if len(h.api.asked) != 1 || h.api.asked[0].IdempotencyKey != "k-2" {
		t.Fatalf("asked %+v; want the good item after it relayed", h.api.asked)
	}
	if n := obstest.Count(h.metrics.String(), deadletter.UnknownType, engine.DeadLetters); n != 1 {
		t.Fatalf("DeadLetters counted %d times; want 1", n)
	}
	if logs := h.logs.String(); !strings.Contains(logs, `"alert":true`) || !strings.Contains(logs, `"pk":"signup#k-bad"`) || !strings.Contains(logs, "not stored") {
		t.Fatalf("no alert naming the item: %s", logs)
	}
	h.letters.err = errors.New("DynamoDB throttled")
	if failed := h.handle(t, record("INSERT", bad)); len(failed) != 1 {
		t.Fatalf("failures %v; a letter not written for a transient error is retried", failed)
	}
}
