package chaos

import (
	"cmp"
	"slices"
	"strings"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/enqueue"
	"github.com/runstwice/runstwice/internal/killpoint"
)

// ChainFigures are the ledger's counts of continuations and batches.
type ChainFigures struct {
	// Continuations accepted, and how they ended: run (a mail), cancelled
	// by their parent's end (with a reason naming it), still waiting for a
	// parent that failed and can be redriven (or waits itself).
	Continuations int `json:"continuations"`
	Ran           int `json:"ran"`
	CancelledBy   int `json:"cancelledByParent"`
	Waiting       int `json:"waiting"`
	// Batches sent, accepted, and their jobs; batch requests answered 5xx
	// that a kill of the accept explains.
	Batches       int `json:"batches"`
	BatchAccepted int `json:"batchesAccepted"`
	BatchJobs     int `json:"batchJobs"`
	BatchKilled   int `json:"batch5xxKilled"`
}

// continuations judges the continuations after the jobs they wait for,
// each chain in plan order: one whose parent's end its policy runs must
// run once, after its parent's first mail; one its policy refuses must
// never run, and read Cancelled with a reason naming its parent (the
// parent was cancelled) or AwaitingContinuation (the parent failed and can
// still be redriven, or waits itself).
func (a *accountant) continuations(jobs map[string]*perJob) {
	byIndex := map[int]*perJob{}
	var ids []string
	for id, j := range jobs {
		if j.r.Job.Source == viaFanout {
			continue
		}
		byIndex[j.r.Job.Index] = j
		if j.r.Job.continuation() {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(x, y string) int { return cmp.Compare(jobs[x].r.Job.Index, jobs[y].r.Job.Index) })
	f := &a.f.Chain
	for _, id := range ids {
		k := jobs[id]
		p := byIndex[k.r.Job.parent()]
		if p == nil { // its parent was never accepted: it was sent as a job of its own
			a.judge(id, k)
			continue
		}
		f.Continuations++
		k.refusedAs = refusedAs(p.want, k.r.Job.AfterPolicy)
		a.judge(id, k)
		n, parent := len(k.sends), p.r.JobID
		switch {
		case k.refusedAs != "" && n > 0:
			a.fail(InvContinuation, id+" ran though its parent "+parent+" ended "+orNone(p.want)+" ("+string(k.r.Job.AfterPolicy)+")")
			a.keepStory(id)
		case n > 0 && len(p.sends) > 0 && k.sends[0].Time.Before(p.sends[0].Time):
			a.fail(InvContinuation, id+" mailed before its parent "+parent)
			a.keepStory(id)
		case k.refusedAs == string(client.StateCancelled) && k.r.Cancel == "" && !strings.Contains(a.t.States[id].LastReason, parent):
			a.fail(InvContinuation, id+" cancelled with the reason "+a.t.States[id].LastReason+", not naming its parent "+parent)
		}
		switch {
		case n > 0:
			f.Ran++
		case k.refusedAs == string(client.StateCancelled):
			f.CancelledBy++
		case k.refusedAs != "":
			f.Waiting++
			if p.want == string(client.StateFailed) && k.r.Job.AfterPolicy == client.OnAnyEnd &&
				a.t.States[id].State == client.StateAwaitingContinuation {
				a.afterFailed[id] = !k.r.Job.Poisoned
			}
		}
	}
}

// refusedAs is what a continuation with policy reads when its parent must
// read parentWant: "" when the parent's end runs it.
func refusedAs(parentWant string, policy client.AfterPolicy) string {
	switch client.State(parentWant) {
	case client.StateAwaitingContinuation:
		return parentWant // it has not ended
	case client.StateCancelled:
		if policy != client.OnAnyEnd {
			return string(client.StateCancelled)
		}
	case client.StateFailed:
		// Its letter can still be redriven: under either policy it waits.
		return string(client.StateAwaitingContinuation)
	}
	return ""
}

// batches checks that each batch is all or nothing: a batch answered 202
// has every job (the judge checks each); one never answered made all of
// its jobs (its finisher completed it) or none.
func (a *accountant) batches() {
	type batch struct{ jobs, accepted, made int }
	byKey := map[string]*batch{}
	var keys []string
	for _, r := range a.in.results {
		if !r.Job.batched() {
			continue
		}
		b := byKey[r.Job.BatchKey]
		if b == nil {
			b = &batch{}
			byKey[r.Job.BatchKey] = b
			keys = append(keys, r.Job.BatchKey)
		}
		b.jobs++
		if r.Accepted {
			b.accepted++
		}
		if a.t.BatchMade[r.Job.JobID] {
			b.made++
		}
	}
	f := &a.f.Chain
	for _, key := range keys {
		b := byKey[key]
		f.Batches++
		f.BatchJobs += b.jobs
		switch {
		case b.accepted == b.jobs:
			f.BatchAccepted++
		case b.accepted > 0 || (b.made > 0 && b.made < b.jobs):
			a.fail(InvBatch, key)
		}
	}
}

// batchExplained reports whether a 5xx to the batch request with key is
// explained: a fault touched the batch or one of its jobs, or a kill of
// the accept (killpoint.MidBatch) is left to explain it (*kills counts
// those not yet used).
func (a *accountant) batchExplained(key string, hit map[string]bool, kills *int) bool {
	if hit[enqueue.BatchID(Caller, key)] {
		return true
	}
	for _, r := range a.in.results {
		if r.Job.BatchKey == key && hit[r.Job.JobID] {
			return true
		}
	}
	if *kills > 0 {
		*kills--
		a.f.Chain.BatchKilled++
		return true
	}
	return false
}

// midBatchKills counts the kills of a batch's accept.
func (a *accountant) midBatchKills() int {
	n := 0
	for _, k := range a.t.Seen.Kills {
		if k.Step == killpoint.MidBatch {
			n++
		}
	}
	return n
}
