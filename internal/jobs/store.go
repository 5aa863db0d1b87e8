package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/lifetime"
)

// DynamoAPI is the part of the DynamoDB client the store uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Markers is what the store needs of the effect markers: reads (the derived
// states come from them) and the tombstone a cancel writes. *dynamostore.Store is
// one.
type Markers interface {
	Table() string
	Peek(ctx context.Context, k engine.Key) (engine.Record, bool, error)
	Decode(av map[string]types.AttributeValue) (engine.Record, bool, error)
	Tombstone(ctx context.Context, k engine.Key, due time.Time) (engine.Record, error)
}

// Attribute names of the jobs table.
const (
	AttrPK        = "pk"
	AttrState     = "state"
	AttrJobID     = "jobId"
	AttrExpiresAt = ddb.AttrExpiresAt
)

// JobPK returns the table key of a job record.
func JobPK(jobID string) string { return "job#" + jobID }

// DedupPK returns the table key of the dedup pointer of (caller, type, key).
// The caller is escaped so that a '#' in it cannot make two different triples
// share a key (the type has none, the key comes last).
func DedupPK(caller, jobType, key string) string {
	return "dedup#" + ddb.EscapeKeyPart(caller) + "#" + jobType + "#" + key
}

// Store is the jobs table as the enqueue API uses it. Its zero value is not
// usable; call NewStore.
type Store struct {
	client  DynamoAPI
	table   string
	markers Markers
	// Now is the clock (time.Now if nil).
	Now func() time.Time
	// PendingTimeout is how long a Pending job belongs to the request that
	// reserved it (DefaultPendingTimeout if 0).
	PendingTimeout time.Duration
	// Schedules deletes the one-time schedule of a job due later than
	// MaxQueueDelay when it is cancelled or run now (nil: no job has one).
	// *schedule.Scheduler is one.
	Schedules ScheduleDeleter
	// Index pages what the sweeps must look at (the index sweep; nil: the
	// sweeps refuse to run). *sweepindex.Index is one.
	Index SweepIndex
	// SweepWindow is how many listed ids a sweep (of schedules, of
	// continuations) takes on at a time, a page of one shard of its index
	// (DefaultSweepWindow if 0).
	SweepWindow int
	// SweepParallel is how many shards of its index a sweep works on at
	// once (DefaultSweepParallel if 0).
	SweepParallel int
}

// ScheduleDeleter deletes the one-time schedule of a job: existed is false
// when there was none (it fired, or was deleted before), which is no error.
type ScheduleDeleter interface {
	Delete(ctx context.Context, jobID string) (existed bool, err error)
}

// deleteSchedule deletes the schedule of j when it may have one and the
// store knows the schedules; existed reports whether one was deleted.
func (s *Store) deleteSchedule(ctx context.Context, j Job) (existed bool, err error) {
	if s.Schedules == nil || !j.MayHaveSchedule() {
		return false, nil
	}
	existed, err = s.Schedules.Delete(ctx, j.ID)
	if err != nil {
		return false, fmt.Errorf("jobs: %w", err)
	}
	return existed, nil
}

// NewStore returns the store on table. markers reads the effect markers the
// derived states come from (nil: no marker is ever found, and Cancel is
// refused).
func NewStore(client DynamoAPI, table string, markers Markers) *Store {
	return &Store{client: client, table: table, markers: markers}
}

func (s *Store) now() time.Time { return ddb.Now(s.Now) }

func (s *Store) pendingTimeout() time.Duration {
	return ddb.DurationOr(s.PendingTimeout, DefaultPendingTimeout)
}

// record is a job record as stored.
type record struct {
	PK             string `dynamodbav:"pk"`
	JobID          string `dynamodbav:"jobId"`
	Caller         string `dynamodbav:"caller"`
	Type           string `dynamodbav:"type"`
	Key            string `dynamodbav:"key"`
	State          State  `dynamodbav:"state"`
	Queue          string `dynamodbav:"queue"`
	CorrelationID  string `dynamodbav:"correlationId"`
	TraceID        string `dynamodbav:"traceId,omitempty"`
	Message        string `dynamodbav:"message"`
	Fingerprint    string `dynamodbav:"fingerprint,omitempty"`
	Attempts       int    `dynamodbav:"attempts"`
	LastErrorClass string `dynamodbav:"lastErrorClass,omitempty"`
	LastOutcome    string `dynamodbav:"lastOutcome,omitempty"`
	LastReason     string `dynamodbav:"lastReason,omitempty"`
	// History is every outcome a worker, an operator or the caller wrote,
	// oldest first (appendOutcome); a repeated park is written once.
	History   []storedOutcome `dynamodbav:"history,omitempty"`
	CreatedAt int64           `dynamodbav:"createdAt"` // epoch milliseconds
	UpdatedAt int64           `dynamodbav:"updatedAt"`
	RunAt     int64           `dynamodbav:"runAt"`
	FailedAt  int64           `dynamodbav:"failedAt,omitempty"`
	ExpiresAt int64           `dynamodbav:"expiresAt,omitempty"` // epoch seconds (TTL); none while a continuation waits
	// A continuation's parent and policy; when a continuation was
	// released; a Failed job's dropped letter.
	After         string `dynamodbav:"after,omitempty"`
	AfterPolicy   string `dynamodbav:"afterPolicy,omitempty"`
	ReleasedAt    int64  `dynamodbav:"releasedAt,omitempty"`
	LetterDropped bool   `dynamodbav:"letterDropped,omitempty"`
	// SendFailedAt: when a release's send of the continuation failed (it
	// stays Pending; see Store.sendReleased).
	SendFailedAt int64 `dynamodbav:"sendFailedAt,omitempty"`
}

// pointer is a dedup pointer as stored.
type pointer struct {
	PK        string `dynamodbav:"pk"`
	JobID     string `dynamodbav:"jobId"`
	ExpiresAt int64  `dynamodbav:"expiresAt,omitempty"` // none while its job is a waiting continuation
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// activeExpiry is the TTL of a record (and its dedup pointer) that is not
// yet terminal and runs at runAt (lifetime.ActiveRecord). Parking extends it
// from the time of the park.
func activeExpiry(runAt time.Time) int64 { return lifetime.ActiveRecord(runAt).Unix() }

// terminalExpiry is the TTL of a record (and its pointer) that became
// terminal at now, of a job due at due: TerminalRetention, and never before
// the job's last delivery (lifetime.Until).
func terminalExpiry(now, due time.Time) int64 {
	return lifetime.Until(now, due, lifetime.TerminalRecord).Unix()
}

func toRecord(j Job) record {
	r := record{
		PK: JobPK(j.ID), JobID: j.ID, Caller: j.Caller, Type: j.Type, Key: j.Key, State: j.stored,
		Queue: j.Queue, CorrelationID: j.CorrelationID, TraceID: j.TraceID, Message: j.Message, Fingerprint: j.Fingerprint,
		Attempts: j.Attempts, LastErrorClass: j.LastErrorClass, LastOutcome: j.LastOutcome, LastReason: j.LastReason,
		CreatedAt: ms(j.CreatedAt), UpdatedAt: ms(j.UpdatedAt), RunAt: ms(j.RunAt), ExpiresAt: activeExpiry(j.RunAt),
		After: j.After, AfterPolicy: string(j.AfterPolicy), ReleasedAt: ms(j.ReleasedAt),
	}
	if j.stored == StateAwaitingContinuation {
		// It waits for its parent, however long that takes (a parked
		// parent lives as long as its switch is off): no TTL until its
		// parent's end (or the continuation sweep) decides it.
		r.ExpiresAt = 0
	}
	if j.FailedAt != nil {
		r.FailedAt = ms(*j.FailedAt)
	}
	for _, o := range j.recorded {
		r.History = append(r.History, storedOutcome{At: ms(o.At), Outcome: o.Outcome, Reason: o.Reason})
	}
	return r
}

func (r record) job() Job {
	j := Job{
		ID: r.JobID, Caller: r.Caller, Type: r.Type, Key: r.Key, State: r.State, stored: r.State,
		Queue: r.Queue, CorrelationID: r.CorrelationID, TraceID: r.TraceID, Message: r.Message, Fingerprint: r.Fingerprint,
		Attempts: r.Attempts, LastErrorClass: r.LastErrorClass, LastOutcome: r.LastOutcome, LastReason: r.LastReason,
		CreatedAt: fromMS(r.CreatedAt), UpdatedAt: fromMS(r.UpdatedAt), RunAt: fromMS(r.RunAt),
		After: r.After, AfterPolicy: contract.AfterPolicy(r.AfterPolicy),
		ReleasedAt: fromMS(r.ReleasedAt), LetterDropped: r.LetterDropped,
		sendFailed: r.SendFailedAt != 0 && r.SendFailedAt >= r.UpdatedAt,
	}
	if r.FailedAt != 0 {
		t := fromMS(r.FailedAt)
		j.FailedAt = &t
	}
	for _, o := range r.History {
		j.recorded = append(j.recorded, OutcomeRecord{At: fromMS(o.At), Outcome: o.Outcome, Reason: o.Reason})
	}
	return j
}

func keyAV(pk string) map[string]types.AttributeValue { return ddb.KeyS(AttrPK, pk) }

// getLive reads the item pk of table with a consistent read into out; ok is
// false when there is none or it has expired at now (TTL deletion is never
// trusted).
func getLive(ctx context.Context, c ddb.Getter, table, pk string, now time.Time, out any) (bool, error) {
	ok, err := ddb.GetLive(ctx, c, table, keyAV(pk), now, out)
	if err != nil {
		return false, fmt.Errorf("jobs: get %s: %w", pk, err)
	}
	return ok, nil
}

// updateItem applies upd to the item pk if cond holds: one conditional
// UpdateItem. A failed condition is returned as it is
// (ddb.IsConditionFailed tells it).
func (s *Store) updateItem(ctx context.Context, pk string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	u, err := ddb.Update(s.table, keyAV(pk), upd, cond, false)
	if err != nil {
		return err
	}
	_, err = s.client.UpdateItem(ctx, ddb.UpdateInput(u))
	return err
}

// getItem reads one live item into out (see getLive).
func (s *Store) getItem(ctx context.Context, pk string, out any) (bool, error) {
	return getLive(ctx, s.client, s.table, pk, s.now(), out)
}

// Get returns the job with its derived state: the record (consistent read)
// combined with a peek of its effect marker, through View. A missing or
// expired record is ErrNotFound. Get does not check the caller; the HTTP
// layer compares Job.Caller with the requester.
func (s *Store) Get(ctx context.Context, jobID string) (Job, error) {
	j, m, has, err := s.read(ctx, jobID)
	if err != nil {
		return Job{}, err
	}
	return s.view(j, m, has), nil
}

// read returns job jobID's record as stored (before View) and its marker.
func (s *Store) read(ctx context.Context, jobID string) (j Job, m engine.Record, has bool, err error) {
	var r record
	ok, err := s.getItem(ctx, JobPK(jobID), &r)
	if err != nil {
		return Job{}, m, false, err
	}
	if !ok {
		return Job{}, m, false, fmt.Errorf("%w: %s", ErrNotFound, jobID)
	}
	j = r.job()
	if s.markers != nil {
		if m, has, err = s.markers.Peek(ctx, j.MarkerKey()); err != nil {
			return Job{}, m, false, fmt.Errorf("jobs: derive state of %s: %w", jobID, err)
		}
	}
	return j, m, has, nil
}

// find reads a job of jobType and its marker in one consistent
// BatchGetItem, and derives its state; found is false when it does not exist
// or has expired.
func (s *Store) find(ctx context.Context, jobID, jobType string) (Job, bool, error) {
	if s.markers == nil {
		j, err := s.Get(ctx, jobID)
		if err != nil {
			return Job{}, false, nilIfNotFound(err)
		}
		return j, true, nil
	}
	mk := dynamostore.KeyAV(engine.Key{Type: jobType, JobID: jobID})
	req := map[string]types.KeysAndAttributes{
		s.table:           {Keys: []map[string]types.AttributeValue{keyAV(JobPK(jobID))}, ConsistentRead: aws.Bool(true)},
		s.markers.Table(): {Keys: []map[string]types.AttributeValue{mk}, ConsistentRead: aws.Bool(true)},
	}
	var (
		rec      record
		found    bool
		m        engine.Record
		hasMark  bool
		attempts int
	)
	for len(req) > 0 {
		if attempts++; attempts > 5 {
			return Job{}, false, fmt.Errorf("jobs: find %s: keys still unprocessed", jobID)
		}
		out, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return Job{}, false, fmt.Errorf("jobs: find %s: %w", jobID, err)
		}
		for _, item := range out.Responses[s.table] {
			if found, err = ddb.DecodeLive(item, s.now(), &rec); err != nil {
				return Job{}, false, fmt.Errorf("jobs: %w", err)
			}
		}
		for _, item := range out.Responses[s.markers.Table()] {
			if m, hasMark, err = s.markers.Decode(item); err != nil {
				return Job{}, false, err
			}
		}
		req = out.UnprocessedKeys
	}
	if !found {
		return Job{}, false, nil
	}
	return s.view(rec.job(), m, hasMark), true, nil
}

// view is View at the store's clock.
func (s *Store) view(j Job, m engine.Record, has bool) Job { return View(j, m, has, s.now()) }
