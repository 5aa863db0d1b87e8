package chaos

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/message"
)

// Ledger is a campaign's account: what was done to the stack, what every
// accepted job's ground truth says, and the invariants checked.
type Ledger struct {
	N         int      `json:"n"`
	Seed      uint64   `json:"seed"`
	Faults    string   `json:"faults"`
	KillAt    string   `json:"killAt"`
	Mutations []string `json:"mutations,omitempty"`
	// WallTime is the campaign's duration, stack start to ledger.
	WallTime   string      `json:"wallTime"`
	Figures    Figures     `json:"figures"`
	Invariants []Invariant `json:"invariants"`
	Timeline   []event     `json:"timeline"`
	// Problems are what went wrong in the campaign itself.
	Problems []string `json:"problems,omitempty"`
	// Stories are the histories of a few jobs that broke the promise, by
	// job id (story).
	Stories map[string][]string `json:"stories,omitempty"`
}

// Figures are the ledger's counts.
type Figures struct {
	Requests           int            `json:"requests"` // HTTP enqueue attempts, twins and retries included
	JobsAccepted       int            `json:"jobsAccepted"`
	TwinRequests       int            `json:"twinRequests"`       // extra requests sent at once with the same key
	FrontFaults        int            `json:"frontFaults"`        // first attempts answered 5xx by the campaign's front
	DuplicatesInjected int            `json:"duplicatesInjected"` // copies sent straight to the queues
	Delayed            int            `json:"delayed"`
	Poisoned           int            `json:"poisoned"`   // jobs for a user whose stored address is unusable
	Deliveries         map[string]int `json:"deliveries"` // records handed to each polled function
	LostInvocations    int            `json:"lostInvocations"`
	Outcomes           map[string]int `json:"outcomes"` // the runner's outcome lines, by outcome
	Kills              map[string]int `json:"kills"`    // by step
	Faults             map[string]int `json:"faults"`   // AWS faults by kind
	Effects            int            `json:"effects"`
	ExactlyOne         int            `json:"exactlyOne"`
	Two                int            `json:"two"`
	MoreThanTwo        int            `json:"moreThanTwo"`
	// Explained counts the extra effects by what explains them.
	Explained        map[string]int `json:"explained"`
	NoEffect         int            `json:"noEffect"`
	Cancelled        int            `json:"cancelled"`     // DELETE answered Cancelled
	CancelRefused    int            `json:"cancelRefused"` // DELETE answered 409
	DeadLettered     int            `json:"deadLettered"`  // reached the dead-letters table
	Redriven         int            `json:"redriven"`
	FailedAtEnd      int            `json:"failedAtEnd"` // no effect, dead-lettered, reading Failed
	States           map[string]int `json:"states"`      // as GET reports them at the end
	Enqueue5xx       int            `json:"enqueue5xx"`
	Enqueue5xxFaults int            `json:"enqueue5xxExplained"` // 5xx whose request an AWS fault touched
	InFlight409      int            `json:"inFlight409"`
	Quiet            bool           `json:"quiet"`

	// Through the outbox: the jobs accepted (their transaction committed),
	// how many of those had exactly one effect and how many were written
	// twice, the transactions the campaign wrote (retries included), and
	// the jobs refused by their transaction's condition on purpose.
	OutboxJobs         int `json:"outboxJobs"`
	OutboxExactlyOne   int `json:"outboxExactlyOne"`
	OutboxRewritten    int `json:"outboxRewritten"`
	OutboxTransactions int `json:"outboxTransactions"`
	OutboxRefused      int `json:"outboxRefused"`
	// The weekly digest's fan-out: the ticks sent, the distinct scheduled
	// times, the weeks ticked while on, the partners, the digests owed (a
	// partner and a week each) and those with exactly one mail, and the
	// fan-out's jobs (ticks and pages) by state at the end.
	Ticks          int            `json:"ticks"`
	TickTimes      int            `json:"tickTimes"`
	WeeksOn        int            `json:"weeksOn"`
	WeeklyPartners int            `json:"weeklyPartners"`
	Digests        int            `json:"digests"`
	DigestsOne     int            `json:"digestsExactlyOne"`
	FanoutStates   map[string]int `json:"fanoutStates"`
	// Chain counts the continuations and batches.
	Chain ChainFigures `json:"chain"`
	// Clock is the clock campaign's (nil without it).
	Clock *ClockFigures `json:"clock,omitempty"`
}

// maxIDs is how many ids of a broken invariant the ledger keeps.
const maxIDs = 20

// ledgerInput is everything the ledger is drawn from.
type ledgerInput struct {
	cfg      Config
	results  []result
	truth    *truth
	digestOn time.Time
	fanoutOn time.Time
	fanout   fanoutPlan
	outboxTx int
	redriven int
	quiet    bool
	wall     time.Duration
	timeline []event
	problems []string
	// clock is the clock campaign's run, clockTruth what was seen by its
	// end (nil without the clock).
	clock      *clockRun
	clockTruth *truth
}

// perJob is what the ground truth says of one accepted job.
type perJob struct {
	r        result
	sends    []send // mails SES accepted for it, oldest first
	explains map[string]int
	// want is the state the ground truth says it must read ("" when it
	// says none: the job is lost).
	want string
	// refusedAs is, for a continuation its parent's end does not run,
	// what it must read instead: Cancelled (its parent was cancelled
	// under OnSucceeded) or AwaitingContinuation (its parent failed and
	// can still be redriven, or is waiting itself).
	refusedAs string
}

// accountant draws a ledger: the figures, and every breach of an
// invariant by id.
type accountant struct {
	in  ledgerInput
	t   *truth
	f   *Figures
	inv map[string]*Invariant
	// stories are the histories of the first jobs that broke the promise.
	stories map[string][]string
	// afterFailed are the OnAnyEnd continuations still waiting, at the
	// load's end, for a parent that failed (it could still be redriven):
	// once the clock has moved past that parent's record's life they run,
	// once (true: unless they are poisoned themselves).
	afterFailed map[string]bool
}

// account draws the ledger.
func account(in ledgerInput) *Ledger {
	l := &Ledger{N: in.cfg.N, Seed: in.cfg.Seed, Faults: in.cfg.Faults, KillAt: in.cfg.KillAt, Mutations: in.cfg.Mutations,
		WallTime: in.wall.Round(time.Second).String(), Timeline: in.timeline, Problems: in.problems}
	a := &accountant{in: in, t: in.truth, f: &l.Figures, inv: map[string]*Invariant{}, afterFailed: map[string]bool{}}
	a.counts()
	jobs := a.jobs()
	explain(jobs, a.t)
	for id, j := range jobs {
		if !j.r.Job.continuation() {
			a.judge(id, j)
		}
	}
	a.continuations(jobs) // after their parents, each chain in order
	a.batches()
	a.requests()
	a.fanout()
	names := invariantNames
	if in.clock != nil {
		a.clock()
		names = append(slices.Clone(names), clockInvariantNames...)
	}
	if !in.quiet {
		a.fail(InvNotQuiet, "timeout")
	}
	for _, name := range names {
		if i := a.inv[name]; i != nil {
			slices.Sort(i.IDs)
			l.Invariants = append(l.Invariants, *i)
		} else {
			l.Invariants = append(l.Invariants, Invariant{Name: name})
		}
	}
	l.Stories = a.stories
	return l
}

// fail records that id breaks the invariant name.
func (a *accountant) fail(name, id string) {
	i := a.inv[name]
	if i == nil {
		i = &Invariant{Name: name}
		a.inv[name] = i
	}
	i.Count++
	if len(i.IDs) < maxIDs {
		i.IDs = append(i.IDs, id)
	}
}

// counts fills the figures of what was done to the stack.
func (a *accountant) counts() {
	t, f := a.t, a.f
	f.Deliveries, f.Kills, f.Faults, f.Explained, f.States, f.Outcomes = t.Seen.Records, map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	f.Quiet, f.Redriven, f.Requests, f.OutboxTransactions = a.in.quiet, a.in.redriven, len(t.Attempts), a.in.outboxTx
	f.FanoutStates, f.Ticks, f.WeeklyPartners = map[string]int{}, len(a.in.fanout.Ticks), a.in.fanout.Partners
	for _, k := range t.Seen.Kills {
		f.Kills[k.Step]++
	}
	for _, e := range t.Faults {
		f.Faults[string(e.Kind)]++
	}
	for _, c := range t.Seen.Calls {
		if c.Lost {
			f.LostInvocations++
		}
	}
	for _, outs := range t.Seen.Outcomes {
		for _, o := range outs {
			f.Outcomes[o.Line.Outcome]++
		}
	}
}

// jobs returns the accepted jobs, each with the mails SES holds for it
// (moto's record, traced to its job by the send that created it).
func (a *accountant) jobs() map[string]*perJob {
	t, f := a.t, a.f
	byMessage := map[string]send{}
	for _, s := range t.Sends {
		if s.MessageID != "" {
			byMessage[s.MessageID] = s
		}
	}
	jobs := map[string]*perJob{}
	refused := map[string]bool{}
	for _, r := range a.in.results {
		f.TwinRequests += r.Job.Twins
		f.DuplicatesInjected += r.CopiesSent
		if r.Job.Front != frontNone {
			f.FrontFaults++
		}
		switch {
		case r.Refused:
			// No job, by design: none may exist.
			f.OutboxRefused++
			refused[r.Job.JobID] = true
			if t.RefusedJobs[r.Job.JobID] {
				a.fail(InvRefusedJob, r.Job.JobID)
			}
			continue
		case !r.Accepted:
			a.fail(InvNotAccepted, strings.TrimSuffix(r.Job.IdemKey+" ("+r.Err+")", " ()"))
			continue
		case r.Job.Source == viaOutbox:
			f.OutboxJobs++
			if r.Rewritten {
				f.OutboxRewritten++
			}
		}
		f.JobsAccepted++
		if r.Job.Delay > 0 {
			f.Delayed++
		}
		if r.Job.Poisoned {
			f.Poisoned++
		}
		jobs[r.JobID] = &perJob{r: r, explains: map[string]int{}}
	}
	f.Digests = len(a.in.fanout.Digests)
	for _, r := range a.in.fanout.Digests {
		jobs[r.JobID] = &perJob{r: r, explains: map[string]int{}}
	}
	f.Effects = len(t.Mails)
	for _, id := range t.Mails {
		s, ok := byMessage[id]
		switch {
		case ok && a.in.fanout.Off[s.JobID]:
			when := "after"
			if a.in.fanoutOn.IsZero() || s.Time.Before(a.in.fanoutOn) {
				when = "before"
			}
			a.fail(InvTickOff, "digest "+s.JobID+" mailed "+when+" the fan-out's switch went on (SES "+id+")")
			continue
		case ok && refused[s.JobID]:
			a.fail(InvRefusedJob, s.JobID+" mailed (SES "+id+")")
			continue
		case !ok || jobs[s.JobID] == nil:
			a.fail(InvForeignMail, id)
			continue
		}
		jobs[s.JobID].sends = append(jobs[s.JobID].sends, s)
	}
	for _, j := range jobs {
		slices.SortFunc(j.sends, func(x, y send) int { return x.Time.Compare(y.Time) })
	}
	return jobs
}

// judge checks one accepted job against the promise.
func (a *accountant) judge(id string, j *perJob) {
	t, f := a.t, a.f
	n := len(j.sends)
	switch {
	case n == 0:
		f.NoEffect++
	case n == 1:
		f.ExactlyOne++
	case n == 2:
		f.Two++
	default:
		f.MoreThanTwo++
	}
	explained := 0
	for why, k := range j.explains {
		explained += k
		if n > 1 {
			f.Explained[why] += min(k, n-1)
		}
	}
	if n > 1 && explained < n-1 {
		a.fail(InvExtra, id)
		a.keepStory(id)
	}
	letter, lettered := t.Letters[id]
	if lettered {
		f.DeadLettered++
	}
	switch j.r.Cancel {
	case "":
	case string(client.StateCancelled):
		f.Cancelled++
	default:
		f.CancelRefused++
	}
	cancelled := j.r.Cancel == string(client.StateCancelled)
	got, read := t.States[id]
	state := string(got.State)
	if !read {
		state = "unreadable"
	}
	f.States[state]++

	// The fail-closed type never runs while its switch is off, nor does
	// the fan-out that makes a partner's digest.
	if j.r.Job.Kind.Type == client.TypePartnerDigest && n > 0 && (a.in.digestOn.IsZero() || j.sends[0].Time.Before(a.in.digestOn)) {
		a.fail(InvFailClosed, id)
	}
	if j.r.Job.Source == viaFanout && n > 0 && (a.in.fanoutOn.IsZero() || j.sends[0].Time.Before(a.in.fanoutOn)) {
		a.fail(InvFailClosed, id+" (before the fan-out's switch)")
	}
	switch {
	case n != 1:
	case j.r.Job.Source == viaOutbox:
		f.OutboxExactlyOne++
	case j.r.Job.Source == viaFanout:
		f.DigestsOne++
	}
	// A cancelled job never runs; an effect before the cancel is
	// explained only when its claim was lost (a kill or a lost
	// response), which is when the cancel cannot know of it.
	if cancelled && n > 0 && (j.sends[n-1].Time.After(j.r.CancelAt) || explained == 0) {
		a.fail(InvCancelledRan, id)
		a.keepStory(id)
	}
	want := ""
	switch {
	case n > 0 && cancelled && explained > 0:
		want = string(client.StateCancelled)
	case n > 0:
		want = string(client.StateSucceeded)
	case cancelled:
		want = string(client.StateCancelled)
	case j.refusedAs != "":
		want = j.refusedAs
	case lettered && letter.Reason != "" && (letter.Status == deadletter.StatusDead || letter.Status == deadletter.StatusDropped):
		want = string(client.StateFailed)
		f.FailedAtEnd++
	default:
		a.fail(InvLost, id)
	}
	if want != state && (want != "" || terminal(state)) {
		a.fail(InvWrongState, id+" reads "+state+", ground truth "+orNone(want))
	}
	j.want = want
}

// requests checks the enqueue attempts: the API answers 5xx (or 409 in
// flight to a request that has no twin) only when a fault touched the
// request.
func (a *accountant) requests() {
	lone, batchKey := map[string]bool{}, map[string]bool{}
	for _, r := range a.in.results {
		lone[r.Job.IdemKey] = r.Job.Twins == 0 && !r.Job.batched()
		batchKey[r.Job.BatchKey] = r.Job.batched()
	}
	hit := touched(a.t.Faults)
	kills := a.midBatchKills()
	for _, at := range a.t.Attempts {
		touched := hit[at.IdemKey] || hit[message.DeriveMessageID(Caller, at.IdemKey)]
		if batchKey[at.IdemKey] && at.Status >= http.StatusInternalServerError && !at.Injected && !touched {
			touched = a.batchExplained(at.IdemKey, hit, &kills)
		}
		switch {
		case at.Injected:
		case at.Status >= http.StatusInternalServerError:
			a.f.Enqueue5xx++
			if touched {
				a.f.Enqueue5xxFaults++
			} else {
				a.fail(InvEnqueue5xx, fmt.Sprintf("%s (%d %s)", at.IdemKey, at.Status, strings.TrimSpace(at.Detail)))
			}
		case at.InFlight:
			a.f.InFlight409++
			if lone[at.IdemKey] && !touched {
				a.fail(InvInFlight, at.IdemKey)
			}
		}
	}
}

// outcomesAround lists a job's outcome lines, each with its time from at
// ("retry -12s, succeeded +3s"), or "none".
func (a *accountant) outcomesAround(id string, at time.Time) string {
	var parts []string
	for _, o := range a.t.Seen.Outcomes[id] {
		d := "?"
		if !at.IsZero() {
			d = fmt.Sprintf("%+.0fs", o.At.Sub(at).Seconds())
		}
		parts = append(parts, o.Line.Outcome+" "+d)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func terminal(state string) bool {
	switch client.State(state) {
	case client.StateSucceeded, client.StateFailed, client.StateCancelled:
		return true
	}
	return false
}

func orNone(s string) string {
	if s == "" {
		return "none (lost)"
	}
	return s
}
