package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/vclock"
)

const day = 24 * time.Hour

// ClockJumps are how far the clock campaign moves the virtual clock between
// enqueueing a stage's jobs (with their cancels and run-nows) and their
// delivery: a month, two, and the longest runAt a job may have; then
// FinalJump, past every guard's life.
var ClockJumps = []time.Duration{31 * day, 60 * day, 365 * day}

// FinalJump is the last move of the clock: every guard of the clock's jobs
// has lived its life, and nothing may run or remain.
const FinalJump = 400 * day

// sweepWait is how far the clock moves for the hourly schedule sweep to
// fire once: a little more than its rate.
const sweepWait = time.Hour + time.Minute

// repeatLate is how long after a stage's firing the clock campaign sends
// each firing again: within the scheduler's retry window, as a late
// repeated delivery of the scheduler would come.
const repeatLate = 20 * time.Hour

// The fates of a clock job (ClockFigures.Fates).
const (
	FatePlain     = "plain"     // left to fire at its runAt
	FateCancelled = "cancelled" // DELETE while its schedule's delete fails
	FateRanNow    = "ran-now"   // run now while its schedule's delete fails
)

// clockJob is one job of the clock campaign: due a jump ahead, in a
// one-time schedule, and cancelled, run now or left alone.
type clockJob struct {
	ID, IdemKey string
	Kind        kind
	Stage       int
	RunAt       time.Time
	Fate        string
	// Swept: the delete of its schedule failed, and the clock moved an hour
	// for the schedule sweep to delete it before its run time; else the
	// schedule is still there when the clock jumps to its run time, and
	// fires.
	Swept bool
	// Input is the schedule's target input (what a firing sends), read
	// when the job was made.
	Input string
	// Answered is what the cancel or run-now answered ("" for a plain job).
	Answered string
}

// clockRun is what the clock campaign did and saw.
type clockRun struct {
	Jobs     []clockJob
	Jumps    []time.Duration
	Offset   time.Duration // the clock's offset at the end
	Repeats  int           // firings sent again
	Reaped   int           // expired items deleted, as DynamoDB's TTL deletes them
	Orphans  []string      // schedules of ended jobs the sweep had not deleted
	Leftover []string      // schedules of the clock's jobs left after the last jump
	Week     fanoutWeek
	Relay    []relayCase
	// MailsBefore are the mails SES held before the clock campaign.
	MailsBefore map[string]bool
	sendsBefore int
}

// clockRunner drives the clock campaign on a campaign's stack.
type clockRunner struct {
	c      *campaign
	run    *clockRun
	offset time.Duration
	clock  *vclock.Reader
	ops    *jobs.Store // an operator's store (jobctl): run-now, through the faults
	direct *scheduler.Client
	api    *client.Client // the campaign's caller, with no retries
}

// runClock runs the clock campaign: it moves the stack's virtual clock and
// checks what each jump may break. It runs once the load's ledger has read
// its ground truth (mails), so that nothing of the load is judged on the
// jumped clock.
func (c *campaign) runClock(ctx context.Context, mailsBefore []string) (*clockRun, error) {
	r := &clockRunner{c: c, run: &clockRun{MailsBefore: map[string]bool{}}, clock: &vclock.Reader{Path: c.clockPath}}
	for _, m := range mailsBefore {
		r.run.MailsBefore[m] = true
	}
	sends, _ := c.witness.snapshot()
	r.run.sendsBefore = len(sends)
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	for i, jump := range ClockJumps {
		c.progress.phase(fmt.Sprintf("clock: stage %d, a jump of %d days", i+1, jump/day))
		if err := r.stage(ctx, i, jump); err != nil {
			return nil, err
		}
		if i == 0 {
			c.progress.phase("clock: the fan-out switched off and on mid-week")
			if err := r.fanoutWeek(ctx); err != nil {
				return nil, err
			}
			c.progress.phase("clock: outbox items relayed again")
			if err := r.relayAgain(ctx); err != nil {
				return nil, err
			}
		}
	}
	c.progress.phase(fmt.Sprintf("clock: a last jump of %d days", FinalJump/day))
	if err := r.jump(ctx, FinalJump); err != nil {
		return nil, err
	}
	c.waitQuiet(ctx)
	left, err := r.schedulesOf(ctx, r.run.Jobs)
	if err != nil {
		return nil, err
	}
	r.run.Leftover, r.run.Offset = left, r.offset
	r.run.Week.Recorded = map[string]string{}
	for _, id := range r.run.Week.Odd {
		if why := c.obs.refusal(r.run.Week.Week, userIDDigest(id)); why != "" {
			r.run.Week.Recorded[id] = why
		}
	}
	return r.run, nil
}

// prepare sets the stack up for the clock: the local scheduler no longer
// fires the weekly digest's schedule (the clock campaign ticks the weeks
// it checks itself; a jump would fire weeks of ticks), the digest and the
// fan-out are on, and the odd user ids are in the directory.
func (r *clockRunner) prepare(ctx context.Context) error {
	c := r.c
	cfg := moto.Config(c.stack.FunctionEndpoint(), moto.Region) // through the faults, as jobctl's calls are not: to fail deletes
	cfg.Retryer = nil
	r.direct = scheduler.NewFromConfig(c.aws)
	markers := marker.NewStore(c.db, c.res.Markers)
	markers.Now = r.clock.Now
	r.ops = jobs.NewStore(c.db, c.res.Jobs, markers)
	r.ops.Now = r.clock.Now
	r.ops.Schedules = schedule.New(scheduler.NewFromConfig(cfg), schedule.Config{Group: schedule.GroupName(devstack.Stage)})
	var err error
	if r.api, err = client.New(c.stack.APIURL, client.WithCaller(Caller), client.WithRetry(1, 100*time.Millisecond, 100*time.Millisecond)); err != nil {
		return err
	}
	if err := c.tickSchedule(ctx); err != nil {
		return err
	}
	if _, err := r.direct.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(c.tickInput.Name),
		GroupName: aws.String(schedule.RecurringGroup(devstack.Stage))}); err != nil && !schedule.IsNotFound(err) {
		return fmt.Errorf("chaos: clock: stop the weekly schedule: %w", err)
	}
	for _, t := range []string{client.TypePartnerDigest, contract.Fanout.Name, client.TypeWelcome} {
		if err := c.toggle(ctx, t, true); err != nil {
			return err
		}
	}
	return r.seedOddUsers(ctx)
}

// stage enqueues a stage's jobs due jump ahead, cancels and runs now some
// while their schedules' deletes fail, lets the sweep delete some of those
// schedules, then jumps to their run time (an hour late) and sends every
// firing again later.
func (r *clockRunner) stage(ctx context.Context, stage int, jump time.Duration) error {
	c := r.c
	runAt := r.clock.Now().Add(jump).Truncate(time.Second)
	// The types of the queues without a batching window: a stage waits for
	// its deliveries several times.
	var quick []kind
	for _, k := range kinds {
		if k.Queue != contract.QueueBulk {
			quick = append(quick, k)
		}
	}
	var js []clockJob
	for i, f := range []struct {
		fate  string
		swept bool
	}{{FatePlain, false}, {FatePlain, false}, {FateCancelled, false}, {FateCancelled, false}, {FateRanNow, false}, {FateRanNow, false},
		{FateCancelled, true}, {FateRanNow, true}} {
		k := quick[(stage+i)%len(quick)]
		key := fmt.Sprintf("chaos-%d-clock-%d-%d", c.cfg.Seed, stage, i)
		j := clockJob{IdemKey: key, Kind: k, Stage: stage, RunAt: runAt, Fate: f.fate, Swept: f.swept}
		users, _ := usersOf(k, c.cfg.UsersPerType)
		res, err := c.api.Enqueue(ctx, k.Type, k.args(users[0].ID, 10000+stage*100+i), client.EnqueueOptions{Key: key, IdempotencyKey: key, RunAt: runAt})
		if err != nil {
			return fmt.Errorf("chaos: clock: enqueue %s due %s: %w", key, runAt.Format(time.RFC3339), err)
		}
		j.ID = res.JobID
		got, err := r.direct.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(j.ID), GroupName: aws.String(schedule.GroupName(devstack.Stage))})
		if err != nil {
			return fmt.Errorf("chaos: clock: the schedule of %s: %w", j.ID, err)
		}
		if got.Target != nil {
			j.Input = aws.ToString(got.Target.Input)
		}
		js = append(js, j)
	}
	// The swept ones: every delete fails while they are cancelled and run
	// now; an hour later the sweep must have deleted their schedules.
	all := c.clockFaults.Add(faults.Rule{Service: "scheduler", Operation: "DeleteSchedule", Kind: faults.Error503, P: 1})
	for i := range js {
		if js[i].Swept {
			r.end(ctx, &js[i])
		}
	}
	all()
	if err := r.jump(ctx, sweepWait); err != nil {
		return err
	}
	c.waitQuiet(ctx)
	var swept []clockJob
	for _, j := range js {
		if j.Swept {
			swept = append(swept, j)
		}
	}
	orphans, err := r.schedulesOf(ctx, swept)
	if err != nil {
		return err
	}
	r.run.Orphans = append(r.run.Orphans, orphans...)
	// The others: their deletes fail, and no sweep runs before the jump,
	// so their schedules fire at their old time.
	var lift []func()
	for i := range js {
		if js[i].Fate != FatePlain && !js[i].Swept {
			lift = append(lift, c.clockFaults.Add(faults.Rule{Service: "scheduler", Operation: "DeleteSchedule", Contains: []string{js[i].ID}, Kind: faults.Error503, P: 1}))
			r.end(ctx, &js[i])
		}
	}
	r.run.Jobs = append(r.run.Jobs, js...)
	// The deletes may succeed again: the jump's pass fires the one-time
	// schedules before the sweep's ticks, so the sweeps it sets off find
	// them fired.
	for _, f := range lift {
		f()
	}
	if err := r.jump(ctx, jump); err != nil {
		return err
	}
	r.awaitFired(ctx, js)
	c.waitQuiet(ctx)
	if err := r.jump(ctx, repeatLate); err != nil {
		return err
	}
	r.repeat(ctx, js)
	c.waitQuiet(ctx)
	return nil
}

// end cancels or runs now j (by its fate), and records what it answered. A
// failed delete of its schedule makes either fail after its write; the job
// reads Cancelled or has been sent all the same.
func (r *clockRunner) end(ctx context.Context, j *clockJob) {
	switch j.Fate {
	case FateCancelled:
		job, err := r.api.Cancel(ctx, j.ID)
		var p *client.Problem
		switch {
		case err == nil:
			j.Answered = string(job.State)
		case errors.As(err, &p):
			j.Answered = fmt.Sprintf("%d %s", p.Status, p.Type)
		default:
			j.Answered = err.Error()
		}
	case FateRanNow:
		_, out, err := r.ops.RunNow(ctx, j.ID, func(ctx context.Context, rec jobs.Job) error {
			return r.c.sender.Send(ctx, sqsqueue.Message{Queue: rec.Queue, Body: rec.Message, Type: rec.Type, CorrelationID: rec.CorrelationID})
		})
		j.Answered = out.String()
		if err != nil {
			j.Answered += ": " + err.Error()
		}
	}
}

// jump moves the virtual clock d forward, deletes the items whose TTL it
// passed (as DynamoDB would), and waits until every process reads it and
// the scheduler emulator has looked.
func (r *clockRunner) jump(ctx context.Context, d time.Duration) error {
	if d > 0 {
		r.offset += d
		if err := vclock.Write(r.c.clockPath, r.offset); err != nil {
			return err
		}
		r.run.Jumps = append(r.run.Jumps, d)
		r.c.mark(fmt.Sprintf("clock moved %s, to %s", d, time.Now().Add(r.offset).UTC().Format(time.RFC3339)))
	}
	n, err := reapExpired(ctx, r.c.db, r.c.stack.Stack, time.Now().Add(r.offset))
	if err != nil {
		return err
	}
	r.run.Reaped += n
	return smithytime.SleepWithContext(ctx, vclock.Settle+2*clockPoll)
}

// clockPoll is the scheduler emulator's poll in a clock campaign.
const clockPoll = time.Second

// awaitFired waits (up to a minute) until the scheduler emulator has fired
// and deleted every schedule of js that was still there.
func (r *clockRunner) awaitFired(ctx context.Context, js []clockJob) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		left, err := r.schedulesOf(ctx, js)
		if err == nil && len(left) == 0 {
			return
		}
		_ = smithytime.SleepWithContext(ctx, clockPoll)
	}
	r.c.problem(fmt.Errorf("chaos: clock: schedules not fired a minute after the jump"))
}

// repeat sends the firing of every job of js again, as a late or repeated
// delivery of the scheduler: its schedule's input to its queue.
func (r *clockRunner) repeat(ctx context.Context, js []clockJob) {
	for _, j := range js {
		if j.Input == "" {
			continue
		}
		if err := r.c.sender.Send(ctx, sqsqueue.Message{Queue: string(j.Kind.Queue), Body: j.Input, Type: j.Kind.Type}); err != nil {
			r.c.problem(fmt.Errorf("chaos: clock: a firing of %s again: %w", j.ID, err))
			continue
		}
		r.run.Repeats++
	}
}

// schedulesOf returns the ids of the jobs of js whose one-time schedule
// exists.
func (r *clockRunner) schedulesOf(ctx context.Context, js []clockJob) ([]string, error) {
	all, err := schedule.List(ctx, r.direct)
	if err != nil {
		return nil, fmt.Errorf("chaos: clock: list schedules: %w", err)
	}
	var out []string
	for _, j := range js {
		if slices.ContainsFunc(all, func(s schedule.Schedule) bool { return s.Name == j.ID }) {
			out = append(out, j.ID)
		}
	}
	return out, nil
}

// clockTruth reads what the ledger judges the clock campaign by: the mails
// SES holds, and what the campaign's instruments saw (the faults of both
// injectors).
func (c *campaign) clockTruth(ctx context.Context) (*truth, error) {
	t := &truth{Faults: append(c.faults.Events(), c.clockFaults.Events()...), Seen: c.obs.snapshot()}
	t.Sends, t.Claims = c.witness.snapshot()
	var err error
	if t.Mails, err = motoMails(ctx, c.stack.Endpoint); err != nil {
		return nil, err
	}
	return t, nil
}
