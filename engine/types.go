package engine

import (
	"time"

	"github.com/runstwice/runstwice/internal/contract"
)

// The job contract: the types below are the engine's names for the
// declarations and the message envelope that every job carries. Their
// implementation (parsing, validation, derivation) lives in the module's
// internal contract package, so the bundle and an outside function share it
// byte for byte.
type (
	// JobType declares one versioned job type: its args, queue, kill
	// switch default, bias, lease and what it does while off.
	JobType = contract.JobType
	// ArgSpec declares one argument of a job type.
	ArgSpec = contract.ArgSpec
	// Format is the shape an argument value must have.
	Format = contract.Format
	// Registry holds the job types a function knows. Build it with
	// NewRegistry at start-up: there is no global registry and no init()
	// registration.
	Registry = contract.Registry
	// Envelope is the SQS message body of every job; its MessageID is the
	// job id.
	Envelope = contract.Envelope
	// Tick is the body a recurring schedule sends instead of an envelope.
	Tick = contract.Tick
	// Queue names the work queue a job type is sent to.
	Queue = contract.Queue
	// Bias orders a type's effect and claim.
	Bias = contract.Bias
	// WhileOff is what a job does while its type's kill switch is off.
	WhileOff = contract.WhileOff
	// ValidationError lists the fields of an envelope or its args that are
	// wrong.
	ValidationError = contract.ValidationError
	// FieldError is one wrong field of a ValidationError.
	FieldError = contract.FieldError
	// UnknownTypeError names a type the registry does not hold.
	UnknownTypeError = contract.UnknownTypeError
)

// The work queues.
const (
	QueueCritical = contract.QueueCritical
	QueueDefault  = contract.QueueDefault
	QueueBulk     = contract.QueueBulk
)

// The biases.
const (
	// EffectThenClaim: a crash between effect and claim repeats the effect
	// (duplicates over loss).
	EffectThenClaim = contract.EffectThenClaim
	// ClaimThenEffect: a crash after the claim loses the effect (loss over
	// duplicates).
	ClaimThenEffect = contract.ClaimThenEffect
)

// What a job does while its switch is off.
const (
	// Park re-sends the job with a delay until its switch is on again.
	Park = contract.Park
	// Skip ends the job as a successful no-op (of a tick type: only a
	// tick; its other jobs park).
	Skip = contract.Skip
)

// The argument formats.
const (
	FormatID      = contract.FormatID
	FormatCountry = contract.FormatCountry
	FormatISOWeek = contract.FormatISOWeek
)

// Errors of the contract, matched with errors.Is.
var (
	// ErrMalformed: the message is not a valid envelope.
	ErrMalformed = contract.ErrMalformed
	// ErrUnknownType: the envelope names a type the registry does not hold.
	ErrUnknownType = contract.ErrUnknownType
)

// NewRegistry builds a registry of the given types. It refuses a malformed
// or duplicate name, an unknown queue, and key args that are not declared.
func NewRegistry(types ...JobType) (*Registry, error) { return contract.NewRegistry(types...) }

// Decode parses and validates an envelope's own fields (not its args, which
// Registry.Validate checks against the type).
func Decode(data []byte) (Envelope, error) { return contract.Decode(data) }

// DeriveMessageID is the job id of a request with an idempotency key: the
// same caller and key always name the same job.
func DeriveMessageID(caller, idempotencyKey string) string {
	return contract.DeriveMessageID(caller, idempotencyKey)
}

// NewMessageID returns a fresh job id.
func NewMessageID() string { return contract.NewMessageID() }

// TickCaller is the caller of every job the schedule makes.
func TickCaller(schedule string) string { return contract.TickCaller(schedule) }

// TickMessageID is the job id of the schedule's tick at scheduledTime.
func TickMessageID(schedule string, scheduledTime time.Time) string {
	return contract.TickMessageID(schedule, scheduledTime)
}

// Version is the envelope version this engine reads and writes.
const Version = contract.Version

// TickCallerPrefix prefixes the caller of every job a schedule makes:
// schedule:<name>.
const TickCallerPrefix = contract.TickCallerPrefix

// ISOWeek is t's ISO 8601 week, such as "2026-W48" (FormatISOWeek): the
// period key of a weekly tick's job.
func ISOWeek(t time.Time) string { return contract.ISOWeek(t) }
