package deadletter

import (
	"strings"
	"unicode/utf8"
)

// A letter is one DynamoDB item, and DynamoDB refuses an item over 400 KB
// (the UTF-8 bytes of its attribute names and values). A letter refused for
// its size would be retried for ever: the dlq function would never record
// it, and the outbox relay would stop its shard on it. So every text a
// letter stores has a bound, and the bounds together leave room for the
// rest of the item (its times, counts and the SQS ids of its deliveries):
// MaxBody + MaxReason + six fields of MaxField is about 270 KB.
const (
	// MaxBody is the most of a message's body a letter keeps, in bytes:
	// 256 KiB, the size of an SQS message before SQS allowed 1 MiB, and of
	// EventBridge Scheduler's input. Every job runstwice sends fits whole
	// (a request's body is at most 16 KiB).
	MaxBody = 256 << 10
	// MaxReason is the most of a reason a letter keeps, in bytes.
	MaxReason = 8 << 10
	// MaxField is the most a letter keeps of each other text (job id, type,
	// correlation id, source queue, schedule, trace header), in bytes; the
	// type is also a metric's dimension, whose value CloudWatch limits to
	// 1024.
	MaxField = 1 << 10
)

// TruncatedNote ends the reason of a letter whose body is not whole.
const TruncatedNote = "; the letter keeps only part of the message's body (shortened), so it cannot be redriven as it is"

// Cut returns s cut to at most max bytes, never inside a UTF-8 character,
// and whether it was cut.
func Cut(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	if max <= 0 {
		return "", true
	}
	i := max
	// Back to the start of the character at max: at most UTFMax-1 bytes
	// (further back only in text that is not UTF-8, cut where it is).
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	if !utf8.RuneStart(s[i]) {
		i = max
	}
	return s[:i], true
}

// Fit returns rec with every text cut to its bound (Cut), so that the
// letter always fits in the table. A body over MaxBody keeps its first
// MaxBody bytes: the letter is then BodyTruncated, BodyBytes is the whole
// body's size, and its reason ends with TruncatedNote. A letter a writer
// marked BodyTruncated itself (a body it shortened, or one that came
// shortened) gets the note too. The ID is a key and is never cut (every
// writer's is a UUID, a prefixed one, or an SQS message id). Fit of a
// fitted letter changes nothing.
func Fit(rec Record) Record {
	if body, cut := Cut(rec.Body, MaxBody); cut {
		if !rec.BodyTruncated {
			rec.BodyBytes = len(rec.Body)
		}
		rec.Body, rec.BodyTruncated = body, true
	}
	if rec.BodyTruncated && !strings.HasSuffix(rec.Reason, TruncatedNote) {
		reason, _ := Cut(rec.Reason, MaxReason-len(TruncatedNote))
		rec.Reason = reason + TruncatedNote
	}
	rec.Reason, _ = Cut(rec.Reason, MaxReason)
	for _, f := range []*string{&rec.JobID, &rec.Type, &rec.CorrelationID, &rec.SourceQueue, &rec.Schedule, &rec.TraceHeader} {
		*f, _ = Cut(*f, MaxField)
	}
	return rec
}
