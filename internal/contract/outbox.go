package contract

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

	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

// Attribute names of an outbox item.
const (
	OutboxAttrPK              = "pk"
	OutboxAttrProducer        = "producer"
	OutboxAttrIdempotencyKey  = "idempotencyKey"
	OutboxAttrType            = "type"
	OutboxAttrArgs            = "args"
	OutboxAttrKey             = "key"
	OutboxAttrRunAt           = "runAt"
	OutboxAttrDelaySeconds    = "delaySeconds"
	OutboxAttrDuplicatePolicy = "duplicatePolicy"
	OutboxAttrCorrelationID   = "correlationId"
	OutboxAttrAfter           = "after"
	OutboxAttrAfterPolicy     = "afterPolicy"
	OutboxAttrExpiresAt       = "expiresAt"
	OutboxAttrTraceparent     = "traceparent"
)

// attrs lists every attribute an item may have.
var outboxAttrs = []string{OutboxAttrPK, OutboxAttrProducer, OutboxAttrIdempotencyKey, OutboxAttrType, OutboxAttrArgs, OutboxAttrKey, OutboxAttrRunAt,
	OutboxAttrDelaySeconds, OutboxAttrDuplicatePolicy, OutboxAttrCorrelationID, OutboxAttrAfter, OutboxAttrAfterPolicy, OutboxAttrExpiresAt,
	OutboxAttrTraceparent}

// OutboxRetention is how long an outbox item lives (its expiresAt, the table's
// TTL): long enough for the stream (24 h) to have relayed it.
const OutboxRetention = lifetime.OutboxItem

// producerName is what a producer may be called: it is part of the caller
// and of every item's key (an IAM condition on dynamodb:LeadingKeys limits
// a producer's role to its own prefix).
var producerName = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// OutboxCallerPrefix starts the caller of every job the relay enqueues.
const OutboxCallerPrefix = "outbox:"

// OutboxItem is one outbox item: a request to enqueue a job, as a producer wrote
// it inside its own transaction.
type OutboxItem struct {
	Producer       string
	IdempotencyKey string
	Type           string
	Args           map[string]string
	Key            string
	RunAt          string
	DelaySeconds   *int
	Policy         string
	CorrelationID  string
	// After and AfterPolicy make the item's job a continuation, as the
	// body's after and afterPolicy: it waits for job After of the same
	// caller (outbox:<producer>).
	After       string
	AfterPolicy string
	ExpiresAt   int64
	// Traceparent is the W3C trace context of the producer's span that
	// wrote the item ("" for none): the relay's span continues it, so the
	// job's trace starts in the producer's. A malformed one is ignored.
	Traceparent string
}

// RelayableUntil is the latest an item can be relayed again: its
// expiresAt (DynamoDB's TTL deletes it some time after; a MODIFY of it may
// come until then), then the stream's retention of that last record. Zero
// without an expiresAt.
func (it OutboxItem) RelayableUntil() time.Time {
	if it.ExpiresAt <= 0 {
		return time.Time{}
	}
	return time.Unix(it.ExpiresAt, 0).Add(lifetime.StreamRetention)
}

// Caller is the caller the item's job belongs to: outbox:<producer>.
func (it OutboxItem) Caller() string { return OutboxCallerPrefix + it.Producer }

// PK is the item's table key: <producer>#<idempotencyKey>.
func (it OutboxItem) PK() string { return it.Producer + "#" + it.IdempotencyKey }

// JobID is the id the item's job has (and will have): derived from the
// caller and the idempotency key exactly as for an API request.
func (it OutboxItem) JobID() string { return message.DeriveMessageID(it.Caller(), it.IdempotencyKey) }

// Body is the request body the API would have been sent for the item.
func (it OutboxItem) Body() []byte {
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
	if it.After != "" {
		body["after"] = it.After
	}
	if it.AfterPolicy != "" {
		body["afterPolicy"] = it.AfterPolicy
	}
	b, _ := json.Marshal(body) // strings, a itemNumber and a map of strings: never fails
	return b
}

// OutboxKeyOwner splits an item's pk into the producer and the
// Idempotency-Key it names. A producer's role may write only keys under its
// own prefix (dynamodb:LeadingKeys), so the pk, unlike the item's producer
// attribute, proves who wrote the item. ok is false when pk is not
// <producer>#<idempotencyKey> with a valid producer name and key.
func OutboxKeyOwner(pk string) (producer, key string, ok bool) {
	producer, key, found := strings.Cut(pk, "#")
	if !found || !producerName.MatchString(producer) {
		return "", "", false
	}
	if k, err := ParseKey(key); err != nil || k != key {
		return "", "", false
	}
	return producer, key, true
}

// ErrInvalidOutboxItem is returned (wrapped, with the reason) for an item that breaks
// a rule of the outbox format itself; the request inside it is checked by
// the API's own rules when it is enqueued.
var ErrInvalidOutboxItem = errors.New("outbox: invalid item")

func invalidItem(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOutboxItem, fmt.Sprintf(format, a...))
}

// Check checks the outbox's own rules of it: a producer name of 1-64 of
// [a-z0-9-], an Idempotency-Key the API would accept, the key
// <producer>#<idempotencyKey>, a type and args present.
func (it OutboxItem) Check(pk string) error {
	switch {
	case !producerName.MatchString(it.Producer):
		return invalidItem("producer %q must be 1-64 of a-z, 0-9 and '-'", clipValue(it.Producer))
	case it.Type == "":
		return invalidItem("type is required")
	case it.Args == nil:
		return invalidItem("args is required: a map of string IDs")
	}
	key, err := ParseKey(it.IdempotencyKey)
	if err != nil || key != it.IdempotencyKey {
		return invalidItem("idempotencyKey must be 1-255 printable ASCII characters, as the Idempotency-Key header")
	}
	if pk != it.PK() {
		return invalidItem("pk must be <producer>#<idempotencyKey> (%q)", clipValue(it.PK()))
	}
	return nil
}

// OutboxValue is one attribute of an item as the relay reads it: a string, a
// number (its decimal text) or a map of strings. Stream records and the SDK
// each have their own attribute types; both convert to this.
type OutboxValue struct {
	S   *string
	N   *string
	M   map[string]OutboxValue
	Bad string // the DynamoDB type name of anything else
}

// DecodeOutboxItem reads an item from its attributes (a stream record's NewImage)
// and checks the outbox's rules (Check). Unknown attributes, one whose name
// differs from an item's attribute only in case ("Args", "TYPE": never
// read as args or type), and attributes of the wrong DynamoDB type, are
// errors matching ErrInvalidOutboxItem.
func DecodeOutboxItem(av map[string]OutboxValue) (OutboxItem, error) {
	var unknown, cased []string
	for _, name := range slices.Sorted(maps.Keys(av)) {
		if known, ok := CaseVariant(name, outboxAttrs); ok {
			cased = append(cased, fmt.Sprintf("attribute %s %s", clipValue(name), CaseReason(known)))
		} else if !slices.Contains(outboxAttrs, name) {
			unknown = append(unknown, clipValue(name))
		}
	}
	if len(unknown) > 0 {
		cased = append(cased, fmt.Sprintf("unknown attributes %s; an item has %s", strings.Join(unknown, ", "), strings.Join(outboxAttrs, ", ")))
	}
	if len(cased) > 0 {
		return OutboxItem{}, invalidItem("%s", strings.Join(cased, "; "))
	}
	var it OutboxItem
	var errs []error
	str := func(name string, dst *string, required bool) {
		v, ok := av[name]
		switch {
		case !ok && required:
			errs = append(errs, invalidItem("%s is required", name))
		case !ok:
		case v.S == nil:
			errs = append(errs, invalidItem("%s must be a string (S)", name))
		default:
			*dst = *v.S
		}
	}
	var pk string
	str(OutboxAttrPK, &pk, true)
	str(OutboxAttrProducer, &it.Producer, true)
	str(OutboxAttrIdempotencyKey, &it.IdempotencyKey, true)
	str(OutboxAttrType, &it.Type, true)
	str(OutboxAttrKey, &it.Key, false)
	str(OutboxAttrRunAt, &it.RunAt, false)
	str(OutboxAttrDuplicatePolicy, &it.Policy, false)
	str(OutboxAttrCorrelationID, &it.CorrelationID, false)
	str(OutboxAttrAfter, &it.After, false)
	str(OutboxAttrAfterPolicy, &it.AfterPolicy, false)
	str(OutboxAttrTraceparent, &it.Traceparent, false)
	if v, ok := av[OutboxAttrArgs]; ok {
		if v.M == nil {
			errs = append(errs, invalidItem("args must be a map (M) of strings"))
		} else {
			it.Args = make(map[string]string, len(v.M))
			for k, a := range v.M {
				if a.S == nil {
					errs = append(errs, invalidItem("args.%s must be a string (S)", clipValue(k)))
					continue
				}
				it.Args[k] = *a.S
			}
		}
	}
	if v, ok := av[OutboxAttrDelaySeconds]; ok {
		n, err := itemNumber(v)
		if err != nil {
			errs = append(errs, invalidItem("delaySeconds %s", err))
		} else {
			d := int(n)
			it.DelaySeconds = &d
		}
	}
	if v, ok := av[OutboxAttrExpiresAt]; ok {
		n, err := itemNumber(v)
		if err != nil {
			errs = append(errs, invalidItem("expiresAt %s", err))
		}
		it.ExpiresAt = n
	}
	if len(errs) > 0 {
		return OutboxItem{}, errors.Join(errs...)
	}
	return it, it.Check(pk)
}

func itemNumber(v OutboxValue) (int64, error) {
	if v.N == nil {
		return 0, errors.New("must be a number (N)")
	}
	n, err := strconv.ParseInt(*v.N, 10, 64)
	if err != nil {
		return 0, errors.New("must be a whole number")
	}
	return n, nil
}

// OutboxAttributes is the item as attribute values of kind V, built with str,
// num and mapOf: how the producer's helper writes it with the SDK's types.
func OutboxAttributes[V any](it OutboxItem, str func(string) V, num func(int64) V, mapOf func(map[string]V) V) map[string]V {
	out := map[string]V{
		OutboxAttrPK: str(it.PK()), OutboxAttrProducer: str(it.Producer), OutboxAttrIdempotencyKey: str(it.IdempotencyKey),
		OutboxAttrType: str(it.Type), OutboxAttrExpiresAt: num(it.ExpiresAt),
	}
	args := make(map[string]V, len(it.Args))
	for _, k := range slices.Sorted(maps.Keys(it.Args)) {
		args[k] = str(it.Args[k])
	}
	out[OutboxAttrArgs] = mapOf(args)
	for name, v := range map[string]string{OutboxAttrKey: it.Key, OutboxAttrRunAt: it.RunAt, OutboxAttrDuplicatePolicy: it.Policy, OutboxAttrCorrelationID: it.CorrelationID,
		OutboxAttrTraceparent: it.Traceparent} {
		if v != "" {
			out[name] = str(v)
		}
	}
	if it.DelaySeconds != nil {
		out[OutboxAttrDelaySeconds] = num(int64(*it.DelaySeconds))
	}
	return out
}

// clip keeps a text quoted in a reason short and printable.
func clipValue(s string) string {
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
