//go:build integration

package deadletter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/schedule"
)

// TestIntegrationEveryLetterFitsItsTable: the dlq function records every
// letter, whatever its size, in one DynamoDB item. A message of 1 MiB (an
// SQS message may be that large) of multi-byte text, with a 100 KB
// reason, is a stored letter that keeps the start of its body, cut between
// two characters, and says it was shortened; a scheduler's letter whose
// body the scheduler cut (IS_PAYLOAD_TRUNCATED) says so too; a redrive
// refuses both, saying why. A letter whose body is whole goes back as it
// is.
func TestIntegrationEveryLetterFitsItsTable(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	body := strings.Repeat("é<>&€", 1<<20/9)
	huge := sent(body, "permanent: "+strings.Repeat("ü", 50<<10))
	cutEnv := envelope(contract.Welcome.Name)
	cutBody, _ := cutEnv.Encode()
	cutByScheduler := schedulerLetter(string(cutBody[:len(cutBody)/2]), schedulerAttrs(
		"arn:aws:scheduler:us-east-1:123456789012:schedule/runstwice-test-jobs/"+cutEnv.MessageID, defaultQueueARN, "AWS.Scheduler.InternalServerError", "3", "MaximumRetryAttempts"))
	cutByScheduler.MessageAttributes[schedule.AttrPayloadTruncated] = events.SQSMessageAttribute{StringValue: aws.String("true"), DataType: "String"}
	whole := envelope(contract.Welcome.Name)
	wholeMsg := moved(t, whole, 6)

	resp, err := w.consumer.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{huge, cutByScheduler, wholeMsg}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, %v; every letter fits (logs: %.2000s)", resp.BatchItemFailures, err, w.dlqLogs)
	}

	rec, err := w.store.Get(ctx, huge.MessageId)
	switch {
	case err != nil:
		t.Fatal(err)
	case !rec.BodyTruncated || rec.BodyBytes != len(body) || len(rec.Body) > deadletter.MaxBody || len(rec.Body) < deadletter.MaxBody-utf8.UTFMax:
		t.Fatalf("letter body %d bytes (truncated %t, whole %d); want the first %d bytes of %d", len(rec.Body), rec.BodyTruncated, rec.BodyBytes, deadletter.MaxBody, len(body))
	case !utf8.ValidString(rec.Body) || !strings.HasPrefix(body, rec.Body):
		t.Fatal("the stored body is not the start of the message's body, cut between two characters")
	case len(rec.Reason) > deadletter.MaxReason || !utf8.ValidString(rec.Reason) || !strings.HasPrefix(rec.Reason, "permanent: üü") ||
		!strings.Contains(rec.Reason, "cannot be redriven as it is"):
		t.Fatalf("reason of %d bytes ending %q; want at most %d bytes saying the body was shortened", len(rec.Reason), rec.Reason[max(0, len(rec.Reason)-120):], deadletter.MaxReason)
	}
	if _, err := w.redriver.Redrive(ctx, huge.MessageId); !errors.Is(err, deadletter.ErrNotRedrivable) || !strings.Contains(err.Error(), "shortened") {
		t.Fatalf("redrive of a shortened letter: %v; want ErrNotRedrivable saying it was shortened", err)
	}

	rec, err = w.store.Get(ctx, cutByScheduler.MessageId)
	if err != nil || !rec.BodyTruncated || rec.Body != string(cutBody[:len(cutBody)/2]) {
		t.Fatalf("the scheduler's cut letter %+v (%v); want its body as it came, marked shortened", rec, err)
	}
	if _, err := w.redriver.Redrive(ctx, cutByScheduler.MessageId); !errors.Is(err, deadletter.ErrNotRedrivable) || !strings.Contains(err.Error(), "shortened") {
		t.Fatalf("redrive of the scheduler's cut letter: %v; want ErrNotRedrivable saying it was shortened", err)
	}

	rec, err = w.store.Get(ctx, whole.MessageID)
	if err != nil || rec.BodyTruncated || rec.BodyBytes != 0 || rec.Body != wholeMsg.Body {
		t.Fatalf("the whole letter %+v (%v); want its body whole", rec, err)
	}
	if res, err := w.redriver.Redrive(ctx, whole.MessageID); err != nil || res.Outcome != deadletter.Redrove {
		t.Fatalf("redrive of a whole letter: %+v, %v", res, err)
	}
	msgs := testenv.Receive(t, w.SQS, w.Queues[contract.Welcome.Queue].URL, 0)
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != wholeMsg.Body {
		t.Fatalf("redriven %d messages; want the whole body once", len(msgs))
	}
}
