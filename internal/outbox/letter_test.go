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

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/obs/obstest"
	"github.com/runstwice/runstwice/internal/outbox"
)

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
			dl := h.letters.recs[outbox.LetterID(engine.DeriveMessageID("outbox:signup", "k-1"))]
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
