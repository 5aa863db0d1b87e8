package jobs

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/ddb"
)

// View returns job j (a record as stored, from the store or DecodeRecord)
// as every view shows it — GET /v1/jobs/{jobId}, the DELETE answer, `jobctl
// jobs get|list` and the local web view: the state Derive gives with the
// job's marker m (when hasMarker) at now, and the fields around it made to
// agree with that state:
//
//   - attempts: at least 1 once a worker touched the job (its marker is
//     leased, claimed or failed, or a worker parked it); a cancel's
//     tombstone is no delivery;
//   - lastOutcome and lastReason: the outcome that set the state, the
//     earlier ones in History (settleOutcome);
//   - updatedAt: when the state was last reached — the record's last write,
//     or later when the state comes from elsewhere: the marker's claim
//     (processedAt) for Succeeded, Failed and Cancelled, the lease's start
//     for Processing, the run time for a Scheduled job that reads Enqueued,
//     the end of the queue's retention for Expired;
//   - every time in milliseconds, UTC (the record's precision).
func View(j Job, m engine.Record, hasMarker bool, now time.Time) Job {
	j.State = derive(j.stored, j.RunAt, j.GoneAt(), m, hasMarker, now)
	worked := hasMarker && m.State != engine.StateCancelled
	if (worked || j.LastOutcome == OutcomeParked) && j.Attempts == 0 {
		j.Attempts = 1
	}
	j.settleOutcome()
	j.CreatedAt, j.RunAt = millis(j.CreatedAt), millis(j.RunAt)
	j.UpdatedAt = millis(later(j.UpdatedAt, reachedAt(j, m, hasMarker)))
	if j.FailedAt != nil {
		t := millis(*j.FailedAt)
		j.FailedAt = &t
	}
	return j
}

// OutcomeSucceeded is the lastOutcome of a job whose effect ran (its
// marker claimed) and that recorded no other end (noop, skipped).
const OutcomeSucceeded = "succeeded"

// settleOutcome makes lastOutcome the outcome that set the job's state, as
// far as its record and marker tell: succeeded for a job whose effect ran,
// cancelled, dead-lettered for a Failed job, parked only while Parked,
// redriven while the redrive's message is on its way, noop, skipped and
// claim-failed as recorded. History is every other outcome the record
// holds, oldest first, at most MaxHistory: its history attribute, the park
// that lastOutcome alone keeps (a park is never appended, see withOutcome)
// once something overtook it, each entry once however often a retried
// write appended it.
func (j *Job) settleOutcome() {
	current, reason := j.LastOutcome, j.LastReason
	switch j.State {
	case StateSucceeded:
		if current != OutcomeNoop && current != OutcomeSkipped && current != OutcomeClaimFailed {
			current, reason = OutcomeSucceeded, ""
		}
	case StateCancelled:
		if current != OutcomeCancelled {
			current, reason = OutcomeCancelled, ""
		}
	case StateFailed:
		if current != OutcomeDeadLettered && current != OutcomeClaimFailed {
			current, reason = OutcomeDeadLettered, j.LastErrorClass
		}
	case StateParked:
	default: // on its way: a redrive sent it (and says so); a park is behind it
		if current == OutcomeParked {
			current, reason = "", ""
		}
	}
	all := slices.Clone(j.recorded)
	if j.LastOutcome != "" && (j.LastOutcome == OutcomeParked || len(all) == 0) {
		// A park, or a record written before records kept a history.
		all = append(all, OutcomeRecord{At: j.UpdatedAt, Outcome: j.LastOutcome, Reason: j.LastReason})
	}
	slices.SortStableFunc(all, func(a, b OutcomeRecord) int { return a.At.Compare(b.At) })
	all = slices.CompactFunc(all, func(a, b OutcomeRecord) bool { return a.Outcome == b.Outcome && a.Reason == b.Reason })
	if n := len(all); n > 0 && all[n-1].Outcome == current && all[n-1].Reason == reason {
		all = all[:n-1] // the outcome shown as the last one
	}
	for i := range all {
		all[i].At = millis(all[i].At)
	}
	j.History = all[max(len(all)-MaxHistory, 0):]
	if len(j.History) == 0 {
		j.History = nil
	}
	j.LastOutcome, j.LastReason = current, reason
	if j.State != StateFailed {
		// The class of a failure the job came back from (a redrive) is
		// its history's, not its state's.
		j.LastErrorClass = ""
	}
}

// reachedAt is when j's derived state began, as far as something other
// than the record's own updatedAt says (zero: nothing does).
func reachedAt(j Job, m engine.Record, hasMarker bool) time.Time {
	switch j.State {
	case StateSucceeded, StateFailed, StateCancelled:
		if hasMarker && m.State != engine.StateLeased {
			return m.ProcessedAt
		}
	case StateProcessing:
		return m.LeasedAt
	case StateEnqueued:
		if j.stored == StateScheduled {
			return j.RunAt
		}
	case StateExpired:
		if j.stored != StateExpired {
			return j.GoneAt()
		}
	}
	return time.Time{}
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// millis is t in milliseconds, UTC; the zero time stays zero.
func millis(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Millisecond).UTC()
}

// DecodeRecord decodes a job record item as a Scan or GetItem returns it,
// before View; ok is false when the item is not live at now (absent or past
// its expiresAt).
func DecodeRecord(item map[string]types.AttributeValue, now time.Time) (Job, bool, error) {
	var r record
	ok, err := ddb.DecodeLive(item, now, &r)
	if err != nil {
		return Job{}, false, fmt.Errorf("jobs: decode record: %w", err)
	}
	if !ok {
		return Job{}, false, nil
	}
	return r.job(), true, nil
}

// BatchPeeker reads many effect markers at once; *dynamostore.Store is one.
type BatchPeeker interface {
	PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error)
}

// ViewAll is View of every record, their markers read in one PeekBatch
// (markers nil: no marker is found).
func ViewAll(ctx context.Context, markers BatchPeeker, records []Job, now time.Time) ([]Job, error) {
	found := map[engine.Key]engine.Record{}
	if markers != nil && len(records) > 0 {
		keys := make([]engine.Key, len(records))
		for i, j := range records {
			keys[i] = j.MarkerKey()
		}
		var err error
		if found, err = markers.PeekBatch(ctx, keys); err != nil {
			return nil, fmt.Errorf("jobs: derive states: %w", err)
		}
	}
	out := make([]Job, len(records))
	for i, j := range records {
		m, has := found[j.MarkerKey()]
		out[i] = View(j, m, has, now)
	}
	return out, nil
}
