package enqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// The account's schedule quota reached is no "retry with the same key": a
// 503 of its own type, without Retry-After, saying what to do; an alert in
// the log and a ScheduleQuotaExceeded metric; and no job that claims to be
// scheduled (it stays Pending, no schedule). Once the quota allows it, the
// same request makes the schedule of the same job.
func TestScheduleQuotaIsNotARetryLoop(t *testing.T) {
	w := newWorld()
	var logs, metrics bytes.Buffer
	h := newHandler(w)
	h.Logger = obs.NewLogger(&logs, "info")
	h.Metrics = engine.NewMetrics(&metrics, obs.Namespace)
	h.Metrics.Stage = "test"
	w.scheduleErr = fmt.Errorf("schedule: create j: %w: %w", schedule.ErrQuotaExceeded,
		&types.ServiceQuotaExceededException{Message: aws.String("quota of schedules reached for account 111122223333")})
	body := runAtBody(`"` + w.Now().Add(3*24*time.Hour).Format(time.RFC3339) + `"`)
	id := message.DeriveMessageID(alice, "k")

	resp := call(t, h, post(welcome, "k", body))
	p := checkProblem(t, resp, http.StatusServiceUnavailable)
	if p.Type != enqueue.ProblemTypePrefix+enqueue.ProblemScheduleQuota {
		t.Fatalf("problem type %s; want %s", p.Type, enqueue.ProblemScheduleQuota)
	}
	if ra, ok := resp.Headers["Retry-After"]; ok {
		t.Errorf("Retry-After %q: a quota reached must not invite a retry", ra)
	}
	for _, want := range []string{"quota", "do not retry automatically", "within 15 minutes"} {
		if !strings.Contains(p.Detail, want) {
			t.Errorf("detail %q lacks %q", p.Detail, want)
		}
	}
	if strings.Contains(p.Detail, "111122223333") || strings.Contains(logs.String(), "111122223333") {
		t.Errorf("the provider's message left the process: %s / %s", p.Detail, logs.String())
	}
	if j, err := w.Get(context.Background(), id); err != nil || j.State != jobs.StatePending {
		t.Fatalf("job %+v, %v; want Pending (nothing claims it is scheduled)", j, err)
	}
	if _, ok := w.schedule(id); ok || len(w.messages()) != 0 {
		t.Fatal("a refused schedule left a schedule or a message")
	}
	if !strings.Contains(logs.String(), `"alert":true`) || !strings.Contains(logs.String(), "ServiceQuotaExceededException") {
		t.Errorf("no alert with the error code in the log: %s", logs.String())
	}
	if !strings.Contains(metrics.String(), `"ScheduleQuotaExceeded":1`) || !strings.Contains(metrics.String(), `"type":"`+welcome+`"`) {
		t.Errorf("ScheduleQuotaExceeded not counted for the type: %s", metrics.String())
	}

	w.scheduleErr = nil
	if b := mustBody(t, call(t, h, post(welcome, "k", body)), http.StatusAccepted); b.JobID != id || b.State != "Scheduled" {
		t.Fatalf("after the quota was raised: %+v; want job %s Scheduled", b, id)
	}
}

// Any other failure of the scheduler stays a retryable 503 with
// Retry-After, as before.
func TestOtherSchedulerFailuresStayRetryable(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	h.Logger = obs.NewLogger(io.Discard, "error")
	w.scheduleErr = &types.ThrottlingException{Message: aws.String("slow down")}
	resp := call(t, h, post(welcome, "k", runAtBody(`"`+w.Now().Add(time.Hour).Format(time.RFC3339)+`"`)))
	if p := checkProblem(t, resp, http.StatusServiceUnavailable); p.Type != enqueue.ProblemTypePrefix+enqueue.ProblemUnavailable || resp.Headers["Retry-After"] == "" {
		t.Fatalf("problem %+v, headers %v; want a retryable service-unavailable", p, resp.Headers)
	}
}
