package deadletter_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/schedule"
)

// Cut keeps at most max bytes and never cuts a character in half.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		name, s string
		max     int
		want    string
		cut     bool
	}{
		{"short", "abc", 5, "abc", false},
		{"exact", "abcde", 5, "abcde", false},
		{"ascii", "abcdef", 4, "abcd", true},
		{"before a 2-byte character", "abé", 3, "ab", true},
		{"after a 2-byte character", "abéc", 4, "abé", true},
		{"inside a 3-byte character", "a€b", 3, "a", true},
		{"inside a 4-byte character", "a😀b", 4, "a", true},
		{"right after a 4-byte character", "a😀b", 5, "a😀", true},
		{"nothing", "abc", 0, "", true},
		{"not UTF-8 is cut where it is", "a\x80\x80\x80\x80\x80", 4, "a\x80\x80\x80", true},
	} {
		got, cut := deadletter.Cut(tc.s, tc.max)
		if got != tc.want || cut != tc.cut {
			t.Errorf("%s: Cut(%q, %d) = %q, %t; want %q, %t", tc.name, tc.s, tc.max, got, cut, tc.want, tc.cut)
		}
	}
}

// Fit bounds every text of a letter; a body over MaxBody keeps its start,
// cut between two characters, and the letter says it is shortened. A
// letter within the bounds, its body whole, is left exactly as it is, and
// Fit of a fitted letter changes nothing.
func TestFit(t *testing.T) {
	whole := deadletter.Record{ID: "id", JobID: "job", Type: "t", Body: strings.Repeat("€", deadletter.MaxBody/3), Reason: "r",
		CorrelationID: "c", SourceQueue: "q", Schedule: "s", TraceHeader: "Root=1-x"}
	if got := deadletter.Fit(whole); !reflect.DeepEqual(got, whole) {
		t.Fatalf("Fit changed a letter within its bounds: %+v", got)
	}
	long := strings.Repeat("é", deadletter.MaxField)
	big := deadletter.Record{ID: "id", JobID: long, Type: long, Body: strings.Repeat("€", deadletter.MaxBody), Reason: strings.Repeat("ü", deadletter.MaxReason),
		CorrelationID: long, SourceQueue: long, Schedule: long, TraceHeader: long}
	got := deadletter.Fit(big)
	switch {
	case !got.BodyTruncated || got.BodyBytes != len(big.Body) || len(got.Body) > deadletter.MaxBody || len(got.Body) < deadletter.MaxBody-2:
		t.Fatalf("body %d bytes, truncated %t, whole %d; want the first %d of %d", len(got.Body), got.BodyTruncated, got.BodyBytes, deadletter.MaxBody, len(big.Body))
	case !utf8.ValidString(got.Body) || !strings.HasPrefix(big.Body, got.Body):
		t.Fatal("the body is not the start of the whole one, cut between characters")
	case len(got.Reason) > deadletter.MaxReason || !utf8.ValidString(got.Reason) || !strings.HasSuffix(got.Reason, deadletter.TruncatedNote):
		t.Fatalf("reason of %d bytes; want at most %d ending with the note", len(got.Reason), deadletter.MaxReason)
	case got.ID != "id":
		t.Fatalf("id %q; a key is never cut", got.ID)
	}
	for name, f := range map[string]string{"jobId": got.JobID, "type": got.Type, "correlationId": got.CorrelationID, "sourceQueue": got.SourceQueue,
		"schedule": got.Schedule, "traceHeader": got.TraceHeader} {
		if len(f) > deadletter.MaxField || !utf8.ValidString(f) || !strings.HasPrefix(long, f) {
			t.Errorf("%s of %d bytes; want the start of it, at most %d", name, len(f), deadletter.MaxField)
		}
	}
	if again := deadletter.Fit(got); !reflect.DeepEqual(again, got) {
		t.Fatal("Fit of a fitted letter changed it")
	}
	marked := deadletter.Fit(deadletter.Record{Body: "{", BodyTruncated: true, Reason: "r"})
	if marked.Reason != "r"+deadletter.TruncatedNote || marked.BodyBytes != 0 || marked.Body != "{" {
		t.Fatalf("a letter marked shortened by its writer: %+v", marked)
	}
}

// A letter whose body is only part of the message's is never sent back:
// the redrive refuses it, saying why, and sends nothing; the same letter
// with its body whole goes back.
func TestRedriveRefusesAShortenedLetter(t *testing.T) {
	env := envelope(contract.Welcome.Name)
	body, _ := env.Encode()
	for _, tc := range []struct {
		name      string
		truncated bool
	}{{"whole", false}, {"shortened", true}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := deadletter.Record{ID: env.MessageID, JobID: env.MessageID, Type: env.Type, Body: string(body), Status: deadletter.StatusDead,
				BodyTruncated: tc.truncated, BodyBytes: 300 << 10}
			out := &sends{}
			r := deadletter.NewRedriver(&fakeLetters{trace: &enginetest.Trace{}, rec: rec}, out, contract.Registry())
			res, err := r.Redrive(context.Background(), rec.ID)
			if !tc.truncated {
				if err != nil || res.Outcome != deadletter.Redrove || len(out.msgs) != 1 || out.msgs[0].Body != string(body) {
					t.Fatalf("redrive %+v, %v, sent %d; want the whole body sent", res, err, len(out.msgs))
				}
				return
			}
			if !errors.Is(err, deadletter.ErrNotRedrivable) || !strings.Contains(err.Error(), "shortened") || !strings.Contains(err.Error(), "307200") || len(out.msgs) != 0 {
				t.Fatalf("redrive %v, sent %d; want ErrNotRedrivable saying it was shortened, nothing sent", err, len(out.msgs))
			}
			if _, err := r.RedriveWith(context.Background(), rec.ID, deadletter.Options{DryRun: true}); !errors.Is(err, deadletter.ErrNotRedrivable) {
				t.Fatalf("dry run %v; want it refused too", err)
			}
		})
	}
}

// A message EventBridge Scheduler cut to fit its dead-letter queue
// (IS_PAYLOAD_TRUNCATED true) is a letter marked shortened, whose reason
// says it cannot be redriven as it is; one it did not cut is whole.
func TestSchedulerLetterItCut(t *testing.T) {
	env := envelope(contract.Welcome.Name)
	body, _ := env.Encode()
	for _, tc := range []struct {
		flag string
		body string
		cut  bool
	}{{"false", string(body), false}, {"true", string(body[:40]), true}, {"TRUE", string(body[:40]), true}} {
		attrs := schedulerAttrs("arn:aws:scheduler:us-east-1:123456789012:schedule/runstwice-test-jobs/"+env.MessageID, defaultQueueARN,
			"AWS.Scheduler.InternalServerError", "3", "MaximumRetryAttempts")
		attrs[schedule.AttrPayloadTruncated] = tc.flag
		h := newHarness(t, nil)
		msg := schedulerLetter(tc.body, attrs)
		if f := h.run(t, msg); len(f) != 0 {
			t.Fatalf("failures %v", f)
		}
		id := env.MessageID
		if tc.cut {
			id = msg.MessageId
		}
		rec, ok := h.records.recs[id]
		if !ok || rec.BodyTruncated != tc.cut || strings.HasSuffix(rec.Reason, deadletter.TruncatedNote) != tc.cut || rec.Body != tc.body {
			t.Fatalf("IS_PAYLOAD_TRUNCATED %s: letter %+v (%t); want shortened %t", tc.flag, rec, ok, tc.cut)
		}
	}
}
