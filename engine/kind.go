package engine

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// Kind declares one kind of job: what names its markers, how a record's
// body becomes a payload and which key that payload runs once under, and
// how it runs. Only Name and Key are required.
//
//	ship := engine.Kind[Order]{
//		Name: "orders.ship",
//		Key:  func(o Order) (string, error) { return o.ID, nil },
//	}
//
// The rules a Handler keeps for a kind:
//   - a record whose body Decode refuses, or whose Key is "" or an error,
//     fails as permanent: it is dead-lettered with its reason when
//     Options.DeadLetterer is set, else reported in BatchItemFailures; its
//     work never runs, since a record is never run without its guard;
//   - work that returns nil never runs again for that key while its marker
//     lives (Options.Retention); work that returns an error runs again on
//     the next delivery;
//   - two records with one key run one at a time, in one batch as across
//     batches; across invocations at once, Lease makes the twin wait, and
//     without it Bias decides (EffectThenClaim may run twice: duplicates
//     over loss);
//   - with Fingerprint set, a record whose key is done or leased under
//     another fingerprint fails as permanent (ErrFingerprint) and its work
//     never runs.
type Kind[T any] struct {
	// Name is the markers' namespace: yours, stable across refactors and
	// deploys (e.g. "orders.ship" or "orders.ship.v1"). It is also the kill
	// switch's name and the type dimension of the metrics.
	Name string
	// Key returns the idempotency key of a payload: the work runs once per
	// key. "" or an error makes the record a permanent failure.
	Key func(T) (string, error)

	// Decode turns a record's body into a payload (nil: encoding/json into
	// a T). An error makes the record a permanent failure.
	Decode func([]byte) (T, error)
	// Fingerprint returns what identifies a payload's content (nil: no
	// check). The marker keeps its SHA-256; a record that reuses a done or
	// leased key with another content fails with ErrFingerprint.
	Fingerprint func(T) ([]byte, error)
	// Bias orders effect and claim (EffectThenClaim if zero).
	Bias Bias
	// Lease takes a lease on the key before the work, until the
	// invocation's deadline, so a concurrent twin in another invocation
	// waits (it is retried) instead of running the work too.
	Lease bool
	// FailClosed makes the kind's kill switch default to off: its work runs
	// only while Options.Switch says on, and a switch that is missing or
	// cannot be read keeps it off. False: on unless switched off.
	FailClosed bool
	// WhileOff is what a record does while its switch is off: Park (the
	// default: re-sent with a delay, so nothing is lost) or Skip (a
	// successful no-op: right for recurring work whose next tick tries
	// again).
	WhileOff WhileOff

	// Due returns the payload's run time, if it has one (nil or zero:
	// none): a marker settled before it still guards until Retention past
	// it, so a copy that waited for that time is still caught.
	Due func(T) time.Time
	// Traceparent returns the W3C traceparent a payload carries, for a
	// record that arrives without an AWSTraceHeader (nil: none).
	Traceparent func(T) string
	// LogAttrs returns the attributes every log line of the record carries
	// (nil: the kind's name as type and the key as key).
	LogAttrs func(T) []slog.Attr
	// Admit, when set, runs once the key is known not to be done, before
	// the switch's decision is acted on (so a switched-off record is
	// admitted too): it may record that the job exists. An error that is
	// ErrProcessed ends the record as a duplicate without running it;
	// ErrBusy retries it; any other error fails it as the work's would.
	Admit func(ctx context.Context, job Job[T]) error
}

// Job is one record's job as the work sees it.
type Job[T any] struct {
	// Key is the payload's idempotency key (Kind.Key).
	Key string
	// Payload is the decoded body.
	Payload T
	// Attempt is the delivery's receive count: 1 on the first delivery.
	Attempt int
	// Logger carries the record's attributes (Kind.LogAttrs, the SQS
	// message id and the trace).
	Logger *slog.Logger
}

// Bias chooses the order of effect and claim for a kind of job.
type Bias int

const (
	// EffectThenClaim runs the effect, then claims the marker: a crash between
	// the two repeats the effect on redelivery (duplicates over loss). Right
	// for e-mail.
	EffectThenClaim Bias = iota
	// ClaimThenEffect claims the marker first: a crash after the claim loses
	// the effect rather than repeating it (loss over duplicates). Right for a
	// job that must never run twice, such as moving money.
	ClaimThenEffect
)

func (b Bias) String() string {
	if b == ClaimThenEffect {
		return "claim-then-effect"
	}
	return "effect-then-claim"
}

// WhileOff is what a job does while its kill switch is off.
type WhileOff int

const (
	// Park re-sends the record to its queue with a delay until the switch is
	// on again: nothing is lost, and the job runs late.
	Park WhileOff = iota
	// Skip ends the record as a successful no-op (OutcomeSkipped): right
	// for recurring work, whose next tick tries again, so a week of ticks
	// never piles up behind a switch.
	Skip
)

func (w WhileOff) String() string {
	if w == Skip {
		return "skip"
	}
	return "park"
}

// ErrFingerprint is the permanent failure of a record whose key is done or
// held under another fingerprint: the same key with other content.
var ErrFingerprint = errors.New("engine: the key was used with another payload (fingerprint mismatch)")

// MaxKeyBytes bounds a key: the marker's partition key holds the kind's
// name and the key, and DynamoDB's limit for it is 2,048 bytes.
const MaxKeyBytes = 1024
