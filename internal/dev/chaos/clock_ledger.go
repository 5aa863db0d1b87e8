package chaos

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/message"
)

// ClockFigures are the clock campaign's counts.
type ClockFigures struct {
	// Jumps are the clock's moves, in days (fractions for the sweep's hour
	// and the late firings).
	Jumps []float64 `json:"jumps"`
	// OffsetDays is how far ahead the clock ended.
	OffsetDays float64        `json:"offsetDays"`
	Jobs       int            `json:"jobs"`
	Fates      map[string]int `json:"fates"` // by fate (and "swept")
	Repeats    int            `json:"repeats"`
	Reaped     int            `json:"reaped"`
	// Mails are the mails of the clock's jobs, its digests and relays.
	Mails int `json:"mails"`
	// Explained counts the extra mails by what explains them.
	Explained map[string]int `json:"explained"`
	// The fan-out's week: partners, the digests with exactly one mail,
	// the odd ids and how many were recorded with their reason, whether
	// the switch went off mid-week.
	Week          string `json:"week"`
	Partners      int    `json:"partners"`
	PartnersOne   int    `json:"partnersExactlyOne"`
	OddIDs        int    `json:"oddIds"`
	OddRecorded   int    `json:"oddRecorded"`
	SwitchedOff   bool   `json:"switchedOffMidWeek"`
	RelayCases    int    `json:"relayCases"`
	SweptOrphans  int    `json:"orphans"`
	LeftoverAtEnd int    `json:"leftoverAtEnd"`
}

// clock judges the clock campaign: every mail SES took since it began
// belongs to one of its jobs (a stage's job, a partner's digest of its week,
// a relay case's job), and each of those ran as its fate says.
func (a *accountant) clock() {
	run, t := a.in.clock, a.in.clockTruth
	f := &ClockFigures{Fates: map[string]int{}, Explained: map[string]int{}, Repeats: run.Repeats, Reaped: run.Reaped,
		Week: run.Week.Week, Partners: len(run.Week.Partners), OddIDs: len(run.Week.Odd), SwitchedOff: run.Week.SwitchedOff,
		RelayCases: len(run.Relay), SweptOrphans: len(run.Orphans), LeftoverAtEnd: len(run.Leftover), OffsetDays: days(run.Offset)}
	a.f.Clock = f
	for _, d := range run.Jumps {
		f.Jumps = append(f.Jumps, days(d))
	}
	jobs := map[string]*perJob{}
	add := func(id string) *perJob {
		j := &perJob{r: result{JobID: id, Accepted: true}, explains: map[string]int{}}
		jobs[id] = j
		return j
	}
	for _, j := range run.Jobs {
		add(j.ID)
		f.Jobs++
		f.Fates[j.Fate]++
		if j.Swept {
			f.Fates["swept"]++
		}
	}
	digests := map[string]string{} // job id: partner
	for _, u := range run.Week.Partners {
		id := message.DeriveMessageID(digest.Caller, digest.DigestKey(u, run.Week.Week))
		digests[id] = u
		add(id)
	}
	for _, rc := range run.Relay {
		add(rc.First)
		add(rc.Second)
	}
	for id := range a.afterFailed {
		add(id)
	}
	byMessage := map[string]send{}
	for _, s := range t.Sends[min(run.sendsBefore, len(t.Sends)):] {
		if s.MessageID != "" {
			byMessage[s.MessageID] = s
		}
	}
	for _, id := range t.Mails {
		if run.MailsBefore[id] {
			continue
		}
		s, ok := byMessage[id]
		if !ok || jobs[s.JobID] == nil {
			a.fail(InvForeignMail, "after the clock moved: "+id)
			continue
		}
		jobs[s.JobID].sends = append(jobs[s.JobID].sends, s)
		f.Mails++
	}
	explain(jobs, t)
	extra := func(j *perJob, allowed int) int {
		n := len(j.sends) - allowed
		if n <= 0 {
			return 0
		}
		explained := 0
		for why, k := range j.explains {
			explained += k
			f.Explained[why] += min(k, n)
		}
		return max(n-explained, 0)
	}
	for _, cj := range run.Jobs {
		j, what := jobs[cj.ID], fmt.Sprintf("%s (stage %d, %s", cj.ID, cj.Stage+1, cj.Fate)
		if cj.Swept {
			what += ", swept"
		}
		what += ")"
		switch {
		case cj.Fate == FateCancelled && len(j.sends) > 0:
			a.fail(InvCancelledJump, fmt.Sprintf("%s mailed %d times; its cancel answered %s", what, len(j.sends), cj.Answered))
		case cj.Fate == FateCancelled:
		case len(j.sends) == 0:
			a.fail(InvLost, what+" never ran")
		case extra(j, 1) > 0:
			a.fail(InvTwiceJump, fmt.Sprintf("%s mailed %d times", what, len(j.sends)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(a.afterFailed)) {
		// Its Failed parent's record is gone on the moved clock: it counts
		// as Expired, and OnAnyEnd runs its continuation, once.
		j, what := jobs[id], id+" (OnAnyEnd, after a Failed parent)"
		switch {
		case a.afterFailed[id] && len(j.sends) == 0:
			a.fail(InvLost, what+" never ran once its parent's record was gone")
		case extra(j, 1) > 0:
			a.fail(InvTwiceJump, fmt.Sprintf("%s mailed %d times", what, len(j.sends)))
		}
	}
	for _, id := range slices.Sorted(maps.Keys(digests)) {
		j, u := jobs[id], digests[id]
		switch {
		case len(j.sends) == 0:
			a.fail(InvDigestWeek, fmt.Sprintf("%s got no digest of %s", u, run.Week.Week))
		case extra(j, 1) > 0:
			a.fail(InvDigestWeek, fmt.Sprintf("%s got %d digests of %s", u, len(j.sends), run.Week.Week))
		default:
			f.PartnersOne++
		}
	}
	for _, odd := range run.Week.Odd {
		if run.Week.Recorded[odd] == "" {
			a.fail(InvDigestWeek, fmt.Sprintf("the odd id %q was not recorded with a reason in %s", odd, run.Week.Week))
			continue
		}
		f.OddRecorded++
	}
	for _, rc := range run.Relay {
		first, second := jobs[rc.First], jobs[rc.Second]
		switch {
		case len(first.sends) == 0:
			a.fail(InvLost, "relay case "+rc.Key+": its job "+rc.First+" never ran")
		case extra(first, 1) > 0:
			a.fail(InvTwiceJump, fmt.Sprintf("relay case %s: its job %s mailed %d times", rc.Key, rc.First, len(first.sends)))
		}
		if extra(second, 0) > 0 {
			a.fail(InvTwiceJump, fmt.Sprintf("relay case %s: the item relayed again made a second job %s, which mailed", rc.Key, rc.Second))
		}
	}
	for _, id := range run.Orphans {
		a.fail(InvOrphans, id+": its schedule was left after the sweep ran")
	}
	for _, id := range run.Leftover {
		a.fail(InvOrphans, id+": its schedule was left after the last jump")
	}
}

func days(d time.Duration) float64 { return float64(d) / float64(day) }
