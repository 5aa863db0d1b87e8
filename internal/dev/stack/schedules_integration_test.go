//go:build integration

package stack

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/message"
)

// The template's recurring schedule is provisioned on moto in its group, as
// the template says: cron, time zone, the bulk queue as its target with the
// tick as its input, the scheduler role, the DLQ as its dead-letter queue.
// Provisioning again keeps the group and its schedules.
func TestProvisionCreatesTheSchedules(t *testing.T) {
	srv := testenv.Moto(t)
	cfg := srv.Config()
	tmpl, _ := loadTemplate(t)
	ctx := context.Background()
	// Stage dev: the other provisioning tests use local, whose group is
	// shared by every stack on this moto.
	const stage = "dev"
	opts := Options{StackName: testenv.Name(t, "sched"), Params: map[string]string{"Stage": stage, "PartnerDigestTimezone": "Europe/Berlin"}}
	st, err := Provision(ctx, NewClients(cfg), tmpl, opts)
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	group, ok := st.Physical("RecurringScheduleGroup")
	if !ok || group.Name != "runstwice-"+stage+"-recurring" {
		t.Fatalf("schedule group %+v", group)
	}
	sc := scheduler.NewFromConfig(cfg)
	check := func() {
		t.Helper()
		got, err := sc.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String("partner-digest-weekly"), GroupName: aws.String(group.Name)})
		if err != nil {
			t.Fatal(err)
		}
		bulk, _ := st.Physical("BulkQueue")
		dlq, _ := st.Physical("DeadLetterQueue")
		if aws.ToString(got.ScheduleExpression) != "cron(0 9 ? * MON *)" || aws.ToString(got.ScheduleExpressionTimezone) != "Europe/Berlin" ||
			got.FlexibleTimeWindow.Mode != "OFF" || aws.ToString(got.Target.Arn) != bulk.ARN ||
			aws.ToString(got.Target.DeadLetterConfig.Arn) != dlq.ARN || !strings.HasSuffix(aws.ToString(got.Target.RoleArn), ":role/"+opts.StackName+"-SchedulerRole") {
			t.Fatalf("schedule %+v target %+v", got, got.Target)
		}
		input := strings.NewReplacer("<aws.scheduler.scheduled-time>", "2026-12-07T09:00:00Z", "<aws.scheduler.execution-id>", "exec-1").
			Replace(aws.ToString(got.Target.Input))
		tick, err := message.DecodeTick([]byte(input))
		if err != nil || tick.Schedule != "partner-digest-weekly" || tick.Type != "email.partner-digest-fanout.v1" {
			t.Fatalf("the schedule's input %q is not its tick: %+v %v", aws.ToString(got.Target.Input), tick, err)
		}
	}
	check()
	if _, err := Provision(ctx, NewClients(cfg), tmpl, opts); err != nil {
		t.Fatalf("provision again: %v", err)
	}
	check()
}
