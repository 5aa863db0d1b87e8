// Package joblist reads the jobs table for operators (`jobctl jobs list`
// and `jobs get`): a scan with derived states, and every attribute of one
// record. It is never linked into a function, whose roles are not granted
// Scan.
package joblist

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// ListAPI is the part of the DynamoDB client a Lister uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
type ListAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// BatchPeeker reads many effect markers at once; *marker.Dynamo is one.
type BatchPeeker interface {
	PeekBatch(ctx context.Context, keys []marker.Key) (map[marker.Key]marker.Record, error)
}

// Lister reads the jobs table for operators (`jobctl jobs list` and `jobs
// get`): a scan, not a query, since it is not on any request path.
type Lister struct {
	client  ListAPI
	table   string
	markers BatchPeeker
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewLister returns a lister of table whose states are derived with markers
// (nil: no marker is ever found).
func NewLister(client ListAPI, table string, markers BatchPeeker) *Lister {
	return &Lister{client: client, table: table, markers: markers}
}

func (l *Lister) now() time.Time { return ddb.Now(l.Now) }

// Filter selects jobs; a zero field selects everything.
type Filter struct {
	Type  string
	State jobs.State // the derived state
	// Since keeps jobs created at or after it.
	Since time.Time
}

// Summary is one job as listed: the record's fields with the derived state.
type Summary struct {
	ID             string     `json:"jobId" dynamodbav:"jobId"`
	Type           string     `json:"type" dynamodbav:"type"`
	Key            string     `json:"key" dynamodbav:"key"`
	State          jobs.State `json:"state" dynamodbav:"-"`
	StoredState    jobs.State `json:"storedState" dynamodbav:"state"`
	Caller         string     `json:"caller" dynamodbav:"caller"`
	Queue          string     `json:"queue" dynamodbav:"queue"`
	CorrelationID  string     `json:"correlationId" dynamodbav:"correlationId"`
	Attempts       int        `json:"attempts" dynamodbav:"attempts"`
	LastErrorClass string     `json:"lastErrorClass,omitempty" dynamodbav:"lastErrorClass"`
	CreatedAt      time.Time  `json:"createdAt" dynamodbav:"-"`
	UpdatedAt      time.Time  `json:"updatedAt" dynamodbav:"-"`
	RunAt          time.Time  `json:"runAt" dynamodbav:"-"`
}

// summaryItem is what the scan decodes: the summary and its epoch-ms times.
type summaryItem struct {
	Summary
	CreatedAt int64 `dynamodbav:"createdAt"`
	UpdatedAt int64 `dynamodbav:"updatedAt"`
	RunAt     int64 `dynamodbav:"runAt"`
}

// List returns the jobs f selects, newest first. The type and time filters
// are applied by the scan; the state filter after the states are derived,
// with one BatchGetItem of markers per 100 jobs.
func (l *Lister) List(ctx context.Context, f Filter) ([]Summary, error) {
	now := l.now()
	cond := expression.Name(jobs.AttrPK).BeginsWith("job#")
	if f.Type != "" {
		cond = cond.And(expression.Name("type").Equal(expression.Value(f.Type)))
	}
	if !f.Since.IsZero() {
		cond = cond.And(expression.Name("createdAt").GreaterThanEqual(expression.Value(f.Since.UnixMilli())))
	}
	expr, err := expression.NewBuilder().WithFilter(cond).Build()
	if err != nil {
		return nil, fmt.Errorf("joblist: list: %w", err)
	}
	p := dynamodb.NewScanPaginator(l.client, &dynamodb.ScanInput{
		TableName: aws.String(l.table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	var found []Summary
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("joblist: list %s: %w", l.table, err)
		}
		for _, item := range page.Items {
			var it summaryItem
			live, err := ddb.DecodeLive(item, now, &it)
			if err != nil {
				return nil, fmt.Errorf("joblist: list: %w", err)
			}
			if !live {
				continue
			}
			s := it.Summary
			s.CreatedAt, s.UpdatedAt, s.RunAt = msTime(it.CreatedAt), msTime(it.UpdatedAt), msTime(it.RunAt)
			found = append(found, s)
		}
	}
	if err := l.derive(ctx, found, now); err != nil {
		return nil, err
	}
	if f.State != "" {
		found = slices.DeleteFunc(found, func(s Summary) bool { return s.State != f.State })
	}
	slices.SortFunc(found, func(a, b Summary) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return found, nil
}

// derive fills the state of every summary from its record and its marker.
func (l *Lister) derive(ctx context.Context, list []Summary, now time.Time) error {
	markers := map[marker.Key]marker.Record{}
	if l.markers != nil && len(list) > 0 {
		keys := make([]marker.Key, len(list))
		for i, s := range list {
			keys[i] = marker.Key{Handler: s.Type, MessageKey: s.ID}
		}
		var err error
		if markers, err = l.markers.PeekBatch(ctx, keys); err != nil {
			return fmt.Errorf("joblist: list: derive states: %w", err)
		}
	}
	for i := range list {
		s := &list[i]
		m, has := markers[marker.Key{Handler: s.Type, MessageKey: s.ID}]
		s.State = jobs.Derive(s.StoredState, s.RunAt, m, has, now)
		if has && s.Attempts == 0 {
			s.Attempts = 1
		}
	}
	return nil
}

// Attributes returns every attribute the record of job jobID has, as stored
// (numbers as attributevalue.Number, their text as stored), for an operator to read; a
// missing or expired record is jobs.ErrNotFound.
func (l *Lister) Attributes(ctx context.Context, jobID string) (map[string]any, error) {
	res, err := l.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(l.table), ConsistentRead: aws.Bool(true), Key: ddb.KeyS(jobs.AttrPK, jobs.JobPK(jobID)),
	})
	if err != nil {
		return nil, fmt.Errorf("joblist: get %s: %w", jobID, err)
	}
	if !ddb.Live(res.Item, l.now()) {
		return nil, fmt.Errorf("%w: %s", jobs.ErrNotFound, jobID)
	}
	out := map[string]any{}
	if err := attributevalue.UnmarshalMapWithOptions(res.Item, &out, func(o *attributevalue.DecoderOptions) {
		o.UseNumber = true
	}); err != nil {
		return nil, fmt.Errorf("joblist: decode %s: %w", jobID, err)
	}
	return out, nil
}

// msTime reads a record's epoch-milliseconds time (0: none).
func msTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}
