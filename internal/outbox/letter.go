package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/obs"
)

// A summary, the body of the letter of an item too large to keep whole,
// keeps at most this much: the first excerptBytes of the item as JSON, and
// the names (each cut to fieldNameBytes) and sizes of its first
// summaryFields fields. Escaped as JSON that is at most about 50 KB, well
// inside deadletter.MaxBody.
const (
	excerptBytes   = 4 << 10
	summaryFields  = 32
	fieldNameBytes = 64
)

// deadLetter records the record's item as a dead letter with its reason,
// counts it and logs the alert. The letter is filed under the item's job
// when its pk proves whose it is (it.Producer and it.IdempotencyKey, which
// relay takes from the pk for an item that breaks a rule), else under the
// stream record. A failure to write the letter is transient (the shard is
// retried from the record), except a letter the table refuses as such
// (deadletter.ErrRefused): no retry would store it, so it is counted and
// alerted with the item's key and reason in the log line, and the relay
// goes on; the item itself stays in the outbox table until it expires.
func (r *Relay) deadLetter(ctx context.Context, log *slog.Logger, rec events.DynamoDBEventRecord, it contract.OutboxItem, reason string) error {
	body, whole := letterBody(rec.Change.NewImage)
	dl := deadletter.Record{ID: "outbox:" + rec.EventID, Type: deadletter.UnknownType, Body: body, BodyTruncated: whole > 0, BodyBytes: whole,
		Reason: reason, SourceQueue: SourceOutbox, ReceiveCount: 1, Status: deadletter.StatusDead, CorrelationID: it.CorrelationID}
	if it.Producer != "" && it.IdempotencyKey != "" {
		// Under its own id, never the job id: the item's job may have a
		// dead letter of its own (it failed), which a bad rewrite of the
		// item must not overwrite, or that job could no longer be redriven.
		dl.ID, dl.JobID = LetterID(it.JobID()), it.JobID()
	}
	if it.Type != "" {
		dl.Type = it.Type
	}
	dl = deadletter.Fit(dl)
	saved, err := r.DeadLetters.SaveDelivery(ctx, dl, rec.EventID)
	switch {
	case errors.Is(err, deadletter.ErrRefused):
		r.Metrics.Count(engine.DeadLetters, dl.Type, 1)
		log.Error("dead letter not stored: outbox item breaks a rule, and the table refused its letter; needs a person", "alert", true,
			"deadLetterId", dl.ID, "pk", pkOf(rec.Change.NewImage), obs.KeyReason, dl.Reason, "sourceQueue", SourceOutbox, obs.KeyError, obs.Redact(err))
		return nil
	case err != nil:
		return fmt.Errorf("record the dead letter: %w", err)
	}
	if saved.New {
		r.Metrics.Count(engine.DeadLetters, dl.Type, 1)
		log.Error("dead letter: outbox item breaks a rule and needs a person", "alert", true, "deadLetterId", dl.ID,
			obs.KeyReason, dl.Reason, "sourceQueue", SourceOutbox)
	}
	return nil
}

// LetterID is the id of the dead letter of a bad outbox item whose job id
// is jobID: "outbox:<jobId>", apart from the job's own letters (keyed by the
// job id), and the same for every bad rewrite of the item.
func LetterID(jobID string) string { return contract.OutboxCallerPrefix + jobID }

// owner is the producer and the idempotency key an item's pk proves, "" and
// "" when it proves none (contract.OutboxKeyOwner).
func owner(image map[string]contract.OutboxValue) (producer, key string) {
	if v := image[contract.OutboxAttrPK]; v.S != nil {
		producer, key, _ = contract.OutboxKeyOwner(*v.S)
	}
	return producer, key
}

// pkOf is the image's pk, cut to deadletter.MaxField ("" when it has no
// string pk).
func pkOf(image map[string]events.DynamoDBAttributeValue) string {
	v, ok := image[contract.OutboxAttrPK]
	if !ok || v.DataType() != events.DataTypeString {
		return ""
	}
	pk, _ := deadletter.Cut(v.String(), deadletter.MaxField)
	return pk
}

// summary is the body of the letter of an item too large to keep whole.
type summary struct {
	// PK is the item's key.
	PK string `json:"pk"`
	// Fields is the size of each field, in bytes as DynamoDB counts them
	// (attrSize), by name.
	Fields map[string]int `json:"fields"`
	// MoreFields counts the fields left out of Fields.
	MoreFields int `json:"moreFields,omitempty"`
	// Excerpt is the start of the item as JSON.
	Excerpt string `json:"excerpt"`
}

// letterBody is what the letter keeps of the item: the item as JSON (its
// strings as they are, <, > and & unescaped) when that fits a letter whole
// (deadletter.MaxBody), else a summary: its key, its fields' names and
// sizes, and the start of its JSON. whole is then the size of the item as
// JSON, 0 when the body is the whole item.
func letterBody(image map[string]events.DynamoDBAttributeValue) (body string, whole int) {
	item := plainJSON(Plain(Values(image)))
	if len(item) <= deadletter.MaxBody {
		return item, 0
	}
	s := summary{PK: pkOf(image), Fields: map[string]int{}}
	s.Excerpt, _ = deadletter.Cut(item, excerptBytes)
	names := slices.Sorted(maps.Keys(image))
	if len(names) > summaryFields {
		s.MoreFields, names = len(names)-summaryFields, names[:summaryFields]
	}
	for _, name := range names {
		short, _ := deadletter.Cut(name, fieldNameBytes)
		s.Fields[short] = attrSize(image[name])
	}
	return plainJSON(s), len(item)
}

// plainJSON is v as JSON without escaping <, > and & (which json.Marshal
// writes as six bytes each).
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings, numbers and maps of them: never fails
	return strings.TrimSuffix(b.String(), "\n")
}

// attrSize is about the size DynamoDB counts for a value: a string's or a
// binary's bytes, a number's text, 1 for a boolean or null, the sum of a
// set's members, and 3 bytes plus each element (and its name) plus 1 for
// a list or a map.
func attrSize(v events.DynamoDBAttributeValue) int {
	n := 0
	switch v.DataType() {
	case events.DataTypeString:
		return len(v.String())
	case events.DataTypeNumber:
		return len(v.Number())
	case events.DataTypeBinary:
		return len(v.Binary())
	case events.DataTypeBoolean, events.DataTypeNull:
		return 1
	case events.DataTypeStringSet:
		for _, s := range v.StringSet() {
			n += len(s)
		}
	case events.DataTypeNumberSet:
		for _, s := range v.NumberSet() {
			n += len(s)
		}
	case events.DataTypeBinarySet:
		for _, b := range v.BinarySet() {
			n += len(b)
		}
	case events.DataTypeList:
		n = 3
		for _, e := range v.List() {
			n += attrSize(e) + 1
		}
	case events.DataTypeMap:
		n = 3
		for k, e := range v.Map() {
			n += len(k) + attrSize(e) + 1
		}
	}
	return n
}
