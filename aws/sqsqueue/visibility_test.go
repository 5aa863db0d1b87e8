package sqsqueue

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/engine"
)

// batchAPI answers each ChangeMessageVisibilityBatch call with answer
// (by receipt handle: "" success, else the failure's code and whether it is
// the sender's fault), and records the calls.
type batchAPI struct {
	calls  [][]string // receipt handles per call
	answer func(call int, receipt string) (code string, senderFault bool)
	err    error
}

func (b *batchAPI) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	var handles []string
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		h := aws.ToString(e.ReceiptHandle)
		handles = append(handles, h)
		if code, fault := b.answer(len(b.calls), h); code != "" {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String(code), SenderFault: fault,
				Message: aws.String("provider text about " + h)})
		} else {
			out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		}
	}
	b.calls = append(b.calls, handles)
	return out, b.err
}

const workARN = "arn:aws:sqs:us-east-1:123456789012:runstwice-test-default"

func change(id string) engine.VisibilityChange {
	return engine.VisibilityChange{Message: events.SQSMessage{MessageId: id, ReceiptHandle: "rh-" + id, EventSourceARN: workARN}, Timeout: time.Minute}
}

// One refused entry of a batch does not drop the others: the error names
// only the records whose change failed (by message id, with SQS's code and
// never its message), and an entry SQS failed on its own side is tried once
// more, alone with the other such entries.
func TestOneRefusedEntryDoesNotDropTheOthers(t *testing.T) {
	api := &batchAPI{answer: func(call int, h string) (string, bool) {
		switch {
		case h == "rh-b":
			return "InvalidParameterValue", true // 12 h from the receipt: refused every time
		case h == "rh-c" && call == 0:
			return "InternalError", false // SQS's side: the retry makes it
		case h == "rh-d":
			return "InternalError", false // fails again
		}
		return "", false
	}}
	v := NewVisibility(api, map[string]string{"default": "http://sqs.local/123456789012/runstwice-test-default"})
	err := v.ChangeVisibility(context.Background(), []engine.VisibilityChange{change("a"), change("b"), change("c"), change("d")})
	var ve *engine.VisibilityError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v; want an *engine.VisibilityError", err)
	}
	var ids []string
	for id := range ve.Failed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"b", "d"}) {
		t.Fatalf("failed %v; want b (refused) and d (failed twice), not a or c", ids)
	}
	if !strings.Contains(err.Error(), "InvalidParameterValue") || strings.Contains(err.Error(), "provider text") {
		t.Errorf("error %q; want SQS's code and not its message", err)
	}
	if len(api.calls) != 2 || !slices.Equal(api.calls[1], []string{"rh-c", "rh-d"}) {
		t.Fatalf("calls %v; want the batch, then c and d again (not the refused b)", api.calls)
	}
}

// A call that fails as a whole fails each of its records, by id.
func TestFailedCallNamesEveryRecord(t *testing.T) {
	api := &batchAPI{answer: func(int, string) (string, bool) { return "", false }, err: errors.New("AccessDenied")}
	v := NewVisibility(api, map[string]string{"default": "http://sqs.local/123456789012/runstwice-test-default"})
	err := v.ChangeVisibility(context.Background(), []engine.VisibilityChange{change("a"), change("b"),
		{Message: events.SQSMessage{MessageId: "x", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:elsewhere"}}})
	var ve *engine.VisibilityError
	if !errors.As(err, &ve) || len(ve.Failed) != 3 || !strings.Contains(ve.Failed["x"].Error(), "elsewhere") {
		t.Fatalf("error %v; want a, b (the call failed) and x (no URL) named", err)
	}
	if err := v.ChangeVisibility(context.Background(), nil); err != nil {
		t.Fatalf("no changes: %v", err)
	}
}
