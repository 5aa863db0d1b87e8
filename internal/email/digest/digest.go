// Package digest is the weekly partner digest fan-out,
// email.partner-digest-fanout.v1: the tick type of the recurring schedule
// partner-digest-weekly (docs/job-types.md, "The weekly partner digest").
//
// One fan-out job reads one page (at most PageSize) of the users who get
// the weekly digest, in user id order, enqueues one email.partner-digest.v1
// per user, then the next page as a fan-out job of its own. Every job it
// enqueues has a job id derived from its caller and natural key, and the
// duplicate policy RejectAlways, so a page that runs twice, or crashed after
// any enqueue and runs again, makes no second job and misses no partner: what it
// already enqueued dedups onto the same job ids, what it did not is
// enqueued now, and a job whose message SQS never confirmed is sent again
// under its id.
//
// A run is the chain of pages one tick's job starts. Its next pages' keys
// name the run (the first page's job id), so a tick of another time in the
// same week, once the week's earlier run has ended, walks every page
// again under keys of its own: a page of the earlier run that ended
// (skipped, failed, cancelled) does not stop it, and the partners' digest
// keys, which name only the user and the week, still dedup what was sent.
//
// A user id that the digest's args refuse is counted (MetricUsersRefused)
// and logged with its reason, and the page goes on; a page's cursor is
// always an id the next page's args accept.
package digest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/vclock"
	"github.com/runstwice/runstwice/message"
)

// ScheduleName is the recurring schedule that ticks the fan-out
// (template.yaml, PartnerDigestWeeklySchedule); Caller is the caller of
// every job the fan-out makes.
const (
	ScheduleName = "partner-digest-weekly"
	Caller       = message.TickCallerPrefix + ScheduleName
)

// PageSize is how many users one fan-out job reads.
const PageSize = 100

// Directory pages the users who get the weekly digest: an item with digest
// = weekly and a confirmed address (users.DigestIndex).
type Directory interface {
	// WeeklyDigestPage returns, in user id order, at most limit users whose
	// id is greater than after ("" for the first page), and the id to give
	// as after for the next page ("" when there is none).
	WeeklyDigestPage(ctx context.Context, after string, limit int) (userIDs []string, next string, err error)
}

// Jobs reserves and promotes the jobs the fan-out enqueues, as the enqueue
// function does (jobs.Store).
type Jobs interface {
	Reserve(ctx context.Context, job jobs.Job, policy contract.DuplicatePolicy) (jobs.Decision, error)
	Promote(ctx context.Context, job jobs.Job) error
}

// Sender sends their messages (sqsqueue.Sender).
type Sender interface {
	Send(ctx context.Context, m sqsqueue.Message) error
}

// Config wires the fan-out's handler. Directory, Jobs and Queue are
// required.
type Config struct {
	Directory Directory
	Jobs      Jobs
	Queue     Sender
	// Metrics counts the users whose id the digest's args refuse
	// (MetricUsersRefused); nil counts nothing. The e-mail function passes
	// the runner's, which flushes it at the end of each invocation.
	Metrics *engine.Metrics
	// Now is the clock (vclock.Now if nil: the wall clock, except in a chaos
	// build).
	Now func() time.Time
}

// Handler runs the fan-out.
type Handler struct{ cfg Config }

// Handlers returns the fan-out's runner handler, keyed by type name, ready
// for runner.Config.Handlers.
func Handlers(cfg Config) (map[string]runner.Handler, error) {
	if cfg.Directory == nil || cfg.Jobs == nil || cfg.Queue == nil {
		return nil, errors.New("digest: Directory, Jobs and Queue are required")
	}
	if cfg.Now == nil {
		cfg.Now = vclock.Now
	}
	return map[string]runner.Handler{contract.Fanout.Name: &Handler{cfg: cfg}}, nil
}

// DigestKey is the natural key of a partner's digest of a week. It names
// no run: every run of the week dedups onto the same digest.
func DigestKey(userID, digestID string) string {
	return contract.PartnerDigest.DeriveKey(map[string]string{"userId": userID, "digestId": digestID})
}

// PageKey is the natural key of the page of run that starts after the user
// id after: partner-digest-fanout:<digestId>:<run>:<after>. run is the job
// id of the run's first page (the tick's job), so each run walks its own
// pages: a page of another run of the week that ended does not stop this
// one.
func PageKey(digestID, run, after string) string {
	return contract.Fanout.KeyPrefix + ":" + digestID + ":" + run + ":" + after
}

// RunOf returns the run a fan-out job belongs to: the run its key names
// (PageKey), or, for the first page (the tick's job) and a page of the
// keys before runs were named (partner-digest-fanout:<digestId>:<after>,
// still in a queue during a deploy), the job's own id, which then names
// the run of the pages it enqueues.
func RunOf(env message.Envelope) string {
	digestID, after := env.Args["digestId"], env.Args["after"]
	if rest, ok := strings.CutPrefix(env.Key, contract.Fanout.KeyPrefix+":"+digestID+":"); ok && after != "" {
		if run, a, ok := strings.Cut(rest, ":"); ok && a == after && validRun(run) {
			return run
		}
	}
	return env.MessageID
}

// validRun reports whether run is a job id as the engine derives them.
func validRun(run string) bool {
	u, err := uuid.Parse(run)
	return err == nil && u.String() == run
}

// ErrBusy is returned (wrapped) when another producer is creating a job
// under the same key right now: the page is retried.
var ErrBusy = errors.New("digest: another producer is creating this job")

// enqueue reserves, sends and promotes one job of jt under key for Caller,
// exactly as the enqueue function does: its id is derived from (Caller,
// key), and RejectAlways makes a job that already exists, active or done,
// the end of it.
func (h *Handler) enqueue(ctx context.Context, jt message.JobType, args map[string]string, key, corr string) error {
	now := h.cfg.Now().UTC()
	env := message.Envelope{
		V: message.Version, MessageID: message.DeriveMessageID(Caller, key), Type: jt.Name, Key: key,
		CorrelationID: corr, Args: args, EnqueuedAt: now,
	}
	body, err := env.Encode()
	if err != nil {
		return engine.Permanent(fmt.Errorf("digest: %s: %w", key, err))
	}
	job := jobs.Job{
		ID: env.MessageID, Caller: Caller, Type: jt.Name, Key: key, Queue: string(jt.Queue), CorrelationID: corr,
		Message: string(body), CreatedAt: now, RunAt: now,
	}
	d, err := h.cfg.Jobs.Reserve(ctx, job, contract.RejectAlways)
	if err != nil {
		return fmt.Errorf("digest: reserve %s: %w", key, err)
	}
	switch d.Outcome {
	case jobs.Duplicate, jobs.Rejected:
		return nil // enqueued before (by an earlier run of this page)
	case jobs.Busy:
		return fmt.Errorf("%w: %s", ErrBusy, key)
	case jobs.Reserved, jobs.Resume:
	default:
		return fmt.Errorf("digest: reserve %s: unknown decision %v", key, d.Outcome)
	}
	j := d.Job
	if err := h.cfg.Queue.Send(ctx, sqsqueue.Message{
		Queue: j.Queue, Body: j.Message, Type: j.Type, CorrelationID: j.CorrelationID,
		TraceHeader: engine.TraceHeader(ctx),
	}); err != nil {
		return fmt.Errorf("digest: send %s: %w", key, err)
	}
	if err := h.cfg.Jobs.Promote(ctx, j); err != nil {
		return fmt.Errorf("digest: promote %s: %w", key, err)
	}
	return nil
}
