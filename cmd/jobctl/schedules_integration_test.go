//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// `schedules list` shows a stage's recurring schedule with its next fire,
// tick type and that type's switch; `schedules trigger --at` sends its tick
// for that time to its queue, and the same time twice names the same job.
func TestSchedulesListAndTrigger(t *testing.T) {
	w := newStage(t)
	ctx := context.Background()
	sc := scheduler.NewFromConfig(testenv.Moto(t).Config())
	group := schedule.RecurringGroup(w.stage)
	if _, err := sc.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
	const input = `{"v":1,"type":"email.partner-digest-fanout.v1","schedule":"partner-digest-weekly","scheduledTime":"<aws.scheduler.scheduled-time>","correlationId":"<aws.scheduler.execution-id>"}`
	_, err := sc.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(digest.ScheduleName), GroupName: aws.String(group), ScheduleExpression: aws.String("cron(0 9 ? * MON *)"),
		ScheduleExpressionTimezone: aws.String("Europe/Berlin"), FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target: &schedtypes.Target{Arn: aws.String(w.Queues[contract.QueueBulk].ARN), RoleArn: aws.String("arn:aws:iam::123456789012:role/s"), Input: aws.String(input)},
	})
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := w.cli("--json", "schedules", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got struct{ Schedules []scheduleRow }
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Schedules) != 1 {
		t.Fatalf("%s %v", out, err)
	}
	r := got.Schedules[0]
	if r.Name != digest.ScheduleName || r.Timezone != "Europe/Berlin" || r.State != "ENABLED" || r.Type != contract.Fanout.Name ||
		!r.Tick || r.Switch != "off" || r.NextFire == nil || r.NextFire.In(mustBerlin(t)).Format("Mon 15:04") != "Mon 09:00" {
		t.Fatalf("row %+v", r)
	}

	var ids []string
	for range 2 {
		code, out, errOut = w.cli("--json", "schedules", "trigger", digest.ScheduleName, "--at", "2026-12-07T09:00:00Z")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var sent struct{ JobID, ScheduledTime string }
		if err := json.Unmarshal([]byte(out), &sent); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sent.JobID)
	}
	if ids[0] != ids[1] || ids[0] != message.DeriveMessageID("schedule:"+digest.ScheduleName, "2026-12-07T09:00:00Z") {
		t.Fatalf("job ids %v; the same time twice is one job", ids)
	}
	msgs := testenv.Receive(t, w.SQS, w.Queues[contract.QueueBulk].URL, 1)
	if len(msgs) != 2 {
		t.Fatalf("%d ticks in the bulk queue, want 2 (the worker makes them one job)", len(msgs))
	}
	for _, m := range msgs {
		tick, err := message.DecodeTick([]byte(aws.ToString(m.Body)))
		if err != nil || tick.ScheduledTime != "2026-12-07T09:00:00Z" || !strings.HasPrefix(tick.CorrelationID, "jobctl-") {
			t.Fatalf("tick %+v %v", tick, err)
		}
	}
	// Once the worker has made the tick's job, the same time again says what
	// that job is and sends nothing; --again ticks the next free second, a
	// new job of the same week.
	tickJob := ids[0]
	now := time.Now().UTC()
	jobstest.Enqueue(t, w.Jobs, jobs.Job{ID: tickJob, Caller: "schedule:" + digest.ScheduleName, Type: contract.Fanout.Name,
		Key: "partner-digest-fanout:2026-W50", Queue: string(contract.QueueBulk), CorrelationID: "c-tick", Message: `{"v":1}`, CreatedAt: now, RunAt: now})
	code, out, errOut = w.cli("schedules", "trigger", digest.ScheduleName, "--at", "2026-12-07T09:00:00Z")
	if code != exitRefused || !strings.Contains(errOut, "is already job "+tickJob) || !strings.Contains(errOut, "--again") {
		t.Fatalf("a time already ticked: exit %d %s %s; want refused, naming its job and --again", code, out, errOut)
	}
	code, out, errOut = w.cli("--json", "schedules", "trigger", digest.ScheduleName, "--at", "2026-12-07T09:00:00Z", "--again")
	var again struct{ JobID, ScheduledTime string }
	if code != exitOK || json.Unmarshal([]byte(out), &again) != nil ||
		again.ScheduledTime != "2026-12-07T09:00:01Z" || again.JobID == tickJob || !strings.Contains(errOut, "ticking 2026-12-07T09:00:01Z instead") {
		t.Fatalf("--again: exit %d %s %s; want the tick of 09:00:01, a new job", code, out, errOut)
	}
	if code, _, _ := w.cli("schedules", "trigger", "no-such-schedule"); code != exitNotFound {
		t.Fatalf("an unknown schedule: exit %d, want %d", code, exitNotFound)
	}
}

func mustBerlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
