package jobs

import (
	"slices"
	"time"

	"github.com/runstwice/runstwice/engine"
)

// State is a job's state as a caller sees it.
type State string

// The job states. AwaitingContinuation, Pending, Enqueued, Scheduled,
// Parked, Failed and Cancelled are stored on the record; Processing, Succeeded and Expired are derived.
// Succeeded is also stored when a worker's effect ran and its marker could
// not be claimed (EventUnclaimed): no marker says so then.
const (
	// StateAwaitingContinuation: the job waits for another one, its parent
	// (its after), to end; its message is sent once the parent ended as its
	// afterPolicy allows (it is Cancelled if the parent ended otherwise).
	// It is active (it holds its key) and never expires while it waits.
	StateAwaitingContinuation State = "AwaitingContinuation"
	// StatePending: the job is reserved under its key but SQS has not yet
	// confirmed its message (the enqueue is in flight, or crashed, or SQS
	// failed). A retry of the same request, or after PendingTimeout any
	// request for the same key, sends the message again under the same id.
	StatePending State = "Pending"
	// StateEnqueued: the message is in its queue.
	StateEnqueued State = "Enqueued"
	// StateScheduled: the message is in its queue with a delay that has not
	// yet passed.
	StateScheduled State = "Scheduled"
	// StateParked: its kill switch is off; the message is re-sent with a
	// delay until the switch is on again. A parked job never expires.
	StateParked State = "Parked"
	// StateProcessing: a worker holds an unexpired lease on the job's marker.
	StateProcessing State = "Processing"
	// StateSucceeded: the job's marker is claimed (or, when the claim
	// failed after the effect, its record says so): its effect is done.
	StateSucceeded State = "Succeeded"
	// StateFailed: the job was dead-lettered (or its effect failed after a
	// claim-then-effect claim).
	StateFailed State = "Failed"
	// StateCancelled: the job was cancelled before it ran; it never runs.
	StateCancelled State = "Cancelled"
	// StateExpired: the job was neither processed nor failed within the
	// queue's retention after its run time: its message can no longer be in
	// its queue.
	StateExpired State = "Expired"
)

// States lists every state.
var States = []State{StateAwaitingContinuation, StatePending, StateEnqueued, StateScheduled, StateParked, StateProcessing,
	StateSucceeded, StateFailed, StateCancelled, StateExpired}

// Active reports whether a job in state s still holds its key: enqueue
// dedups onto it.
func (s State) Active() bool {
	switch s {
	case StateAwaitingContinuation, StatePending, StateEnqueued, StateScheduled, StateParked, StateProcessing:
		return true
	}
	return false
}

// Terminal reports whether s is final: Succeeded, Failed, Cancelled or
// Expired.
func (s State) Terminal() bool {
	switch s {
	case StateSucceeded, StateFailed, StateCancelled, StateExpired:
		return true
	}
	return false
}

// Event is something that writes a job record.
type Event string

// The events of a job record's life, declared as the states are: one
// documented constant each.
const (
	// EventSent: SQS accepted the message (without a delay).
	EventSent Event = "sent"
	// EventSentDelayed: SQS accepted the message with a delay.
	EventSentDelayed Event = "sent-delayed"
	// EventParked: a worker found the job's kill switch off and parked it.
	EventParked Event = "parked"
	// EventFailed: the job was dead-lettered.
	EventFailed Event = "failed"
	// EventCancelled: the caller (or an operator) cancelled the job.
	EventCancelled Event = "cancelled"
	// EventRedriven: an operator sent a dead letter back to its queue.
	EventRedriven Event = "redriven"
	// EventReleased: the parent of a job that awaits it ended as the job's
	// afterPolicy runs it: the record is Pending until its message is sent
	// (Promotion), as a new job's is. Only one write makes it, so a
	// continuation is sent by one release however often its parent's end
	// is seen.
	EventReleased Event = "released"
	// EventUnclaimed: a worker's effect ran but its marker could not be
	// claimed, even after retries (ClaimFailed). The record itself says
	// Succeeded, since no marker will: the job is done, never Failed.
	EventUnclaimed Event = "unclaimed"
)

// transitions is the state machine of the stored state: from → event → to.
// A job is reserved Pending; what is not listed is refused (a terminal
// record is never overwritten by a stale worker).
var transitions = map[State]map[Event]State{
	StateAwaitingContinuation: {
		EventReleased: StatePending, EventCancelled: StateCancelled,
	},
	StatePending: {
		EventSent: StateEnqueued, EventSentDelayed: StateScheduled, EventParked: StateParked,
		EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded,
	},
	StateEnqueued: {
		EventSent: StateEnqueued, EventSentDelayed: StateScheduled, EventParked: StateParked,
		EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded,
	},
	StateScheduled: {
		EventSent: StateScheduled, EventSentDelayed: StateScheduled, EventParked: StateParked,
		EventFailed: StateFailed, EventCancelled: StateCancelled, EventUnclaimed: StateSucceeded,
	},
	StateParked: {
		EventParked: StateParked, EventFailed: StateFailed, EventCancelled: StateCancelled,
		EventUnclaimed: StateSucceeded,
	},
	StateSucceeded: {
		// Only a worker whose claim failed stores it; a retry of that
		// write finds it done. Nothing else moves it: the effect ran.
		EventUnclaimed: StateSucceeded,
	},
	StateFailed: {
		// A redriven job is Pending until its message is sent again, then
		// Enqueued (EventSent), as a new job is.
		EventFailed: StateFailed, EventRedriven: StatePending,
	},
	StateCancelled: {
		EventCancelled: StateCancelled,
	},
}

// Transition returns the stored state event moves from to, and whether the
// event is allowed in from at all.
func Transition(from State, ev Event) (State, bool) {
	to, ok := transitions[from][ev]
	return to, ok
}

// Sources lists the stored states in which ev is allowed, sorted: the
// condition of the write that records ev.
func Sources(ev Event) []State {
	var out []State
	for from, evs := range transitions {
		if _, ok := evs[ev]; ok {
			out = append(out, from)
		}
	}
	slices.Sort(out)
	return out
}

// Derive returns the state a caller sees of a job whose record says stored,
// whose message becomes visible at runAt, and whose marker m exists when
// hasMarker, at now. In order:
//
//   - cancelled (a tombstone marker, or the record): Cancelled;
//   - a claimed marker: Succeeded (the effect is done, whatever the record
//     says: a redriven job that then ran, a twin that finished); a record
//     that says Succeeded (its claim failed after the effect): Succeeded,
//     even while the lease of that worker runs;
//   - a record marked Failed, or a marker that failed after its claim: Failed;
//   - an unexpired lease: Processing;
//   - a record marked Parked: Parked (it never expires while parked);
//   - a record awaiting its parent: AwaitingContinuation (it has no message
//     to outlive);
//   - no marker (or an expired lease) and now ≥ runAt + QueueRetention
//     (for a job that may wait in a one-time schedule, also + the
//     scheduler's retry window: Job.GoneAt):
//     Expired, unless the record is Pending: a Pending job has no message
//     confirmed in a queue to outlive, and any request for its key resumes
//     it (its message is sent then, and its runAt moves to that send);
//   - Scheduled whose runAt has passed: Enqueued;
//   - otherwise the record's state (Pending, Enqueued, Scheduled).
func Derive(stored State, runAt time.Time, m engine.Record, hasMarker bool, now time.Time) State {
	return derive(stored, runAt, runAt.Add(QueueRetention), m, hasMarker, now)
}

// derive is Derive with the instant goneAt from which the job's message can
// no longer be in its queue (Job.GoneAt).
func derive(stored State, runAt, goneAt time.Time, m engine.Record, hasMarker bool, now time.Time) State {
	switch {
	case stored == StateCancelled || (hasMarker && m.State == engine.StateCancelled):
		return StateCancelled
	case hasMarker && m.Processed(), stored == StateSucceeded:
		return StateSucceeded
	case stored == StateFailed || (hasMarker && m.State == engine.StateFailed):
		return StateFailed
	case hasMarker && m.LeaseActive(now):
		return StateProcessing
	case stored == StateParked:
		return StateParked
	case stored == StateAwaitingContinuation:
		return stored
	case stored != StatePending && !now.Before(goneAt):
		return StateExpired
	case stored == StateScheduled && !now.Before(runAt):
		return StateEnqueued
	}
	return stored
}
