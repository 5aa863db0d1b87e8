package contract

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/message"
)

// The declarations of every job type runstwice ships, one place for all of
// them: the enqueue API, the producer's client, the outbox relay, jobctl
// and the workers build their registry from Types, and a handler package
// (internal/email, internal/email/digest, internal/sweep, internal/webhook)
// serves the types by these values. A declaration carries no handler, so a producer that
// validates against it links no worker.

// PartnerVerification is email.partner-verification.v1: the mail that asks a
// new partner to confirm their address. It carries a verification token
// (made at send time, 48 hours) and is unnecessary once the address is
// confirmed.
var PartnerVerification = message.JobType{
	Name: "email.partner-verification.v1",
	Args: []message.ArgSpec{
		{Name: "userId", Format: message.FormatID, Required: true},
		{Name: "roleCode", Format: message.FormatID, Required: true, MaxLen: 32},
		{Name: "countryCode", Format: FormatCountry, Required: true},
	},
	Queue:            QueueCritical,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "partner-verification",
	KeyArgs:          []string{"userId"},
}

// PasswordReset is email.password-reset.v1: a password-reset link with a
// token made at send time (valid one hour).
var PasswordReset = message.JobType{
	Name: "email.password-reset.v1",
	Args: []message.ArgSpec{
		{Name: "userId", Format: message.FormatID, Required: true},
		{Name: "countryCode", Format: FormatCountry, Required: true},
	},
	Queue:            QueueCritical,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "password-reset",
	KeyArgs:          []string{"userId"},
}

// Welcome is email.welcome.v1: a welcome mail with a link to the
// application. It carries no token.
var Welcome = message.JobType{
	Name:             "email.welcome.v1",
	Args:             []message.ArgSpec{{Name: "userId", Format: message.FormatID, Required: true}},
	Queue:            QueueDefault,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "welcome",
	KeyArgs:          []string{"userId"},
}

// PartnerDigest is email.partner-digest.v1: a partner's weekly digest
// (digestId is an ISO week such as 2026-W48), sent only to confirmed
// addresses. It is fail-closed: it runs only while its toggle parameter
// /runstwice/<stage>/toggles/email.partner-digest.v1 says on, so
// template.yaml creates that parameter set to false.
var PartnerDigest = message.JobType{
	Name: "email.partner-digest.v1",
	Args: []message.ArgSpec{
		{Name: "userId", Format: message.FormatID, Required: true},
		{Name: "digestId", Format: FormatISOWeek, Required: true, MaxLen: 8},
	},
	Queue:            QueueBulk,
	EnabledByDefault: false,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "partner-digest",
	KeyArgs:          []string{"userId", "digestId"},
}

// Fanout is email.partner-digest-fanout.v1: one page of the weekly digest's
// fan-out, its week labelled in UTC (FanoutIn labels it in the schedule's
// own time zone). digestId is the ISO week of the tick's scheduled time;
// after is the page's cursor: the previous page's last user id that the
// next page's args accept (absent on the first page). It is fail-closed,
// like the digest itself (template.yaml sets its switch to false). While
// it is off a tick skips (succeeds without work; the next week's tick
// tries again) and a later page parks, so a run stopped mid-week goes on
// where it stopped when the switch is on again.
//
// Its args are a versioned contract: the run a page belongs to is in the
// page's natural key (digest.PageKey), not in an arg.
var Fanout = FanoutIn(time.UTC)

// FanoutIn returns the fan-out's declaration with its tick's digestId, the
// ISO week of the scheduled time, taken in loc: the schedule's time zone
// (PartnerDigestTimezone), so that Monday 09:00 in a zone ahead of UTC by
// more than 9 hours, still Sunday in UTC, is labelled its own week. The
// e-mail function registers FanoutIn of its PARTNER_DIGEST_TIMEZONE; the
// type is the same one in every zone, only the label of a tick differs.
func FanoutIn(loc *time.Location) message.JobType {
	return message.JobType{
		Name: "email.partner-digest-fanout.v1",
		Args: []message.ArgSpec{
			{Name: "digestId", Format: FormatISOWeek, Required: true, MaxLen: 8},
			{Name: "after", Format: message.FormatID},
		},
		Queue:            QueueBulk,
		EnabledByDefault: false,
		Bias:             engine.EffectThenClaim,
		Lease:            true,
		KeyPrefix:        "partner-digest-fanout",
		KeyArgs:          []string{"digestId"},
		WhileOff:         engine.Skip,
		TickArgs: func(at time.Time) map[string]string {
			return map[string]string{"digestId": WeekOf(at, loc)}
		},
	}
}

// ScheduleSweep is runstwice.schedule-sweep.v1, the tick of the hourly
// schedule (internal/sweep) that deletes the one-time schedules of ended
// jobs. Its one arg is the tick's scheduled time (hour, UTC, e.g.
// 20261202T1000Z), which is also its key, so every hour is a job of its
// own. It is on by default (deleting the schedule of
// an ended job is always safe) and, like every tick type, skips while its
// switch is off: the next hour's tick tries again.
var ScheduleSweep = message.JobType{
	Name:             "runstwice.schedule-sweep.v1",
	Args:             []message.ArgSpec{{Name: "hour", Format: message.FormatID, Required: true, MaxLen: 16}},
	Queue:            QueueDefault,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "schedule-sweep",
	KeyArgs:          []string{"hour"},
	WhileOff:         engine.Skip,
	TickArgs: func(at time.Time) map[string]string {
		return map[string]string{"hour": at.UTC().Format("20060102T1504Z")}
	},
}

// WebhookDeliver is webhook.deliver.v1: one event POSTed to the stack's
// webhook receiver (WebhookUrl), by its id. The receiver dedups by the
// Idempotency-Key, which is the job id, so effect then claim (a crash
// between the POST and the claim repeats the POST under the same key) is
// right, and a lease keeps a concurrent twin from posting at the same time.
// It runs on its own queue and its own function (functions/webhook,
// internal/webhook).
var WebhookDeliver = message.JobType{
	Name:             "webhook.deliver.v1",
	Args:             []message.ArgSpec{{Name: "eventId", Format: message.FormatID, Required: true}},
	Queue:            QueueWebhooks,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "webhook",
	KeyArgs:          []string{"eventId"},
}

// BatchFinish is runstwice.batch-finish.v1: the finisher of a batch (POST
// /v1/batches), sent with a delay before the batch's item is written. When
// it arrives the accept is over or cut short: a batch still Accepting is
// finished (every job reserved and handed over, as the accept would have),
// one that was never written or is accepted is left alone. runstwice makes
// it; no request may (Internal).
var BatchFinish = message.JobType{
	Name:             "runstwice.batch-finish.v1",
	Args:             []message.ArgSpec{{Name: "batchId", Format: message.FormatID, Required: true, MaxLen: 36}},
	Queue:            QueueChain,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "batch-finish",
	KeyArgs:          []string{"batchId"},
}

// ContinuationSweep is runstwice.continuation-sweep.v1, the tick of the
// schedule continuation-sweep (every five minutes) that decides the
// continuations no marker's end releases: of a parent that expired, or
// failed and can no longer be redriven, and of a release cut short. Its one
// arg is the tick's scheduled time (minute, UTC), also its key. On by
// default; like every tick type it skips while its switch is off.
var ContinuationSweep = message.JobType{
	Name:             "runstwice.continuation-sweep.v1",
	Args:             []message.ArgSpec{{Name: "at", Format: message.FormatID, Required: true, MaxLen: 16}},
	Queue:            QueueChain,
	EnabledByDefault: true,
	Bias:             engine.EffectThenClaim,
	Lease:            true,
	KeyPrefix:        "continuation-sweep",
	KeyArgs:          []string{"at"},
	WhileOff:         engine.Skip,
	TickArgs: func(at time.Time) map[string]string {
		return map[string]string{"at": at.UTC().Format("20060102T1504Z")}
	},
}

// Internal reports whether type name is one runstwice makes for itself
// (BatchFinish): no request, outbox item or batch may enqueue it. A tick
// type is refused too, by its TickArgs.
func Internal(name string) bool { return name == BatchFinish.Name }

// WeekOf is the digestId of a tick scheduled at at: the ISO 8601 week
// ("2026-W50") of at in the schedule's time zone loc (UTC when nil).
// Monday 09:00 in Sydney is Sunday 22:00 in UTC: in UTC it would be the
// week before.
func WeekOf(at time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	y, w := at.In(loc).ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}

// Types returns the declaration of every shipped job type, sorted by name,
// the weekly digest's tick labelled with its week in UTC.
func Types() []message.JobType { return TypesIn(time.UTC) }

// TypesIn is Types with the weekly digest's tick labelled in digestZone
// (FanoutIn).
func TypesIn(digestZone *time.Location) []message.JobType {
	out := []message.JobType{PartnerVerification, PasswordReset, Welcome, PartnerDigest, FanoutIn(digestZone), ScheduleSweep, WebhookDeliver,
		BatchFinish, ContinuationSweep}
	slices.SortFunc(out, func(a, b message.JobType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Registry returns a registry of every shipped job type. The declarations
// are fixed at build time and a test proves they load, so a refused
// declaration is a programming error and panics. A tick of the weekly
// digest is labelled with its week in UTC here: RegistryIn labels it in the
// schedule's time zone, as the e-mail function, which runs the ticks, does.
func Registry() *message.Registry { return RegistryIn(time.UTC) }

// RegistryIn is Registry with the weekly digest's tick labelled with the
// ISO week of its scheduled time in digestZone (FanoutIn): the registry of
// the e-mail function, given PARTNER_DIGEST_TIMEZONE. Only a tick's args
// differ; every type, arg and key is the same in every zone.
func RegistryIn(digestZone *time.Location) *message.Registry {
	r, err := message.NewRegistry(TypesIn(digestZone)...)
	if err != nil {
		panic(err)
	}
	return r
}
