package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/killpoint"
)

// after makes r a continuation of parent with policy.
func after(r, parent *result, policy client.AfterPolicy) {
	r.Job.After, r.Job.AfterPolicy = parent.Job.Index+1, policy
}

// batchJob adds a job of type typ in state as job at of the batch key
// that starts with job lead (its index; lead itself when at is 0). (A
// result's pointer holds only until the next job is added.)
func (w *world) batchJob(key string, lead, at int, state client.State) *result {
	r := w.job(client.TypeWelcome, state)
	if at == 0 {
		lead = r.Job.Index
	}
	r.Job.Lead, r.Job.BatchAt, r.Job.BatchKey = lead+1, at, key
	return r
}

// chainWorld: a parent that succeeded and its continuation that ran after
// it; a cancelled parent with an OnSucceeded continuation cancelled naming
// it and an OnAnyEnd one that ran; a failed parent (its letter dead, so it
// can be redriven) whose continuations, OnSucceeded and OnAnyEnd, still
// wait; a batch of two answered 202.
func chainWorld(t *testing.T) (*world, map[string]*result) {
	w := newWorld(t)
	r := map[string]*result{}
	r["ok"] = w.job(client.TypeWelcome, client.StateSucceeded)
	w.mail(r["ok"].JobID, time.Second)
	r["runs"] = w.job(client.TypePasswordReset, client.StateSucceeded)
	after(r["runs"], r["ok"], client.OnSucceeded)
	w.mail(r["runs"].JobID, 2*time.Second)
	r["gone"] = w.job(client.TypeWelcome, client.StateCancelled)
	r["gone"].Cancel = string(client.StateCancelled)
	r["refused"] = w.job(client.TypeWelcome, client.StateCancelled)
	after(r["refused"], r["gone"], client.OnSucceeded)
	w.truth.States[r["refused"].JobID] = client.Job{JobID: r["refused"].JobID, State: client.StateCancelled,
		LastReason: "the job it waits for, " + r["gone"].JobID + ", ended Cancelled"}
	r["anyEnd"] = w.job(client.TypeWelcome, client.StateSucceeded)
	after(r["anyEnd"], r["gone"], client.OnAnyEnd)
	w.mail(r["anyEnd"].JobID, 3*time.Second)
	r["failed"] = w.job(client.TypeWelcome, client.StateFailed)
	w.truth.Letters[r["failed"].JobID] = deadletter.Record{ID: r["failed"].JobID, Reason: "stored e-mail address is not a plain address", Status: deadletter.StatusDead}
	r["waits"] = w.job(client.TypeWelcome, client.StateAwaitingContinuation)
	after(r["waits"], r["failed"], client.OnSucceeded)
	r["waitsAny"] = w.job(client.TypeWelcome, client.StateAwaitingContinuation)
	after(r["waitsAny"], r["failed"], client.OnAnyEnd)
	b0 := w.batchJob("chaos-1-batch-9", 0, 0, client.StateSucceeded)
	w.mail(b0.JobID, time.Second)
	w.mail(w.batchJob("chaos-1-batch-9", b0.Job.Index, 1, client.StateSucceeded).JobID, time.Second)
	return w, r
}

func TestLedgerAcceptsContinuationsAndBatches(t *testing.T) {
	w, _ := chainWorld(t)
	// The batch's first try was killed mid-way (a 502): the kill explains it.
	w.truth.Attempts = []attempt{{IdemKey: "chaos-1-batch-9", Status: 502}, {IdemKey: "chaos-1-batch-9", Status: 202}}
	w.truth.Seen.Kills = []kill{{Step: killpoint.MidBatch}}
	l := w.ledger(nil)
	if b := broken(l); len(b) != 0 {
		t.Fatalf("broken %v; want none", b)
	}
	want := ChainFigures{Continuations: 5, Ran: 2, CancelledBy: 1, Waiting: 2, Batches: 1, BatchAccepted: 1, BatchJobs: 2, BatchKilled: 1}
	if l.Figures.Chain != want {
		t.Fatalf("chain figures %+v; want %+v", l.Figures.Chain, want)
	}
}

func TestLedgerNamesContinuationAndBatchBreaches(t *testing.T) {
	w, r := chainWorld(t)
	w.mail(r["refused"].JobID, 4*time.Second) // ran though its parent was cancelled
	w.truth.States[r["refused"].JobID] = client.Job{JobID: r["refused"].JobID, State: client.StateSucceeded}
	w.mail(r["waits"].JobID, 4*time.Second)    // ran though its parent failed
	w.mail(r["waitsAny"].JobID, 4*time.Second) // so did this one, under OnAnyEnd
	early := w.job(client.TypeWelcome, client.StateSucceeded)
	after(early, r["ok"], client.OnSucceeded)
	w.mail(early.JobID, 0) // before its parent's mail
	unnamed := w.job(client.TypeWelcome, client.StateCancelled)
	after(unnamed, r["gone"], client.OnSucceeded)
	// Half a batch made, never answered.
	h0 := w.batchJob("chaos-1-batch-20", 0, 0, client.StatePending)
	h0.Accepted = false
	made := h0.JobID
	w.batchJob("chaos-1-batch-20", h0.Job.Index, 1, client.StatePending).Accepted = false
	w.truth.BatchMade = map[string]bool{made: true}
	// Two 5xx to a batch, one kill: one is not explained.
	w.truth.Attempts = []attempt{{IdemKey: "chaos-1-batch-9", Status: 502}, {IdemKey: "chaos-1-batch-9", Status: 500, Detail: "x"}}
	w.truth.Seen.Kills = []kill{{Step: killpoint.MidBatch}}

	got := broken(w.ledger(nil))
	cont := strings.Join(got[InvContinuation], "|")
	for _, want := range []string{
		r["refused"].JobID + " ran though its parent " + r["gone"].JobID + " ended Cancelled (OnSucceeded)",
		r["waits"].JobID + " ran though its parent " + r["failed"].JobID + " ended Failed (OnSucceeded)",
		r["waitsAny"].JobID + " ran though its parent " + r["failed"].JobID + " ended Failed (OnAnyEnd)",
		early.JobID + " mailed before its parent " + r["ok"].JobID,
		unnamed.JobID + " cancelled with the reason , not naming its parent " + r["gone"].JobID,
	} {
		if !strings.Contains(cont, want) {
			t.Errorf("%s: %v; want %q among them", InvContinuation, got[InvContinuation], want)
		}
	}
	if !slices.Equal(got[InvBatch], []string{"chaos-1-batch-20"}) {
		t.Errorf("%s: %v; want the half-made batch", InvBatch, got[InvBatch])
	}
	if len(got[InvEnqueue5xx]) != 1 || !strings.HasPrefix(got[InvEnqueue5xx][0], "chaos-1-batch-9 (500") {
		t.Errorf("%s: %v; want the batch's second 5xx", InvEnqueue5xx, got[InvEnqueue5xx])
	}
}

// An OnAnyEnd continuation that still waits at the load's end for a
// parent that failed (it could be redriven) runs once the clock has moved
// past that parent's record's life (the parent then counts as Expired):
// its mail after the clock moved is its own, owed once.
func TestClockLedgerRunsWhatWaitedForAFailedParentOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mails  int
		broken string
	}{
		{"ran once", 1, ""},
		{"never ran", 0, InvLost},
		{"ran twice", 2, InvTwiceJump},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, r := chainWorld(t)
			_, run, after := clockWorld(t)
			for i := range tc.mails {
				mid := "ses-late-" + string(rune('a'+i))
				after.Mails = append(after.Mails, mid)
				after.Sends = append(after.Sends, send{JobID: r["waitsAny"].JobID, MessageID: mid, Status: 200, Time: w.at.Add(40 * day)})
			}
			got := broken(w.ledger(func(in *ledgerInput) { in.clock, in.clockTruth = run, after }))
			if tc.broken == "" {
				if len(got) != 0 {
					t.Fatalf("broken %v; want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(strings.Join(got[tc.broken], "|"), r["waitsAny"].JobID) {
				t.Fatalf("broken %v; want %s naming %s alone", got, tc.broken, r["waitsAny"].JobID)
			}
		})
	}
}
