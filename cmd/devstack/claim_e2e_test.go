//go:build integration

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// Step 9 of the runner through the running stack: every claim fails (the
// fault proxy answers 500 to each PutItem that would mark a marker DONE,
// every retry included). The welcome mail goes out once, the record is
// reported done (no retry, no dead letter), the job reads Succeeded with
// lastOutcome claim-failed rather than Processing or Failed, make run prints
// the outcome, and ClaimFailed is counted for its alarm.
func TestClaimFailedEndToEnd(t *testing.T) {
	e := startDevstack(t, "--faults", "dynamodb:PutItem~HandlerName~DONE:500")
	r := e.request("POST", "/v1/jobs/email.welcome.v1", "e2e-claim-fails", `{"args":{"userId":"u-demo-2"}}`)
	if r.status != http.StatusAccepted {
		t.Fatalf("POST = %d %v; want 202", r.status, r.body)
	}
	id, _ := r.body["jobId"].(string)
	eventually(t, time.Minute, "the job never read Succeeded with lastOutcome claim-failed", func() bool {
		state, outcome := e.job(id)
		return state == "Succeeded" && outcome == "claim-failed"
	})
	if !strings.Contains(e.out.String(), "claim-failed") {
		t.Fatalf("make run printed no claim-failed line:\n%s", e.out.String())
	}
	eventually(t, 30*time.Second, "ClaimFailed not counted in metrics.log", func() bool {
		b, _ := os.ReadFile(filepath.Join(e.state, devstack.MetricsLog))
		return strings.Contains(string(b), `"ClaimFailed":1`)
	})
	// Reported done: its message leaves the queue (a retried record would
	// stay in flight until its visibility timeout), so there is no second
	// mail and no dead letter.
	queues := sqs.NewFromConfig(moto.Config(e.endpoint, "us-east-1"))
	eventually(t, 30*time.Second, "the job's message is still in its queue", func() bool {
		out, err := queues.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(e.resources["DefaultQueue"]),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
		})
		return err == nil && out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
	})
	if n := e.mailsOfJob("demo2@example.com", id); n != 1 {
		t.Fatalf("%d mails for the job; want exactly 1", n)
	}
	code, out, _ := e.run("dlq", "list", "--json")
	var list struct{ Letters []json.RawMessage }
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Letters) != 0 {
		t.Fatalf("dlq list = %d %s; want no dead letters", code, out)
	}
}
