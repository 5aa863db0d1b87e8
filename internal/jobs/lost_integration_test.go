//go:build integration

package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// lostWorld is a jobs table reached directly and through a client that
// loses the response of the next call of each named operation once.
type lostWorld struct {
	direct *jobs.Store
	client *dynamodb.Client
	table  string
	moto   *testenv.Server
}

func newLostWorld(t *testing.T) lostWorld {
	t.Helper()
	moto := testenv.Moto(t)
	client := dynamodb.NewFromConfig(moto.Config())
	table := testenv.NewTable(t, client, "jobs", jobs.AttrPK, "")
	return lostWorld{direct: jobs.NewStore(client, table, nil), client: client, table: table, moto: moto}
}

func (w lostWorld) lossy(ops ...string) (*dynamodb.Client, *testenv.LostResponses) {
	lost := testenv.NewLostResponses(ops...)
	return dynamodb.NewFromConfig(w.moto.ConfigWithRetries(lost.Option)), lost
}

// enqueued reserves and promotes a job at now.
func (w lostWorld) enqueued(t *testing.T, key string, now time.Time) jobs.Job {
	t.Helper()
	job := jobs.Job{ID: message.DeriveMessageID("caller-a", key), Caller: "caller-a", Type: "email.welcome.v1",
		Key: "welcome:" + key, Queue: "default", Message: "{}", CreatedAt: now, RunAt: now}
	ctx := context.Background()
	if d, err := w.direct.Reserve(ctx, job, contract.AllowAfterFailed); err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("Reserve = %+v, %v", d, err)
	}
	if err := w.direct.Promote(ctx, job); err != nil {
		t.Fatal(err)
	}
	return job
}

// A redrive's reactivation retried after a lost response finds the job it
// made Pending itself: the redrive goes on to send the message.
func TestReactivateRetriedAfterALostResponse(t *testing.T) {
	w := newLostWorld(t)
	ctx := context.Background()
	job := w.enqueued(t, "k-1", time.Now())
	if err := jobs.NewRecorder(w.client, w.table).MarkFailed(ctx, job.ID, jobs.Failure{Class: "x", Reason: "y", Attempts: 5}); err != nil {
		t.Fatal(err)
	}
	client, lost := w.lossy("DynamoDB.TransactWriteItems")
	lc := jobs.NewLifecycle(client, w.table)
	rv, err := lc.Inspect(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Reactivate(ctx, rv, false); err != nil || lost.Lost() != 1 {
		t.Fatalf("Reactivate with its response lost = %v (lost %d); want nil", err, lost.Lost())
	}
	if got, _ := w.direct.Get(ctx, job.ID); got.State != jobs.StatePending {
		t.Fatalf("job %s; want Pending", got.State)
	}
}

// A park retried after a lost response finds the record it parked itself
// and still keeps the dedup pointer alive as long as the parked record, so
// no twin can take the key of a job parked for long.
func TestMarkParkedRetriedAfterALostResponse(t *testing.T) {
	w := newLostWorld(t)
	ctx := context.Background()
	job := w.enqueued(t, "k-1", time.Now())
	client, lost := w.lossy("DynamoDB.UpdateItem")
	rec := jobs.NewRecorder(client, w.table)
	rec.Now = func() time.Time { return time.Now().Add(10 * 24 * time.Hour) } // parked ten days later
	if _, err := rec.MarkParked(ctx, job.ID); err != nil || lost.Lost() != 1 {
		t.Fatalf("MarkParked with its response lost = %v (lost %d); want nil", err, lost.Lost())
	}
	expires := func(pk string) string {
		out, err := w.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &w.table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: pk}}})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := out.Item[jobs.AttrExpiresAt].(*types.AttributeValueMemberN)
		if n == nil {
			t.Fatalf("%s has no %s", pk, jobs.AttrExpiresAt)
		}
		return n.Value
	}
	if r, p := expires(jobs.JobPK(job.ID)), expires(jobs.DedupPK(job.Caller, job.Type, job.Key)); r != p {
		t.Fatalf("the parked record expires at %s, its dedup pointer at %s; want the same", r, p)
	}
}
