//go:build integration

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// TestSchedulesOnTheLocalStack: the running stack fires a one-time at()
// schedule created directly with the SDK 70 s ahead (the API itself would
// use an SQS delay that close): its mail arrives at its time, and the
// schedule is deleted. Meanwhile the weekly digest's recurring schedule is
// provisioned and listed, and its tick, triggered by hand with both
// switches on, mails the weekly demo user once; the same time again mails
// no one.
func TestSchedulesOnTheLocalStack(t *testing.T) {
	e := startDevstack(t)
	ctx := context.Background()
	cfg := moto.Config(e.endpoint, moto.Region)
	sc := scheduler.NewFromConfig(cfg)

	group := schedule.JobsGroup("local")
	if _, err := sc.GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String(group)}); schedule.IsNotFound(err) {
		if _, err := sc.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
			t.Fatal(err)
		}
	}
	attrs, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(e.resources["DefaultQueue"]), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	env := message.Envelope{V: 1, MessageID: message.DeriveMessageID("local-user", "e2e-at-"+time.Now().Format(time.RFC3339Nano)),
		Type: "email.welcome.v1", Key: "welcome:u-demo-2", CorrelationID: "e2e-at", Args: map[string]string{"userId": "u-demo-2"},
		EnqueuedAt: time.Now().UTC()}
	body, err := env.Encode()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(70 * time.Second).Truncate(time.Second)
	_, err = sc.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(env.MessageID), GroupName: aws.String(group), ScheduleExpression: aws.String("at(" + at.Format("2006-01-02T15:04:05") + ")"),
		ScheduleExpressionTimezone: aws.String("UTC"), FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		ActionAfterCompletion: schedtypes.ActionAfterCompletionDelete,
		Target: &schedtypes.Target{Arn: aws.String(attrs.Attributes["QueueArn"]), RoleArn: aws.String("arn:aws:iam::123456789012:role/runstwice-local-SchedulerRole"),
			Input: aws.String(string(body))},
	})
	if err != nil {
		t.Fatal(err)
	}

	// While it waits: the recurring schedule, listed and triggered.
	code, out, errOut := e.run("schedules", "list")
	if code != 0 || !strings.Contains(out, "partner-digest-weekly") || !strings.Contains(out, "cron(0 9 ? * MON *)") ||
		!strings.Contains(out, "email.partner-digest-fanout.v1") || !strings.Contains(out, env.MessageID) {
		t.Fatalf("schedules list: exit %d\n%s%s", code, out, errOut)
	}
	for _, typ := range []string{"email.partner-digest-fanout.v1", "email.partner-digest.v1"} {
		if code, _, errOut := e.run("toggles", "set", typ, "on"); code != 0 {
			t.Fatalf("toggles set %s on: %s", typ, errOut)
		}
	}
	time.Sleep(2 * time.Second) // the workers' toggle TTL (1 s here)
	digests := func() int {
		n := 0
		for _, m := range e.mails("demo2@example.com") {
			if strings.Contains(strings.ToLower(m.Subject), "digest") {
				n++
			}
		}
		return n
	}
	for range 2 {
		if code, out, errOut := e.run("schedules", "trigger", "partner-digest-weekly", "--at", "2026-11-30T09:00:00Z"); code != 0 {
			t.Fatalf("schedules trigger: exit %d\n%s%s", code, out, errOut)
		}
	}
	eventually(t, 60*time.Second, "the weekly digest of u-demo-2 was mailed", func() bool { return digests() > 0 })

	welcomed := func() bool {
		for _, m := range e.mails("demo2@example.com") {
			if m.JobID == env.MessageID {
				return true
			}
		}
		return false
	}
	eventually(t, 120*time.Second, "the at() schedule's mail arrived", welcomed)
	if now := time.Now(); now.Before(at) {
		t.Fatalf("the at() schedule fired at %s, before its time %s", now, at)
	}
	_, err = sc.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(env.MessageID), GroupName: aws.String(group)})
	if !schedule.IsNotFound(err) {
		t.Fatalf("the at() schedule is still there after it fired: %v", err)
	}
	if n := digests(); n != 1 {
		t.Fatalf("u-demo-2 got %d digests from two ticks of the same time, want 1", n)
	}
}
