package message

import (
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Tick is the input a recurring schedule sends to a work queue instead of an
// envelope (docs/job-types.md, "Jobs on a clock"):
//
//	{"v":1,"type":"email.partner-digest-fanout.v1","schedule":"partner-digest-weekly",
//	 "scheduledTime":"2026-12-07T09:00:00Z","correlationId":"<execution id>"}
//
// It has no messageId: the worker derives the job id from the schedule's
// name and the scheduled time (TickEnvelope), so a tick delivered twice, or
// fired twice for the same time, is one job.
type Tick struct {
	V             int    `json:"v"`
	Type          string `json:"type"`
	Schedule      string `json:"schedule"`
	ScheduledTime string `json:"scheduledTime"`
	CorrelationID string `json:"correlationId"`
}

// TickCallerPrefix prefixes the caller of every job a schedule makes:
// schedule:<name>.
const TickCallerPrefix = "schedule:"

// TickCaller is the caller of the jobs schedule name makes.
func TickCaller(schedule string) string { return TickCallerPrefix + schedule }

// TickTimeLayout is how a tick's scheduled time is written in its job's key
// and id: RFC 3339 in UTC to the second, as the scheduler writes
// <aws.scheduler.scheduled-time>.
const TickTimeLayout = "2006-01-02T15:04:05Z"

// scheduleNamePattern is EventBridge Scheduler's schedule name.
var scheduleNamePattern = regexp.MustCompile(`^[0-9a-zA-Z._-]{1,64}$`)

// IsTick reports whether data looks like a tick rather than an envelope: a
// JSON object with a schedule and no messageId. DecodeTick then checks it
// strictly.
func IsTick(data []byte) bool {
	var probe struct {
		MessageID *json.RawMessage `json:"messageId"`
		Schedule  *json.RawMessage `json:"schedule"`
	}
	return len(data) <= MaxEnvelopeBytes && json.Unmarshal(data, &probe) == nil && probe.Schedule != nil && probe.MessageID == nil
}

// DecodeTick parses and checks a tick as strictly as Decode does an
// envelope. Every error it returns matches ErrMalformed.
func DecodeTick(data []byte) (Tick, error) {
	var t Tick
	if err := decodeStrict(data, &t); err != nil {
		return Tick{}, err
	}
	return t, t.Check()
}

// Check validates the tick's own fields.
func (t Tick) Check() error {
	verr := &ValidationError{}
	if t.V != Version {
		verr.add("v", "unsupported version %d (want %d)", t.V, Version)
	}
	if !ValidTypeName(t.Type) {
		verr.add("type", "must be a versioned type name such as email.partner-digest-fanout.v1")
	}
	if !scheduleNamePattern.MatchString(t.Schedule) {
		verr.add("schedule", "must be a schedule name: 1-64 letters, digits, '.', '_' or '-'")
	}
	if _, err := time.Parse(time.RFC3339, t.ScheduledTime); err != nil {
		verr.add("scheduledTime", "must be an RFC 3339 time such as 2026-12-07T09:00:00Z")
	}
	if !ValidCorrelationID(t.CorrelationID) {
		verr.add("correlationId", "must be 1-128 characters of letters, digits, '.', '_', ':' or '-'")
	}
	return verr.orNil()
}

// Time is the tick's scheduled time in UTC, to the second.
func (t Tick) Time() time.Time {
	at, _ := time.Parse(time.RFC3339, t.ScheduledTime)
	return at.UTC().Truncate(time.Second)
}

// Encode returns the tick's JSON after checking it.
func (t Tick) Encode() ([]byte, error) { return encodeChecked(t, "tick") }

// encodeChecked returns v's JSON (a what) once v.Check passes, so a
// malformed message is never sent.
func encodeChecked(v interface{ Check() error }, what string) ([]byte, error) {
	if err := v.Check(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("message: encode %s: %w", what, err)
	}
	return b, nil
}

// TickMessageID is the job id of the tick of schedule at scheduledTime: the
// id an API request of caller schedule:<name> with the scheduled time as its
// Idempotency-Key gets.
func TickMessageID(schedule string, scheduledTime time.Time) string {
	return DeriveMessageID(TickCaller(schedule), scheduledTime.UTC().Format(TickTimeLayout))
}

// TickEnvelope derives the envelope of tick t: its type must be a registered
// tick type; the args come from the type's TickArgs, the key from its key
// derivation, the job id from TickMessageID, and enqueuedAt is the scheduled
// time. Every error matches ErrMalformed or ErrUnknownType: such a tick can
// never succeed.
func (r *Registry) TickEnvelope(t Tick) (Envelope, error) {
	if err := t.Check(); err != nil {
		return Envelope{}, err
	}
	jt, err := r.Lookup(t.Type)
	if err != nil {
		return Envelope{}, err
	}
	if jt.TickArgs == nil {
		return Envelope{}, &ValidationError{Fields: []FieldError{{Field: "type", Reason: t.Type + " is not a tick type: no schedule may send it"}}}
	}
	at := t.Time()
	args := jt.TickArgs(at)
	env := Envelope{
		V: Version, MessageID: TickMessageID(t.Schedule, at), Type: jt.Name, Key: jt.DeriveKey(args),
		CorrelationID: t.CorrelationID, Args: args, EnqueuedAt: at,
	}
	if err := env.Check(); err != nil {
		return Envelope{}, err
	}
	if err := jt.ValidateArgs(args); err != nil {
		return Envelope{}, err
	}
	return env, nil
}
