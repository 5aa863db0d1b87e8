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
)

// ListAPI is the part of the DynamoDB client a Lister uses.
// Like every store, it declares its own SDK methods on purpose: the
// template's IAM test derives each function's actions from these interfaces
// (internal/dev/stack/iam_test.go).
type ListAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// Lister reads the jobs table for operators (`jobctl jobs list` and `jobs
// get`): a scan, not a query, since it is not on any request path.
type Lister struct {
	client  ListAPI
	table   string
	markers jobs.BatchPeeker
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewLister returns a lister of table whose states are derived with markers
// (nil: no marker is ever found).
func NewLister(client ListAPI, table string, markers jobs.BatchPeeker) *Lister {
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

// Summary is one job as listed: the job as jobs.View shows it (the same
// fields GET /v1/jobs/{jobId} shows), with the stored state and the caller
// an operator also sees.
type Summary struct {
	jobs.Job
	StoredState jobs.State `json:"storedState"`
	Caller      string     `json:"caller"`
}

// summary is the listed form of a job as jobs.View shows it.
func summary(j jobs.Job) Summary { return Summary{Job: j, StoredState: j.Stored(), Caller: j.Caller} }

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
	var found []jobs.Job
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("joblist: list %s: %w", l.table, err)
		}
		for _, item := range page.Items {
			j, live, err := jobs.DecodeRecord(item, now)
			if err != nil {
				return nil, fmt.Errorf("joblist: list: %w", err)
			}
			if live {
				found = append(found, j)
			}
		}
	}
	list, err := l.view(ctx, found, now)
	if err != nil {
		return nil, err
	}
	if f.State != "" {
		list = slices.DeleteFunc(list, func(s Summary) bool { return s.State != f.State })
	}
	slices.SortFunc(list, func(a, b Summary) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return list, nil
}

// view returns each record as jobs.View shows it, their markers read in
// one BatchGetItem.
func (l *Lister) view(ctx context.Context, records []jobs.Job, now time.Time) ([]Summary, error) {
	viewed, err := jobs.ViewAll(ctx, l.markers, records, now)
	if err != nil {
		return nil, fmt.Errorf("joblist: list: %w", err)
	}
	list := make([]Summary, len(viewed))
	for i, j := range viewed {
		list[i] = summary(j)
	}
	return list, nil
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
