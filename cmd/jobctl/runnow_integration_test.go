//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// TestJobsRunNow: a Scheduled job in its one-time schedule runs at once,
// and only once (the second run says it was already sent and sends
// nothing); an operator's cancel deletes a schedule too; a job that
// cannot run is refused (4), one that does not exist is not found (3).
func TestJobsRunNow(t *testing.T) {
	w := newStage(t)
	ctx := context.Background()
	sc := scheduler.NewFromConfig(testenv.Moto(t).Config())
	group := schedule.GroupName(w.stage)
	if _, err := sc.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatal(err)
	}
	sched := schedule.New(sc, schedule.Config{Group: group, RoleARN: testenv.SchedulerRoleARN, QueueARNs: map[message.Queue]string{
		contract.QueueDefault: w.Queues[contract.QueueDefault].ARN,
	}})
	scheduled := func(key string) message.Envelope {
		now := time.Now().UTC()
		env := message.Envelope{V: message.Version, MessageID: message.NewMessageID(), Type: contract.Welcome.Name, Key: key,
			CorrelationID: "corr-" + key, Args: map[string]string{"userId": "u-1"}, EnqueuedAt: now}
		body, err := env.Encode()
		if err != nil {
			t.Fatal(err)
		}
		j := jobstest.Enqueue(t, w.Jobs, jobs.Job{ID: env.MessageID, Caller: "caller-a", Type: env.Type, Key: key,
			Queue: string(contract.QueueDefault), CorrelationID: env.CorrelationID, Message: string(body), CreatedAt: now, RunAt: now.Add(2 * time.Hour)})
		if err := sched.Create(ctx, schedule.Job{ID: j.ID, Queue: contract.QueueDefault, Body: j.Message, RunAt: j.RunAt}); err != nil {
			t.Fatal(err)
		}
		return env
	}
	hasSchedule := func(id string) bool {
		_, err := sc.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(id), GroupName: aws.String(group)})
		var gone *schedtypes.ResourceNotFoundException
		if err != nil && !errors.As(err, &gone) {
			t.Fatal(err)
		}
		return err == nil
	}

	later := scheduled("welcome:u-later")
	if s := w.State(t, later.MessageID); s != jobs.StateScheduled {
		t.Fatalf("job reads %s; want Scheduled", s)
	}
	code, out, stderr := w.cli("jobs", "run-now", later.MessageID)
	if code != exitOK || !strings.Contains(out, "runs now") {
		t.Fatalf("jobs run-now: exit %d %s %s", code, out, stderr)
	}
	if hasSchedule(later.MessageID) {
		t.Fatal("run-now left the schedule")
	}
	if s := w.State(t, later.MessageID); s != jobs.StateEnqueued {
		t.Fatalf("job reads %s after run-now; want Enqueued", s)
	}
	code, out, stderr = w.cli("jobs", "run-now", later.MessageID, "--json")
	var got map[string]any
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got["outcome"] != jobs.RunNowAlreadySent.String() {
		t.Fatalf("jobs run-now again: exit %d %s %s; want already sent", code, out, stderr)
	}
	if ids := w.queuedIDs(t); len(ids) != 1 || ids[0] != later.MessageID {
		t.Fatalf("queued %v; want the job once", ids)
	}

	cancelled := scheduled("welcome:u-cancel-later")
	if code, out, stderr := w.cli("jobs", "cancel", cancelled.MessageID); code != exitOK {
		t.Fatalf("jobs cancel: exit %d %s %s", code, out, stderr)
	}
	if hasSchedule(cancelled.MessageID) {
		t.Fatal("cancel left the schedule")
	}
	if code, _, stderr := w.cli("jobs", "run-now", cancelled.MessageID); code != exitRefused || !strings.Contains(stderr, "Cancelled") {
		t.Fatalf("run-now of a cancelled job: exit %d %s; want refused, naming its state", code, stderr)
	}
	if code, _, _ := w.cli("jobs", "run-now", message.NewMessageID()); code != exitNotFound {
		t.Fatalf("run-now of a missing job: exit %d; want %d", code, exitNotFound)
	}
	if ids := w.queuedIDs(t); len(ids) != 0 {
		t.Fatalf("queued %v; want nothing more", ids)
	}

	// A job due within SQS's delay never had a schedule: run-now says so,
	// not that its schedule is gone.
	now := time.Now().UTC()
	soon := message.Envelope{V: message.Version, MessageID: message.NewMessageID(), Type: contract.Welcome.Name, Key: "welcome:u-soon",
		CorrelationID: "corr-soon", Args: map[string]string{"userId": "u-1"}, EnqueuedAt: now}
	body, err := soon.Encode()
	if err != nil {
		t.Fatal(err)
	}
	jobstest.Enqueue(t, w.Jobs, jobs.Job{ID: soon.MessageID, Caller: "caller-a", Type: soon.Type, Key: soon.Key,
		Queue: string(contract.QueueDefault), CorrelationID: soon.CorrelationID, Message: string(body), CreatedAt: now, RunAt: now.Add(5 * time.Minute)})
	code, out, stderr = w.cli("jobs", "run-now", soon.MessageID)
	if code != exitOK || !strings.Contains(out, "never had a schedule") || strings.Contains(out, "no schedule left") {
		t.Fatalf("run-now of a job delayed in its queue: exit %d %q %s; want it to say it never had a schedule", code, out, stderr)
	}
}
