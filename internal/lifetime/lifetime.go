// Package lifetime is the one place the bundle derives how long each guard
// lives from what it guards (docs/storage.md, "How long each guard lives").
//
// The rule: a record that stops a second run of a job lives at least as
// long as anything that can still deliver that run. A job due at runAt can
// be delivered until its one-time schedule has fired (at runAt, retried by
// the scheduler for up to SchedulerRetryWindow), its message has lived out
// the work queue's retention, and a dead letter of it has lived out the
// dead-letter queue's; LastDelivery is that instant. Each guard's life is
// the longer of its own floor (counted from when it is written) and the
// last delivery it must stop. (A chaos build told to make the mutation
// short-guards, killpoint.ShortGuards, gives every guard its floor alone,
// to prove the campaign sees it; a release build never does: floorOnly is
// a constant false there.)
package lifetime

import "time"

const day = 24 * time.Hour

// What the guards guard against: the longest life of each thing that can
// deliver a job again. Template tests keep the queues' and the schedules'
// settings equal to these.
const (
	// MaxRunAhead is the furthest ahead a job may be due (runAt).
	MaxRunAhead = 365 * day
	// SchedulerRetryWindow is how long EventBridge Scheduler keeps trying
	// to deliver a one-time schedule's message or a tick after its time
	// (the target's RetryPolicy.MaximumEventAgeInSeconds) before it
	// dead-letters it.
	SchedulerRetryWindow = day
	// QueueRetention is the work queues' message retention
	// (MessageRetentionPeriod).
	QueueRetention = 4 * day
	// DLQRetention is the dead-letter queue's message retention, the SQS
	// maximum.
	DLQRetention = 14 * day
	// OutboxItem is how long an outbox item lives (its TTL).
	OutboxItem = day
	// StreamRetention is how long a DynamoDB stream keeps a record: an
	// item can be relayed again until then, after its TTL too.
	StreamRetention = day
)

// The floors: how long each guard lives at least, counted from when it is
// written.
const (
	// Marker is the floor of a settled effect marker (done, failed,
	// cancelled): longer than a message can live in a work queue plus the
	// dead-letter queue, so a redriven letter still finds it.
	Marker = 30 * day
	// TerminalRecord is how long a job record and its dedup pointer are
	// kept after the job became terminal.
	TerminalRecord = 14 * day
	// StoredAnswer is the floor of the request layer's stored answer (an
	// Idempotency-Key's record).
	StoredAnswer = day
	// RelayDecision is the floor of what the outbox relay decided for an
	// item: as long as the item can be relayed again (its TTL, then the
	// stream's retention of its last record).
	RelayDecision = OutboxItem + StreamRetention
)

// LastDelivery is the last instant at which a job due at runAt can still be
// delivered to a worker without a person redriving it: its schedule fired
// as late as the scheduler retries, its message kept as long as the work
// queue keeps it, then as long as the dead-letter queue does.
func LastDelivery(runAt time.Time) time.Time {
	return runAt.Add(SchedulerRetryWindow + QueueRetention + DLQRetention)
}

// Until is when a guard written at now, with the given floor, for a job due
// at runAt expires: floor after the later of now and runAt, and never
// before the job's LastDelivery. A zero runAt (a job without a run time)
// counts from now alone.
func Until(now, runAt time.Time, floor time.Duration) time.Time {
	if runAt.IsZero() || floorOnly {
		return now.Add(floor)
	}
	until := now.Add(floor)
	if due := runAt.Add(floor); due.After(until) {
		until = due
	}
	if last := LastDelivery(runAt); last.After(until) {
		return last
	}
	return until
}

// ActiveRecord is when the record and dedup pointer of a job that is not
// yet terminal, due at runAt, expire: it can stay active until its message
// outlived the work queue (then it reads Expired) and is kept
// TerminalRecord after that, like any terminal record, and never before
// its last delivery.
func ActiveRecord(runAt time.Time) time.Time {
	return Until(runAt.Add(SchedulerRetryWindow+QueueRetention), runAt, TerminalRecord)
}

// Guard is the run time a guard of a job due at runAt is kept past (the
// engine's Kind.Due): runAt itself, or none in the chaos build's
// short-guards mutation, whose guards live their floor alone.
func Guard(runAt time.Time) time.Time {
	if floorOnly {
		return time.Time{}
	}
	return runAt
}
