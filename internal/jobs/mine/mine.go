// Package mine lists a caller's own jobs, newest first, from the jobs
// table's index byCaller (hash key caller, range key createdAt, every
// attribute projected): GET /v1/jobs. It queries, never scans, and reads
// the markers of a page in one BatchGetItem to derive each job's state as
// GET /v1/jobs/{jobId} shows it. Only the enqueue function links it; its
// role is granted Query on that index alone.
package mine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/ddb"
	"github.com/runstwice/runstwice/internal/jobs"
)

// Index is the jobs table's index of each caller's jobs by creation time
// (template.yaml).
const Index = "byCaller"

// QueryAPI is the part of the DynamoDB client a Lister uses. Like every
// store, it declares its own SDK methods on purpose: the template's IAM
// test derives each function's actions from these interfaces.
type QueryAPI interface {
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Lister lists callers' jobs.
type Lister struct {
	client  QueryAPI
	table   string
	markers jobs.BatchPeeker
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewLister returns the lister of table's jobs, their states derived with
// markers.
func NewLister(client QueryAPI, table string, markers jobs.BatchPeeker) *Lister {
	return &Lister{client: client, table: table, markers: markers}
}

// cursor is where a page ended: the index key of its last job.
type cursor struct {
	PK        string `json:"p"`
	CreatedAt int64  `json:"c"`
	Caller    string `json:"u"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s, caller string) (map[string]types.AttributeValue, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c cursor
	if err != nil || json.Unmarshal(b, &c) != nil || c.Caller != caller || c.PK == "" {
		return nil, jobs.ErrBadCursor
	}
	return map[string]types.AttributeValue{
		jobs.AttrPK: &types.AttributeValueMemberS{Value: c.PK},
		"caller":    &types.AttributeValueMemberS{Value: c.Caller},
		"createdAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(c.CreatedAt, 10)},
	}, nil
}

// List returns the page q selects. The type filter is the query's; the
// state, which is derived, is filtered after each batch's markers are read,
// so a page may take more than one query. It reads one job past the page to
// know whether another page follows.
func (l *Lister) List(ctx context.Context, q jobs.ListQuery) (jobs.ListPage, error) {
	limit := q.Limit
	if limit == 0 {
		limit = jobs.DefaultListLimit
	}
	if limit < 1 || limit > jobs.MaxListLimit {
		return jobs.ListPage{}, fmt.Errorf("mine: limit %d is not 1-%d", limit, jobs.MaxListLimit)
	}
	var start map[string]types.AttributeValue
	if q.Cursor != "" {
		var err error
		if start, err = decodeCursor(q.Cursor, q.Caller); err != nil {
			return jobs.ListPage{}, err
		}
	}
	keyCond := expression.Key("caller").Equal(expression.Value(q.Caller))
	b := expression.NewBuilder().WithKeyCondition(keyCond)
	if q.Type != "" {
		b = b.WithFilter(expression.Name("type").Equal(expression.Value(q.Type)))
	}
	expr, err := b.Build()
	if err != nil {
		return jobs.ListPage{}, fmt.Errorf("mine: list: %w", err)
	}
	now := ddb.Now(l.Now)
	var found []jobs.Job
	for {
		out, err := l.client.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(l.table), IndexName: aws.String(Index), ScanIndexForward: aws.Bool(false),
			KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
			ExclusiveStartKey: start, Limit: aws.Int32(int32(limit + 1)),
		})
		if err != nil {
			return jobs.ListPage{}, fmt.Errorf("mine: list %s: %w", l.table, err)
		}
		batch := make([]jobs.Job, 0, len(out.Items))
		for _, item := range out.Items {
			j, live, err := jobs.DecodeRecord(item, now)
			if err != nil {
				return jobs.ListPage{}, fmt.Errorf("mine: list: %w", err)
			}
			if live && j.Caller == q.Caller {
				batch = append(batch, j)
			}
		}
		viewed, err := jobs.ViewAll(ctx, l.markers, batch, now)
		if err != nil {
			return jobs.ListPage{}, err
		}
		for _, j := range viewed {
			if q.State == "" || j.State == q.State {
				found = append(found, j)
			}
		}
		if len(found) > limit || len(out.LastEvaluatedKey) == 0 {
			break
		}
		start = out.LastEvaluatedKey
	}
	if len(found) <= limit {
		return jobs.ListPage{Jobs: found}, nil
	}
	last := found[limit-1]
	return jobs.ListPage{Jobs: found[:limit], Next: cursor{PK: jobs.JobPK(last.ID), CreatedAt: last.CreatedAt.UnixMilli(), Caller: q.Caller}.encode()}, nil
}
