package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/switchview"
	"github.com/runstwice/runstwice/message"
)

const schedulesTriggerUsage = "schedules trigger NAME [--at TIME] [--again]"

// scheduleRow is one schedule as `schedules list` shows it.
type scheduleRow struct {
	Group      string     `json:"group"`
	Name       string     `json:"name"`
	Expression string     `json:"expression"`
	Timezone   string     `json:"timezone"`
	State      string     `json:"state"`
	NextFire   *time.Time `json:"nextFire,omitempty"`
	// Type is the job type it makes (the tick's type for a recurring one).
	Type string `json:"type,omitempty"`
	Tick bool   `json:"tick"`
	// Switch is that type's kill switch as workers apply it (on, off).
	Switch string `json:"switch,omitempty"`
	Error  string `json:"error,omitempty"`
}

// schedulesList serves `schedules list`: the stage's recurring schedules and
// its jobs' one-time schedules.
func (a *app) schedulesList(ctx context.Context, args []string) error {
	if _, err := parseN(args, nil, 0, "schedules list", "no arguments"); err != nil {
		return err
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	all, err := schedule.List(ctx, scheduler.NewFromConfig(a.cfg), schedule.RecurringGroup(a.stage), schedule.JobsGroup(a.stage))
	if err != nil {
		return err
	}
	now := a.now()
	snap, err := switchview.Read(ctx, ssm.NewFromConfig(a.cfg), contract.SwitchPath(a.stage), a.defaults(), now)
	if err != nil {
		return err
	}
	switches := map[string]bool{}
	for _, e := range snap.Entries {
		switches[e.Type] = e.Effective
	}
	rows := make([]scheduleRow, 0, len(all))
	for _, s := range all {
		r := scheduleRow{Group: s.Group, Name: s.Name, Expression: s.Expression, Timezone: s.Timezone, State: s.State, Type: s.JobType, Tick: s.Tick}
		if next, ok := s.Next(now); ok {
			next = next.UTC()
			r.NextFire = &next
		}
		if on, ok := switches[s.JobType]; ok {
			r.Switch = onOff(on)
		}
		if s.Err != nil {
			r.Error = s.Err.Error()
		}
		rows = append(rows, r)
	}
	if a.json {
		return a.printJSON(map[string]any{"stage": a.stage, "schedules": rows})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tEXPRESSION\tTIMEZONE\tSTATE\tNEXT FIRE\tTICK TYPE\tSWITCH")
	for _, r := range rows {
		next := "-"
		if r.NextFire != nil {
			next = r.NextFire.Format(time.RFC3339)
		}
		typ := r.Type
		if !r.Tick && typ != "" {
			typ += " (one-time job)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Expression, r.Timezone, r.State, next, dash(typ), dash(r.Switch))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) == 0 {
		fmt.Fprintf(a.stderr, "jobctl: no schedules in %s or %s at %s\n", schedule.RecurringGroup(a.stage), schedule.JobsGroup(a.stage), a.endpointName())
	}
	return nil
}

// schedulesTrigger serves `schedules trigger NAME [--at TIME]`: the
// recurring schedule's tick for that scheduled time (default now, to the
// minute), sent to its queue at once. Its job id comes from the name and the
// time, so the same time twice is one job.
func (a *app) schedulesTrigger(ctx context.Context, args []string) error {
	p, err := parseN(args, map[string]bool{"at": true, "again": false}, 1, "schedules trigger", "one schedule name")
	if err != nil {
		return err
	}
	name := p.pos[0]
	again := p.set["again"]
	at := a.now().UTC().Truncate(time.Minute)
	if p.set["at"] {
		if at, err = time.Parse(time.RFC3339, p.vals["at"]); err != nil {
			return usagef("--at %q is not an RFC 3339 time such as 2026-12-07T09:00:00Z", p.vals["at"])
		}
		at = at.UTC().Truncate(time.Second)
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	group := schedule.RecurringGroup(a.stage)
	got, err := scheduler.NewFromConfig(a.cfg).GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(group)})
	if schedule.IsNotFound(err) {
		return &notFoundError{msg: fmt.Sprintf("no recurring schedule %s in %s", name, group)}
	}
	if err != nil {
		return fmt.Errorf("read schedule %s: %w", name, err)
	}
	// A time already ticked is one job: sending it again does nothing. Say
	// what that job did, and make a new run of the time only on purpose
	// (--again: the first second after it whose tick has no job).
	store := a.jobStore(dynamodb.NewFromConfig(a.cfg))
	for tries := 0; ; tries++ {
		prev, err := store.Get(ctx, message.TickMessageID(name, at))
		if errors.Is(err, jobs.ErrNotFound) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the tick's job: %w", err)
		}
		if !again {
			return refusedf("the tick of %s for %s is already job %s, %s%s; sending it again would do nothing.\n"+
				"To run that time again on purpose, add --again (it ticks the first free second after it, a new job of the same period), or choose another --at",
				name, at.Format(time.RFC3339), prev.ID, prev.State, outcomeNote(prev))
		}
		if tries == 60 {
			return refusedf("the 60 seconds after %s have all been ticked; choose another --at", at.Format(time.RFC3339))
		}
		fmt.Fprintf(a.stderr, "the tick of %s for %s is already job %s (%s%s); ticking %s instead\n",
			name, at.Format(time.RFC3339), prev.ID, prev.State, outcomeNote(prev), at.Add(time.Second).Format(time.RFC3339))
		at = at.Add(time.Second)
	}
	s := schedule.Schedule{Name: name, Group: group, ARN: aws.ToString(got.Arn)}
	if got.Target != nil {
		s.TargetARN, s.Input = aws.ToString(got.Target.Arn), aws.ToString(got.Target.Input)
	}
	body := s.Fill(at, "jobctl-"+uuid.NewString())
	tick, err := message.DecodeTick([]byte(body))
	if err != nil {
		return refusedf("schedule %s's input is not a tick (%v); only recurring schedules of ticks can be triggered", name, err)
	}
	if _, err := a.reg.Lookup(tick.Type); err != nil {
		return refusedf("schedule %s ticks %s, which is not in the registry", name, tick.Type)
	}
	client := sqs.NewFromConfig(a.cfg)
	if err := a.lookupQueueURLs(ctx, client); err != nil {
		return err
	}
	q, err := a.queueOfARN(s.TargetARN)
	if err != nil {
		return err
	}
	err = sqsqueue.New(client, envvar.ByName(a.res.Queues), "").Send(ctx, sqsqueue.Message{
		Queue: string(q), Body: body, Type: tick.Type, CorrelationID: tick.CorrelationID,
	})
	if err != nil {
		return err
	}
	jobID := message.TickMessageID(name, at)
	if a.json {
		return a.printJSON(map[string]any{"schedule": name, "scheduledTime": tick.ScheduledTime, "type": tick.Type,
			"queue": q, "jobId": jobID, "correlationId": tick.CorrelationID})
	}
	fmt.Fprintf(a.stdout, "sent the tick of %s for %s to %s: job %s (%s)\n", name, tick.ScheduledTime, q, jobID, tick.Type)
	fmt.Fprintf(a.stdout, "the same time again is the same job; follow it with `jobctl jobs get %s`\n", jobID)
	return nil
}

// queueOfARN is the work queue whose ARN is arn (its name is the ARN's last
// part and its URL's last path element).
func (a *app) queueOfARN(arn string) (message.Queue, error) {
	name := arn[strings.LastIndex(arn, ":")+1:]
	for q, url := range a.res.Queues {
		if url != "" && url[strings.LastIndex(url, "/")+1:] == name {
			return q, nil
		}
	}
	return "", errors.New("the schedule's target " + arn + " is not one of this stage's work queues (set QUEUE_URL_<QUEUE> for each of " + fmt.Sprint(contract.Queues) + ")")
}

// outcomeNote is how a job ended, for a message: " (skipped: its switch
// was off at 2026-11-30T09:00:01Z)", or "" when it recorded no outcome.
func outcomeNote(j jobs.Job) string {
	if j.LastOutcome == "" {
		return ""
	}
	note := " (" + j.LastOutcome
	if j.LastReason != "" {
		note += ": " + j.LastReason
	}
	return note + " at " + j.UpdatedAt.UTC().Format(time.RFC3339) + ")"
}
