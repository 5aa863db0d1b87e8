//go:build integration

package enqueue_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// getSchedule reads the one-time schedule of jobID; ok is false when there
// is none.
func (s *stack) getSchedule(t *testing.T, jobID string) (*scheduler.GetScheduleOutput, bool) {
	t.Helper()
	out, err := s.scheduler.GetSchedule(context.Background(), &scheduler.GetScheduleInput{Name: aws.String(jobID), GroupName: aws.String(s.sched.Group())})
	var gone *schedtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &gone):
		return nil, false
	case err != nil:
		t.Fatalf("get schedule %s: %v", jobID, err)
	}
	return out, true
}

// expiresAt reads the TTL of the jobs table's item pk.
func (s *stack) expiresAt(t *testing.T, pk string) time.Time {
	t.Helper()
	out, err := s.db.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(s.jobsTable), Key: map[string]ddbtypes.AttributeValue{jobs.AttrPK: &ddbtypes.AttributeValueMemberS{Value: pk}},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("get %s: %v", pk, err)
	}
	n, _ := out.Item[jobs.AttrExpiresAt].(*ddbtypes.AttributeValueMemberN)
	if n == nil {
		t.Fatalf("%s has no expiresAt", pk)
	}
	sec, _ := strconv.ParseInt(n.Value, 10, 64)
	return time.Unix(sec, 0)
}

// A job two hours ahead waits in a one-time schedule whose input is its
// envelope, and reads Scheduled with its runAt; its record and dedup
// pointer outlive its runAt plus the queue's retention; a second request
// for its key dedups onto it; DELETE removes the schedule.
func TestIntegrationRunAtTwoHoursAhead(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	at := s.clock.Now().Add(2 * time.Hour).Truncate(time.Second)
	b := mustBody(t, call(t, s.h, post(welcome, "later-1", runAtBody(`"`+at.Format(time.RFC3339)+`"`), withHeader("X-Correlation-Id", "corr-later"))), http.StatusAccepted)
	if b.State != "Scheduled" {
		t.Fatalf("answer %+v; want Scheduled", b)
	}
	j, err := s.jobs.Get(ctx, b.JobID)
	if err != nil || j.State != jobs.StateScheduled || !j.RunAt.Equal(at) {
		t.Fatalf("job %+v, %v; want Scheduled at %s", j, err, at)
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 0 {
		t.Fatalf("a job two hours ahead was sent to SQS: %+v", envs)
	}
	sc, ok := s.getSchedule(t, b.JobID)
	if !ok {
		t.Fatal("no schedule for a job two hours ahead")
	}
	env, err := message.Decode([]byte(aws.ToString(sc.Target.Input)))
	if err != nil || env.MessageID != b.JobID || env.Type != welcome || env.CorrelationID != "corr-later" || aws.ToString(sc.Target.Input) != j.Message {
		t.Fatalf("schedule input %q (%+v, %v); want the job's envelope", aws.ToString(sc.Target.Input), env, err)
	}
	for what, got := range map[string]string{
		"expression": aws.ToString(sc.ScheduleExpression), "timezone": aws.ToString(sc.ScheduleExpressionTimezone),
		"target": aws.ToString(sc.Target.Arn), "role": aws.ToString(sc.Target.RoleArn), "dead-letter queue": aws.ToString(sc.Target.DeadLetterConfig.Arn),
		"after completion": string(sc.ActionAfterCompletion), "window": string(sc.FlexibleTimeWindow.Mode),
	} {
		want := map[string]string{
			"expression": "at(" + at.UTC().Format("2006-01-02T15:04:05") + ")", "timezone": "UTC",
			"target": s.queues.Queues[contract.QueueDefault].ARN, "role": testenv.SchedulerRoleARN, "dead-letter queue": s.dlq.ARN,
			"after completion": "DELETE", "window": "OFF",
		}[what]
		if got != want {
			t.Errorf("schedule %s %q, want %q", what, got, want)
		}
	}
	floor := at.Add(jobs.QueueRetention)
	for _, pk := range []string{jobs.JobPK(b.JobID), jobs.DedupPK(alice, welcome, "welcome:u-1")} {
		if exp := s.expiresAt(t, pk); exp.Before(floor) {
			t.Errorf("%s expires %s, before runAt + queue retention %s", pk, exp, floor)
		}
	}

	dup := mustBody(t, call(t, s.h, post(welcome, "later-2", welcomeU1)), http.StatusOK)
	if !dup.Deduplicated || dup.JobID != b.JobID || dup.State != "Scheduled" {
		t.Fatalf("second request for the key: %+v; want a dedup onto %s", dup, b.JobID)
	}
	list, err := s.scheduler.ListSchedules(ctx, &scheduler.ListSchedulesInput{GroupName: aws.String(s.sched.Group())})
	if err != nil || len(list.Schedules) != 1 {
		t.Fatalf("schedules %+v, %v; want the one", list, err)
	}

	resp := call(t, s.h, request(http.MethodDelete, "/v1/jobs/"+b.JobID, ""))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, resp.Body)
	}
	if _, ok := s.getSchedule(t, b.JobID); ok {
		t.Fatal("DELETE left the schedule")
	}
	if j, err := s.jobs.Get(ctx, b.JobID); err != nil || j.State != jobs.StateCancelled {
		t.Fatalf("after DELETE: %+v, %v", j, err)
	}
	// Again: the schedule is gone, which is fine.
	if resp := call(t, s.h, request(http.MethodDelete, "/v1/jobs/"+b.JobID, "")); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE again: %d %s", resp.StatusCode, resp.Body)
	}
}

// While the scheduler is down the request fails with a retryable 503 and
// the job stays Pending; the retry with the same key makes the schedule of
// the same job id, also when an earlier try's schedule exists already.
func TestIntegrationSchedulerDown(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	down := scheduler.NewFromConfig(moto.Config("http://127.0.0.1:1", testenv.Region))
	arns := map[message.Queue]string{}
	for q, v := range s.queues.Queues {
		arns[q] = v.ARN
	}
	s.h.Schedules = schedule.New(down, schedule.Config{Group: s.sched.Group(), RoleARN: testenv.SchedulerRoleARN, QueueARNs: arns, DLQARN: s.dlq.ARN})
	body := runAtBody(`"` + s.clock.Now().Add(3*24*time.Hour).Format(time.RFC3339) + `"`)
	id := message.DeriveMessageID(alice, "down-1")
	checkProblem(t, call(t, s.h, post(welcome, "down-1", body)), http.StatusServiceUnavailable)
	if j, err := s.jobs.Get(ctx, id); err != nil || j.State != jobs.StatePending {
		t.Fatalf("job after the scheduler failed: %+v, %v; want Pending", j, err)
	}
	if _, ok := s.getSchedule(t, id); ok {
		t.Fatal("a schedule exists after the scheduler failed")
	}
	// An earlier try did create it after all (its answer was lost): the
	// retry's create finds it, which is success.
	j, _ := s.jobs.Get(ctx, id)
	if err := s.sched.Create(ctx, schedule.Job{ID: id, Queue: contract.QueueDefault, Body: j.Message, RunAt: j.RunAt}); err != nil {
		t.Fatal(err)
	}
	s.h.Schedules = s.sched
	b := mustBody(t, call(t, s.h, post(welcome, "down-1", body)), http.StatusAccepted)
	if b.JobID != id || b.State != "Scheduled" {
		t.Fatalf("retry: %+v; want %s Scheduled", b, id)
	}
	if _, ok := s.getSchedule(t, id); !ok {
		t.Fatal("no schedule after the retry")
	}
}

// Running a scheduled job now deletes its schedule and sends its message
// once: a second run finds it already sent and sends nothing.
func TestIntegrationRunNow(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	b := mustBody(t, call(t, s.h, post(welcome, "now-1", runAtBody(`"`+s.clock.Now().Add(2*time.Hour).Format(time.RFC3339)+`"`))), http.StatusAccepted)
	send := func(ctx context.Context, j jobs.Job) error {
		return s.queue.Send(ctx, sqsqueue.Message{Queue: j.Queue, Body: j.Message, Type: j.Type, CorrelationID: j.CorrelationID})
	}
	j, outcome, err := s.jobs.RunNow(ctx, b.JobID, send)
	if err != nil || outcome != jobs.RunNowSent || j.State != jobs.StateEnqueued {
		t.Fatalf("run now: %+v, %s, %v; want sent and Enqueued", j, outcome, err)
	}
	if _, ok := s.getSchedule(t, b.JobID); ok {
		t.Fatal("run now left the schedule")
	}
	j, outcome, err = s.jobs.RunNow(ctx, b.JobID, send)
	if err != nil || outcome != jobs.RunNowAlreadySent {
		t.Fatalf("run now again: %+v, %s, %v; want already sent", j, outcome, err)
	}
	msgs, envs := s.receive(t, contract.QueueDefault)
	if len(envs) != 1 || envs[0].MessageID != b.JobID || *msgs[0].MessageAttributes[sqsqueue.AttrType].StringValue != welcome {
		t.Fatalf("messages %+v; want the job's one message", envs)
	}
	// A run that deleted the schedule and stopped before it sent: the next
	// run finds the record still waiting and sends.
	later := mustBody(t, call(t, s.h, post(welcome, "now-3", `{"args":{"userId":"u-3"},"runAt":"`+s.clock.Now().Add(5*time.Hour).Format(time.RFC3339)+`"}`)), http.StatusAccepted)
	if existed, err := s.sched.Delete(ctx, later.JobID); err != nil || !existed {
		t.Fatalf("delete the schedule: %v, %v", existed, err)
	}
	if _, outcome, err := s.jobs.RunNow(ctx, later.JobID, send); err != nil || outcome != jobs.RunNowResent {
		t.Fatalf("run now after a lost schedule: %s, %v; want resent", outcome, err)
	}
	if _, envs := s.receive(t, contract.QueueDefault); len(envs) != 1 || envs[0].MessageID != later.JobID {
		t.Fatalf("messages %+v; want the job's one message", envs)
	}
	// A job that already ran cannot run now.
	if _, err := s.markers.Tombstone(ctx, j.MarkerKey(), time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.jobs.RunNow(ctx, b.JobID, send); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("run now of a cancelled job: %v; want ErrConflict", err)
	}
}
