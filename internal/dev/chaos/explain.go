package chaos

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/dev/faults"
)

// explain counts, for every job, what can explain an extra effect: a mail
// whose response the function never got (dropped by a fault, or its
// process gone), a mail sent during an invocation that never came back
// (its process killed before the claim), a claim that failed after the
// effect.
func explain(jobs map[string]*perJob, t *truth) {
	for _, e := range t.Faults {
		if e.Service == "ses" && e.Operation == "SendEmail" && (e.Kind == faults.Drop || e.Kind == faults.Drop500) {
			if j := jobs[mailJobID(e.Body())]; j != nil {
				j.explains["lost SES response"]++
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
			j.explains["lost SES response"]++
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
				j.explains["killed between effect and claim"]++
			}
		}
	}
	for id, outs := range t.Seen.Outcomes {
		j := jobs[id]
		if j == nil {
			continue
		}
		for _, o := range outs {
			if o.Outcome == "claim-failed" || strings.Contains(o.Reason, "lease lost") {
				j.explains["claim failed after the effect"]++
			}
		}
	}
}

// cut reports whether the lost invocation c fell between a job's effect and
// its claim: a mail of the job went out during it, and no claim of the job
// was applied between that mail and the invocation's end.
func cut(sends []send, claims []time.Time, c invocation) bool {
	for _, s := range sends {
		if s.Time.Before(c.Start) || s.Time.After(c.End) {
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
