package chaos

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
)

// The explanations of an extra effect, as the ledger names them.
const (
	whyLostResponse = "lost SES response"
	whyKilled       = "killed between effect and claim"
	whyClaimFailed  = "claim failed after the effect"
	whyDeadline     = "deadline retry after the effect"
)

// explain counts, for every job, what can explain an extra effect: a mail
// whose response the function never got (dropped by a fault, or its
// process gone), a mail sent during an invocation that never came back
// (its process killed before the claim), a claim that failed after the
// effect, a mail sent during an invocation that came back with the job
// retried because its deadline came first.
func explain(jobs map[string]*perJob, t *truth) {
	for _, e := range t.Faults {
		if e.Service == "ses" && e.Operation == "SendEmail" && (e.Kind == faults.Drop || e.Kind == faults.Drop500) {
			if j := jobs[mailJobID(e.Body())]; j != nil {
				j.explains[whyLostResponse]++
			}
		}
	}
	sendsOf := map[string][]send{}
	for _, s := range t.Sends {
		if s.MessageID == "" {
			continue
		}
		sendsOf[s.JobID] = append(sendsOf[s.JobID], s)
		if j := jobs[s.JobID]; j != nil && s.CallerGone {
			j.explains[whyLostResponse]++
		}
	}
	claimsOf := map[string][]time.Time{}
	for _, c := range t.Claims {
		claimsOf[c.JobID] = append(claimsOf[c.JobID], c.Time)
	}
	for _, c := range t.Seen.Calls {
		if !c.Lost {
			continue
		}
		for _, id := range c.JobIDs {
			if j := jobs[id]; j != nil && cut(sendsOf[id], claimsOf[id], c) {
				j.explains[whyKilled]++
			}
		}
	}
	for _, c := range t.Seen.Calls {
		if c.Lost {
			continue // its mails are the kill's to explain
		}
		for _, id := range distinct(c.JobIDs) {
			if j := jobs[id]; j != nil && interruptedIn(t.Seen.Outcomes[id], c) && cut(unanswered(sendsOf[id]), claimsOf[id], c) {
				j.explains[whyDeadline]++
			}
		}
	}
	for id, outs := range t.Seen.Outcomes {
		j := jobs[id]
		if j == nil {
			continue
		}
		for _, o := range outs {
			if o.Line.Outcome == "claim-failed" || strings.Contains(o.Line.Reason, "lease lost") {
				j.explains[whyClaimFailed]++
			}
		}
	}
}

// interrupted reports whether an outcome line is the runner's retry of a
// record whose invocation's deadline (or cancellation) came first: the
// delivery's context ended, maybe after SES had accepted the mail and
// before the SDK had read the answer, and the runner released the lease
// and let SQS retry. The runner writes it as "retry", with the reason
// "interrupted by the invocation's deadline" (the record's work ended by
// its context) or "the invocation's deadline came first" (the record never
// started); a plain failure's retry ("attempt N of 5 failed") is not one.
func interrupted(o devstack.Outcome) bool {
	return o.Outcome == "retry" && strings.Contains(o.Reason, "invocation's deadline")
}

// interruptedIn reports whether one of a job's outcome lines is an
// interrupted retry written by the invocation c: by c's function, while c
// ran.
func interruptedIn(outs []outcome, c invocation) bool {
	return slices.ContainsFunc(outs, func(o outcome) bool {
		return interrupted(o.Line) && o.Line.Function == c.Function && !o.At.Before(c.Start) && !o.At.After(c.End)
	})
}

// unanswered returns the sends whose answer could still reach the function
// (the mails "lost SES response" does not already explain).
func unanswered(sends []send) []send {
	return slices.DeleteFunc(slices.Clone(sends), func(s send) bool { return s.CallerGone })
}

// distinct returns ids without repeats (a batch can hold two copies of a
// job; one invocation retries a job's effect at most once).
func distinct(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// cut reports whether the invocation c (lost, or interrupted by its
// deadline) fell between a job's effect and its claim: a mail of the job
// was asked for during it (SES may answer after the invocation is gone: a
// process killed mid-send leaves its request to finish upstream), and no
// claim of the job was applied between that mail and the invocation's end.
func cut(sends []send, claims []time.Time, c invocation) bool {
	for _, s := range sends {
		began := s.Began
		if began.IsZero() {
			began = s.Time
		}
		if began.Before(c.Start) || began.After(c.End) {
			continue
		}
		claimed := slices.ContainsFunc(claims, func(at time.Time) bool { return !at.Before(s.Time) && !at.After(c.End) })
		if !claimed {
			return true
		}
	}
	return false
}

// idPattern matches what names a request or a job in a call's body: the
// campaign's Idempotency-Keys and job ids (UUIDs).
var idPattern = regexp.MustCompile(`chaos-[0-9]+-[0-9]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// touched returns every Idempotency-Key and job id an AWS fault touched
// (named in the faulted call's body).
func touched(events []faults.Event) map[string]bool {
	out := map[string]bool{}
	for _, e := range events {
		for _, m := range idPattern.FindAll(e.Body(), -1) {
			out[string(m)] = true
		}
	}
	return out
}
