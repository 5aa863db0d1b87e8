// Package outbox is the transactional outbox of runstwice: a producer whose
// own state lives in DynamoDB adds one Put on the outbox table to its own
// TransactWriteItems, so the job exists if and only if its change commits.
// The table's stream (NEW_IMAGE) feeds the relay (functions/outbox), which
// enqueues each item exactly as the HTTP API would, for caller
// outbox:<producer> with the item's Idempotency-Key: the same job id, dedup,
// duplicate policy and scheduling. See docs/storage.md for the item format.
//
// The rules:
//   - An item is relayed at least once (a stream record can be delivered
//     twice, a producer can write an item twice); the job id derived from
//     (caller, idempotency key) makes every relay of it one job.
//   - An item that breaks a rule never blocks its shard: it is recorded as a
//     dead letter with its reason (source "outbox") and counted, and the
//     relay goes on.
//   - A transient failure (the jobs table or the queue unreachable) is a
//     batch item failure: the shard is retried from that record on.
//   - REMOVE records (the item's TTL expiry, or its producer deleting it)
//     are ignored.
package outbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/idempotency"
)

// Attribute names of an outbox item.
const (
	AttrPK              = "pk"
	AttrProducer        = "producer"
	AttrIdempotencyKey  = "idempotencyKey"
	AttrType            = "type"
	AttrArgs            = "args"
	AttrKey             = "key"
	AttrRunAt           = "runAt"
	AttrDelaySeconds    = "delaySeconds"
	AttrDuplicatePolicy = "duplicatePolicy"
	AttrCorrelationID   = "correlationId"
	AttrExpiresAt       = "expiresAt"
)

// attrs lists every attribute an item may have.
var attrs = []string{AttrPK, AttrProducer, AttrIdempotencyKey, AttrType, AttrArgs, AttrKey, AttrRunAt,
	AttrDelaySeconds, AttrDuplicatePolicy, AttrCorrelationID, AttrExpiresAt}

// Retention is how long an outbox item lives (its expiresAt, the table's
// TTL): long enough for the stream (24 h) to have relayed it.
const Retention = 24 * time.Hour

// producerName is what a producer may be called: it is part of the caller
// and of every item's key (an IAM condition on dynamodb:LeadingKeys limits
// a producer's role to its own prefix).
var producerName = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// CallerPrefix starts the caller of every job the relay enqueues.
const CallerPrefix = "outbox:"

// Item is one outbox item: a request to enqueue a job, as a producer wrote
// it inside its own transaction.
type Item struct {
	Producer       string
	IdempotencyKey string
	Type           string
	Args           map[string]string
	Key            string
	RunAt          string
	DelaySeconds   *int
	Policy         string
	CorrelationID  string
	ExpiresAt      int64
}

// Caller is the caller the item's job belongs to: outbox:<producer>.
func (it Item) Caller() string { return CallerPrefix + it.Producer }

// PK is the item's table key: <producer>#<idempotencyKey>.
func (it Item) PK() string { return it.Producer + "#" + it.IdempotencyKey }

// JobID is the id the item's job has (and will have): derived from the
// caller and the idempotency key exactly as for an API request.
func (it Item) JobID() string { return engine.DeriveMessageID(it.Caller(), it.IdempotencyKey) }

// Body is the request body the API would have been sent for the item.
func (it Item) Body() []byte {
	body := map[string]any{"args": it.Args}
	if it.Key != "" {
		body["key"] = it.Key
	}
	if it.RunAt != "" {
		body["runAt"] = it.RunAt
	}
	if it.DelaySeconds != nil {
		body["delaySeconds"] = *it.DelaySeconds
	}
	if it.Policy != "" {
		body["duplicatePolicy"] = it.Policy
	}
	b, _ := json.Marshal(body) // strings, a number and a map of strings: never fails
	return b
}

// ErrInvalid is returned (wrapped, with the reason) for an item that breaks
// a rule of the outbox format itself; the request inside it is checked by
// the API's own rules when it is enqueued.
var ErrInvalid = errors.New("outbox: invalid item")

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Check checks the outbox's own rules of it: a producer name of 1-64 of
// [a-z0-9-], an Idempotency-Key the API would accept, the key
// <producer>#<idempotencyKey>, a type and args present.
func (it Item) Check(pk string) error {
	switch {
	case !producerName.MatchString(it.Producer):
		return invalid("producer %q must be 1-64 of a-z, 0-9 and '-'", clip(it.Producer))
	case it.Type == "":
		return invalid("type is required")
	case it.Args == nil:
		return invalid("args is required: a map of string IDs")
	}
	key, err := idempotency.ParseKey(it.IdempotencyKey)
	if err != nil || key != it.IdempotencyKey {
		return invalid("idempotencyKey must be 1-255 printable ASCII characters, as the Idempotency-Key header")
	}
	if pk != it.PK() {
		return invalid("pk must be <producer>#<idempotencyKey> (%q)", clip(it.PK()))
	}
	return nil
}

// Value is one attribute of an item as the relay reads it: a string, a
// number (its decimal text) or a map of strings. Stream records and the SDK
// each have their own attribute types; both convert to this.
type Value struct {
	S   *string
	N   *string
	M   map[string]Value
	Bad string // the DynamoDB type name of anything else
}

// Decode reads an item from its attributes (a stream record's NewImage)
// and checks the outbox's rules (Check). Unknown attributes, and attributes
// of the wrong DynamoDB type, are errors matching ErrInvalid.
func Decode(av map[string]Value) (Item, error) {
	var unknown []string
	for name := range av {
		if !slices.Contains(attrs, name) {
			unknown = append(unknown, clip(name))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return Item{}, invalid("unknown attributes %s; an item has %s", strings.Join(unknown, ", "), strings.Join(attrs, ", "))
	}
	var it Item
	var errs []error
	str := func(name string, dst *string, required bool) {
		v, ok := av[name]
		switch {
		case !ok && required:
			errs = append(errs, invalid("%s is required", name))
		case !ok:
		case v.S == nil:
			errs = append(errs, invalid("%s must be a string (S)", name))
		default:
			*dst = *v.S
		}
	}
	var pk string
	str(AttrPK, &pk, true)
	str(AttrProducer, &it.Producer, true)
	str(AttrIdempotencyKey, &it.IdempotencyKey, true)
	str(AttrType, &it.Type, true)
	str(AttrKey, &it.Key, false)
	str(AttrRunAt, &it.RunAt, false)
	str(AttrDuplicatePolicy, &it.Policy, false)
	str(AttrCorrelationID, &it.CorrelationID, false)
	if v, ok := av[AttrArgs]; ok {
		if v.M == nil {
			errs = append(errs, invalid("args must be a map (M) of strings"))
		} else {
			it.Args = make(map[string]string, len(v.M))
			for k, a := range v.M {
				if a.S == nil {
					errs = append(errs, invalid("args.%s must be a string (S)", clip(k)))
					continue
				}
				it.Args[k] = *a.S
			}
		}
	}
	if v, ok := av[AttrDelaySeconds]; ok {
		n, err := number(v)
		if err != nil {
			errs = append(errs, invalid("delaySeconds %s", err))
		} else {
			d := int(n)
			it.DelaySeconds = &d
		}
	}
	if v, ok := av[AttrExpiresAt]; ok {
		n, err := number(v)
		if err != nil {
			errs = append(errs, invalid("expiresAt %s", err))
		}
		it.ExpiresAt = n
	}
	if len(errs) > 0 {
		return Item{}, errors.Join(errs...)
	}
	return it, it.Check(pk)
}

func number(v Value) (int64, error) {
	if v.N == nil {
		return 0, errors.New("must be a number (N)")
	}
	n, err := strconv.ParseInt(*v.N, 10, 64)
	if err != nil {
		return 0, errors.New("must be a whole number")
	}
	return n, nil
}

// Attributes is the item as attribute values of kind V, built with str,
// num and mapOf: how the producer's helper writes it with the SDK's types.
func Attributes[V any](it Item, str func(string) V, num func(int64) V, mapOf func(map[string]V) V) map[string]V {
	out := map[string]V{
		AttrPK: str(it.PK()), AttrProducer: str(it.Producer), AttrIdempotencyKey: str(it.IdempotencyKey),
		AttrType: str(it.Type), AttrExpiresAt: num(it.ExpiresAt),
	}
	args := make(map[string]V, len(it.Args))
	for _, k := range slices.Sorted(maps.Keys(it.Args)) {
		args[k] = str(it.Args[k])
	}
	out[AttrArgs] = mapOf(args)
	for name, v := range map[string]string{AttrKey: it.Key, AttrRunAt: it.RunAt, AttrDuplicatePolicy: it.Policy, AttrCorrelationID: it.CorrelationID} {
		if v != "" {
			out[name] = str(v)
		}
	}
	if it.DelaySeconds != nil {
		out[AttrDelaySeconds] = num(int64(*it.DelaySeconds))
	}
	return out
}

// clip keeps a text quoted in a reason short and printable.
func clip(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '_'
		}
		return r
	}, s)
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
