package chaos

// Invariant is one promise checked, with the jobs (or requests) that break
// it.
type Invariant struct {
	Name  string   `json:"name"`
	Count int      `json:"count"`
	IDs   []string `json:"ids,omitempty"`
}

// OK reports whether nothing breaks it.
func (i Invariant) OK() bool { return i.Count == 0 }

// Failed reports whether any invariant is broken.
func (l *Ledger) Failed() bool {
	for _, i := range l.Invariants {
		if !i.OK() {
			return true
		}
	}
	return false
}

// The invariants, by name.
const (
	InvLost         = "accepted jobs with no effect, neither cancelled nor dead-lettered reading Failed"
	InvExtra        = "extra effects no kill or lost response explains"
	InvWrongState   = "wrong states (GET disagrees with ground truth)"
	InvEnqueue5xx   = "enqueue 5xx outside injected faults"
	InvInFlight     = "409 in flight to a lone request outside injected faults"
	InvFailClosed   = "fail-closed jobs that ran while their switch was off"
	InvCancelledRan = "cancelled jobs that ran"
	InvNotAccepted  = "enqueues never accepted"
	InvForeignMail  = "mails SES holds that no job sent"
	InvNotQuiet     = "stack not quiet at the end"
	// InvRefusedJob: a transaction that failed its condition wrote nothing,
	// so its outbox item made no job and no mail.
	InvRefusedJob = "outbox transactions refused by their condition that made a job"
	// InvTickOff: a tick while the fan-out's switch is off is skipped
	// (Succeeded, lastOutcome skipped) and makes no digest.
	InvTickOff = "ticks while the fan-out was off not read Succeeded/skipped, or that made digests"
	// InvCancelledJump: a job cancelled before a jump of the clock never
	// runs, even when its schedule's delete failed and it fires late.
	InvCancelledJump = "cancelled jobs that ran across a clock jump"
	// InvTwiceJump: across a jump (a leftover schedule of a job run now, a
	// late or repeated firing) or a re-relay of an outbox item, a job runs
	// once, extra mails only where a kill or a lost response explains them.
	InvTwiceJump = "jobs run twice across a jump or a re-relay without an allowed cause"
	// InvDigestWeek: with the fan-out switched off and on mid-week and odd
	// ids in the directory, every partner gets one digest of the week, and
	// every odd id is recorded with its reason.
	InvDigestWeek = "partners without one digest of the week, or odd ids not recorded with their reason"
	// InvOrphans: no schedule outlives its ended job once the hourly sweep
	// ran, nor any of the clock's jobs the last jump.
	InvOrphans = "schedules of ended jobs left after the sweep or the last jump"
	// InvContinuation: a continuation runs once after its parent's end
	// when its policy runs it, and otherwise never: it reads Cancelled
	// with a reason naming its parent, or keeps waiting for a parent that
	// can still be redriven.
	InvContinuation = "continuations run against their policy, before their parent, or cancelled without naming it"
	// InvBatch: a batch is all or nothing, whatever killed its accept.
	InvBatch = "batches with some of their jobs made and others not"
)

// invariantNames are the invariants in the ledger's order.
var invariantNames = []string{InvLost, InvExtra, InvWrongState, InvEnqueue5xx, InvInFlight, InvFailClosed, InvCancelledRan,
	InvNotAccepted, InvForeignMail, InvRefusedJob, InvTickOff, InvContinuation, InvBatch, InvNotQuiet}

// clockInvariantNames are the clock campaign's invariants, after the
// others (a campaign without the clock has none of them).
var clockInvariantNames = []string{InvCancelledJump, InvTwiceJump, InvDigestWeek, InvOrphans}
