//go:build integration

package jobs_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/dev/scalemodel"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// sizeLimited is the jobs table's client refusing, as DynamoDB does and
// moto does not, a write that would make an item larger than 400 KB: the
// item's size now (names and values, as DynamoDB counts them) and what the
// write's SET and ADD clauses add (a DELETE or REMOVE only shrinks it).
type sizeLimited struct {
	jobs.DynamoAPI
	table string
}

var errTooLarge = &smithy.GenericAPIError{Code: "ValidationException", Message: "Item size has exceeded the maximum allowed size"}

func (c sizeLimited) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if err := c.check(ctx, in.Key, aws.ToString(in.UpdateExpression), in.ExpressionAttributeValues); err != nil {
		return nil, err
	}
	return c.DynamoAPI.UpdateItem(ctx, in, o...)
}

func (c sizeLimited) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	for _, it := range in.TransactItems {
		if u := it.Update; u != nil {
			if err := c.check(ctx, u.Key, aws.ToString(u.UpdateExpression), u.ExpressionAttributeValues); err != nil {
				return nil, err
			}
		}
	}
	return c.DynamoAPI.TransactWriteItems(ctx, in, o...)
}

// clause is one clause of an update expression: its keyword and the rest.
var clause = regexp.MustCompile(`(?i)\b(SET|ADD|DELETE|REMOVE)\b`)

func (c sizeLimited) check(ctx context.Context, key map[string]types.AttributeValue, update string, values map[string]types.AttributeValue) error {
	out, err := c.DynamoAPI.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(c.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	size := scalemodel.ItemSize(out.Item)
	locs := clause.FindAllStringIndex(update, -1)
	for i, l := range locs {
		end := len(update)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if kw := strings.ToUpper(update[l[0]:l[1]]); kw != "SET" && kw != "ADD" {
			continue
		}
		for _, ref := range regexp.MustCompile(`:[A-Za-z0-9_]+`).FindAllString(update[l[1]:end], -1) {
			size += scalemodel.ValueSize(values[ref])
		}
	}
	if size > scalemodel.MaxItemSize {
		return errTooLarge
	}
	return nil
}

// fillLegacyList fills the continuation sweep's list item of release 4,
// sweep#continuations, to DynamoDB's size limit, as a deployed stack under
// more continuations a second than its sweep took off left it, with first
// (parent ids) among the ids.
func fillLegacyList(t *testing.T, f *jobstest.World, first ...string) {
	t.Helper()
	ids := slices.Clone(first)
	// Full: one id more would take it past the limit.
	for size := len(jobs.AttrPK) + len(jobs.ContinuationsPK) + len("jobIds") + 36*len(ids); size+36 <= scalemodel.MaxItemSize; size += 36 {
		ids = append(ids, message.NewMessageID())
	}
	for chunk := range slices.Chunk(ids, 1000) {
		if _, err := f.Client.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(f.JobsTable),
			Key:                       map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.ContinuationsPK}},
			UpdateExpression:          aws.String("ADD jobIds :ids"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":ids": &types.AttributeValueMemberSS{Value: chunk}},
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuditAFullSweepListRefusesNoContinuation: every continuation added
// its parent to one item, sweep#continuations, and only the sweep took
// parents off (200 every five minutes). Under more than that, the item
// reached DynamoDB's 400 KB (about 11,000 ids) and from then on every
// continuation of a parent not yet listed was refused (its reservation's
// transaction failed: 503) for as long as the load lasted.
//
// A fix must guarantee that no list of waiting parents lives in one item:
// a continuation is accepted however many parents wait.
func TestAuditAFullSweepListRefusesNoContinuation(t *testing.T) {
	f := jobstest.New(t)
	fillLegacyList(t, f)
	f.Store = jobs.NewStore(sizeLimited{DynamoAPI: f.Client, table: f.JobsTable}, f.JobsTable, f.Markers)
	f.Store.Now = f.Clock.Now
	parent := f.Enqueue(t, "email.welcome.v1", "c", "parent")
	j := f.Job("email.welcome.v1", "c", "child", 0)
	j.After, j.AfterPolicy = parent.ID, contract.OnSucceeded
	d, err := f.Store.Reserve(context.Background(), j, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("a continuation of a new parent with the sweep's list at 400 KB: %v %v; want it reserved", d.Outcome, err)
	}
}

// TestAuditFirstSweepOfAFullListWithNoCursor: a sweep whose list was
// longer than its window wrote the list's cursor, on the list item
// itself, before any work. A list that filled before any run set its
// cursor (a load of more continuations a second than the sweep took off,
// from a new deploy) had no room for it: the first write of every run
// failed, nothing was ever taken off the list again, and the
// continuations of parents that expired waited for ever.
//
// A fix must guarantee that a full list is swept: the continuation of an
// expired parent on it is decided.
func TestAuditFirstSweepOfAFullListWithNoCursor(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	gone := f.Job("email.welcome.v1", "c", "gone", 0)
	gone.ID = "00000000-0000-4000-8000-000000000001" // first on the list
	gone = jobstest.Enqueue(t, f.Store, gone)
	orphan := continuation(t, f, "c", "orphan", gone.ID, contract.OnSucceeded)
	fillLegacyList(t, f, gone.ID)
	swept := jobs.NewStore(sizeLimited{DynamoAPI: f.Client, table: f.JobsTable}, f.JobsTable, f.Markers)
	swept.Now, swept.Index = f.Clock.Now, f.Store.Index
	f.Clock.Advance(jobs.QueueRetention + time.Hour) // gone expired without running
	var errs []error
	for range 3 {
		_, err := swept.SweepContinuations(ctx, newSends().send)
		errs = append(errs, err)
		f.Clock.Advance(5 * time.Minute)
	}
	if got := f.Get(t, orphan.ID); got.State != jobs.StateCancelled {
		t.Fatalf("after three sweeps of a full list the continuation of an expired parent reads %s (sweeps: %v); want Cancelled",
			got.State, fmt.Sprint(errs))
	}
}
