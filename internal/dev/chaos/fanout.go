package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	smithytime "github.com/aws/smithy-go/time"
	"github.com/google/uuid"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/message"
)

// DefaultWeeklyPartners is how many users of the weekly digest the campaign
// seeds: enough that the fan-out reads two pages.
const DefaultWeeklyPartners = digest.PageSize + 5

// weeklyPartners are the users the campaign seeds with digest = weekly and
// a confirmed address.
func weeklyPartners(n int) []devstack.DemoUser {
	out := make([]devstack.DemoUser, n)
	for i := range out {
		id := fmt.Sprintf("u-chaos-weekly-%03d", i+1)
		out[i] = devstack.DemoUser{UserID: id, Email: id + "@example.com", DisplayName: "Chaos " + id, EmailConfirmed: true, Digest: "weekly"}
	}
	return out
}

// partnersOf returns, in user id order (the fan-out's), every user of the
// weekly digest in the stack: the campaign's and the stack's own demo users
// with digest = weekly and a confirmed address.
func partnersOf(own []devstack.DemoUser) []string {
	var ids []string
	for _, u := range append(slices.Clone(devstack.DemoUsers), own...) {
		if u.Digest == "weekly" && u.EmailConfirmed {
			ids = append(ids, u.UserID)
		}
	}
	slices.Sort(ids)
	return ids
}

// tickSent is one tick of the weekly schedule the campaign sent to the bulk
// queue, as an operator's `jobctl schedules trigger --at` does.
type tickSent struct {
	At     time.Time // its scheduled time
	SentAt time.Time
	// On: sent after the fan-out's switch went on (and its cache expired).
	On bool
}

// weeks are the scheduled times of the campaign's ticks, all in the past
// (a job of a tick is never held for later): off is the tick sent while the
// fan-out is off; on and onAgain are two times of one week; other is
// another week.
type weeks struct{ off, on, onAgain, other time.Time }

// weeksBefore returns the ticks' times: Monday 09:00 UTC of the three weeks
// before now's, and an hour after one of them.
func weeksBefore(now time.Time) weeks {
	now = now.UTC()
	monday := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC).AddDate(0, 0, -(int(now.Weekday())+6)%7)
	on := monday.AddDate(0, 0, -14)
	return weeks{off: monday.AddDate(0, 0, -21), on: on, onAgain: on.Add(time.Hour), other: monday.AddDate(0, 0, -7)}
}

// tick sends the ticks of the weekly schedule for the scheduled times at,
// all at once: the schedule's own input filled in as the scheduler fills
// it, each with an execution id of its own.
func (c *campaign) tick(ctx context.Context, at ...time.Time) error {
	if err := c.tickSchedule(ctx); err != nil {
		return err
	}
	on := !c.when(fanoutOn).IsZero()
	var wg sync.WaitGroup
	errs := make([]error, len(at))
	for i, t := range at {
		wg.Go(func() {
			body := c.tickInput.Fill(t, "chaos-"+uuid.NewString())
			tk, err := message.DecodeTick([]byte(body))
			if err != nil {
				errs[i] = fmt.Errorf("chaos: the schedule's input is no tick: %w", err)
				return
			}
			sent := time.Now()
			if errs[i] = c.sender.Send(ctx, sqsqueue.Message{Queue: string(contract.Fanout.Queue), Body: body, Type: tk.Type, CorrelationID: tk.CorrelationID}); errs[i] != nil {
				return
			}
			c.mu.Lock()
			c.ticks = append(c.ticks, tickSent{At: t, SentAt: sent, On: on})
			c.mu.Unlock()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// tickSchedule reads the weekly schedule (its input is a tick's) once.
func (c *campaign) tickSchedule(ctx context.Context) error {
	if c.tickInput != nil {
		return nil
	}
	got, err := scheduler.NewFromConfig(c.aws).GetSchedule(ctx, &scheduler.GetScheduleInput{
		Name: aws.String(digest.ScheduleName), GroupName: aws.String(schedule.RecurringGroup(devstack.Stage))})
	if err != nil {
		return fmt.Errorf("chaos: read schedule %s: %w", digest.ScheduleName, err)
	}
	s := schedule.Schedule{Name: digest.ScheduleName, ARN: aws.ToString(got.Arn)}
	if got.Target != nil {
		s.Input = aws.ToString(got.Target.Input)
	}
	c.tickInput = &s
	return nil
}

// awaitTick waits (up to tickWait) until the job of the tick for at is
// done, however many deliveries that took: a tick is judged by the switch
// it meets, so the tick sent while off must have met it before the switch
// goes on.
func (c *campaign) awaitTick(ctx context.Context, at time.Time) {
	id := message.TickMessageID(digest.ScheduleName, at)
	for deadline := time.Now().Add(tickWait); time.Now().Before(deadline) && ctx.Err() == nil; {
		if j, ok := c.readJob(ctx, id, digest.Caller); ok && j.State == client.StateSucceeded {
			return
		}
		_ = smithytime.SleepWithContext(ctx, 500*time.Millisecond)
	}
	c.problem(fmt.Errorf("chaos: the tick %s (%s) was not done within %v; the fan-out is switched on all the same", id, at.Format(message.TickTimeLayout), tickWait))
}

// tickWait bounds how long the script waits for the tick while off.
const tickWait = 3 * time.Minute

// fanoutOn names the script step that switches the fan-out on.
const fanoutOn = "digest fan-out switched on"

// killer decides the kills from outside (devstack.Chaos.KillDuring): the
// outbox relay, which has no kill points of its own, dies in the middle of
// every batch until one kill has landed (early in the batch, so that a
// short one is still running), then of some; and the e-mail function in the
// middle of some batches that hold a fan-out page once the fan-out's switch
// is on: every such batch until one kill has landed (a page that ends
// before its kill, a tick that defers to another, is spared), then some,
// never a batch all of whose pages a kill already cut (each kill costs the
// bulk queue's visibility timeout before the batch is back), at most
// maxFanoutKills. Whether a kill landed is the observer's to say, from the
// kill lines: a kill whose invocation ended first writes none.
type killer struct {
	mu     sync.Mutex
	rng    *rand.Rand
	armed  func() bool               // the fan-out's switch is on
	landed func(function string) int // the kills from outside that landed, of a function
	cut    map[string]bool
}

// Kill probabilities and moments of the kills from outside.
const (
	relayKillP     = 0.15
	fanoutKillP    = 0.3
	maxFanoutKills = 2
)

func newKiller(seed uint64, armed func() bool, landed func(function string) int) *killer {
	return &killer{rng: rand.New(rand.NewPCG(seed+4, seed+5)), armed: armed, landed: landed, cut: map[string]bool{}}
}

// during is devstack.Chaos.KillDuring.
func (k *killer) during(function string, event []byte) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	switch {
	case function == "outbox" && k.landed("outbox") == 0:
		// Until one lands: a relay batch's first few milliseconds, spent
		// in the runtime's hand-over and the first record's writes.
		return time.Duration(1+k.rng.IntN(10)) * time.Millisecond
	case function == "outbox" && k.rng.Float64() < relayKillP:
		// A relay batch of a few records lasts some tens of milliseconds.
		return time.Duration(5+k.rng.IntN(150)) * time.Millisecond
	case function == "email" && k.armed():
		landed := k.landed("email")
		pages := fanoutPages(event)
		fresh := slices.ContainsFunc(pages, func(p string) bool { return !k.cut[p] })
		if len(pages) == 0 || landed >= maxFanoutKills || (landed > 0 && (!fresh || k.rng.Float64() >= fanoutKillP)) {
			return 0
		}
		for _, p := range pages {
			k.cut[p] = true
		}
		// A page of a hundred enqueues lasts a few seconds.
		return time.Duration(100+k.rng.IntN(900)) * time.Millisecond
	}
	return 0
}

// fanoutPages returns the fan-out jobs an SQS event holds, each named by
// its message body's scheduled time (a tick) or job id (a page).
func fanoutPages(event []byte) []string {
	var ev events.SQSEvent
	if json.Unmarshal(event, &ev) != nil {
		return nil
	}
	var out []string
	for _, r := range ev.Records {
		var m struct {
			Type, MessageID, ScheduledTime string
		}
		if json.Unmarshal([]byte(r.Body), &m) == nil && m.Type == contract.Fanout.Name {
			out = append(out, m.MessageID+m.ScheduledTime)
		}
	}
	return out
}

// fanoutJobs returns what the ticks sent must have made: the partners'
// digest jobs of every week ticked while the fan-out was on (each an
// accepted job, judged as every other), the fan-out's jobs of those weeks
// (its ticks' and later pages'), and the digest jobs of the weeks ticked
// only while it was off, which must not exist.
func fanoutJobs(partners []string, ticks []tickSent) fanoutPlan {
	digests, fanout, off := []result(nil), map[string]fanoutJob{}, map[string]bool{}
	onWeeks := map[string]bool{}
	for _, t := range ticks {
		week := contract.ISOWeek(t.At)
		fanout[message.TickMessageID(digest.ScheduleName, t.At)] = fanoutJob{Week: week, Tick: true, On: t.On, At: t.At}
		if t.On {
			onWeeks[week] = true
		}
	}
	k := kinds[slices.IndexFunc(kinds, func(k kind) bool { return k.Type == client.TypePartnerDigest })]
	done := map[string]bool{}
	for _, t := range ticks {
		week := contract.ISOWeek(t.At)
		if done[week] {
			continue
		}
		done[week] = true
		for i, u := range partners {
			id := message.DeriveMessageID(digest.Caller, digest.DigestKey(u, week))
			if !onWeeks[week] {
				off[id] = true
				continue
			}
			j := plannedJob{Index: -1, Kind: k, User: u, Args: map[string]string{"userId": u, "digestId": week}, IdemKey: digest.DigestKey(u, week),
				JobID: id, Source: viaFanout}
			digests = append(digests, result{Job: j, Accepted: true, JobID: id})
			if (i+1)%digest.PageSize == 0 && i+1 < len(partners) {
				// The page after u, which the page before enqueues, in the
				// run of each tick of the week sent while on (a run's pages
				// name its tick's job; a tick that deferred to another of
				// the week has no job, so its run has no pages).
				for _, r := range ticks {
					if r.On && contract.ISOWeek(r.At) == week {
						run := message.TickMessageID(digest.ScheduleName, r.At)
						fanout[message.DeriveMessageID(digest.Caller, digest.PageKey(week, run, u))] = fanoutJob{Week: week, On: true, Run: run}
					}
				}
			}
		}
	}
	return fanoutPlan{Digests: digests, Jobs: fanout, Off: off, Ticks: ticks, Partners: len(partners)}
}

// fanoutPlan is what the ticks sent owe (fanoutJobs).
type fanoutPlan struct {
	// Digests are the partners' digest jobs of the weeks ticked while on.
	Digests []result
	// Jobs are the fan-out's jobs by id: the ticks' and the later pages'.
	Jobs map[string]fanoutJob
	// Off are the digest job ids of the weeks ticked only while off.
	Off      map[string]bool
	Ticks    []tickSent
	Partners int
}

// fanoutJob is a job of the fan-out the ledger expects: a tick's (Tick, at
// At, sent while the switch was On or not) or a later page's, of the run
// of the tick whose job id is Run.
type fanoutJob struct {
	Week     string
	Tick, On bool
	At       time.Time
	Run      string
}

// fanout checks the fan-out's own jobs. A tick sent while its switch was
// off reads Succeeded with lastOutcome skipped (and its week's digests, if
// any mail went out, were named as the mails were traced). Of a week ticked
// while on, at least one tick's job holds the week (another time defers to
// a job of the week still active, the same time twice is the same job),
// and every later page of each tick's job that exists (its run) exists
// too; each reads Succeeded, not skipped. A tick that deferred has no job,
// and its run no pages.
func (a *accountant) fanout() {
	fan, t, f := a.in.fanout, a.t, a.f
	times, weeks, held := map[time.Time]bool{}, map[string]bool{}, map[string]bool{}
	for _, tk := range fan.Ticks {
		times[tk.At] = true
	}
	f.TickTimes = len(times)
	for _, id := range slices.Sorted(maps.Keys(fan.Jobs)) {
		fj := fan.Jobs[id]
		got, read := t.Fanout[id]
		state := string(got.State)
		switch {
		case !read:
			state = "none"
		case got.LastOutcome == "skipped":
			state += " (skipped)"
		}
		f.FanoutStates[state]++
		switch {
		case !fj.On:
			if state != string(client.StateSucceeded)+" (skipped)" {
				a.fail(InvTickOff, fmt.Sprintf("tick %s (%s) reads %s; its outcomes: %s", id, fj.At.Format(message.TickTimeLayout), state,
					a.outcomesAround(id, a.in.fanoutOn)))
			}
			continue
		case fj.Tick:
			weeks[fj.Week] = true
			held[fj.Week] = held[fj.Week] || read
		case !read:
			if _, ran := t.Fanout[fj.Run]; ran || fj.Run == "" {
				a.fail(InvLost, fmt.Sprintf("fan-out page %s of %s (run %s): no job", id, fj.Week, fj.Run))
			}
		}
		if read && state != string(client.StateSucceeded) {
			a.fail(InvWrongState, fmt.Sprintf("fan-out job %s of %s reads %s, ground truth Succeeded", id, fj.Week, state))
		}
	}
	f.WeeksOn = len(weeks)
	for _, w := range slices.Sorted(maps.Keys(weeks)) {
		if !held[w] {
			a.fail(InvLost, "the fan-out of "+w+": no tick's job")
		}
	}
}
