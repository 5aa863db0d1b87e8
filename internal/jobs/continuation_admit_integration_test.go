//go:build integration

package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/jobstest"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/message"
)

// outboxChild reserves a job of outbox caller waiting for parent (which
// may not exist yet) under policy, as the relay does.
func outboxChild(t *testing.T, f *jobstest.World, caller, key, parent string, policy contract.AfterPolicy) jobs.Decision {
	t.Helper()
	j := f.Job("email.welcome.v1", caller, key, 0)
	j.ID = message.DeriveMessageID(caller, key)
	j.After, j.AfterPolicy = parent, policy
	d, err := f.Store.Reserve(context.Background(), j, contract.AllowAfterFailed)
	if err != nil || d.Outcome != jobs.Reserved {
		t.Fatalf("reserve the outbox child %s: %v %v", key, d.Outcome, err)
	}
	return d
}

// stranger reports whether job id reads Cancelled with the reason that
// its parent is another caller's job.
func stranger(t *testing.T, f *jobstest.World, id, parent string) bool {
	t.Helper()
	got := f.Get(t, id)
	return got.State == jobs.StateCancelled && strings.Contains(got.LastReason, parent) && strings.Contains(got.LastReason, "another caller's job")
}

// A producer that knows another caller's Idempotency-Key knows the id of
// that caller's job before it exists. Its outbox children after that id
// are admitted while the job does not exist (its own item might yet be
// relayed), but once the job is there and is another caller's, they are
// cancelled with the reason: they leave its list (the caller's own
// continuation is not refused for 100 strangers), never run at its end,
// and a child after it that comes later is cancelled at once.
func TestAnOutboxChildCannotTakeAnotherCallersJob(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	const evil = contract.OutboxCallerPrefix + "evil"
	parentID := message.DeriveMessageID("c", "k-parent")
	var strangers []string
	for i := range jobs.MaxContinuations {
		d := outboxChild(t, f, evil, fmt.Sprintf("k-%03d", i), parentID, contract.OnAnyEnd)
		if d.Job.Stored() != jobs.StateAwaitingContinuation {
			t.Fatalf("an outbox child before any parent reads %s; want it waiting", d.Job.Stored())
		}
		strangers = append(strangers, d.Job.ID)
	}
	p := f.Job("email.welcome.v1", "c", "parent", 0)
	p.ID = parentID
	jobstest.Enqueue(t, f.Store, p)
	own := continuation(t, f, "c", "own", parentID, contract.OnSucceeded)
	for _, id := range strangers {
		if !stranger(t, f, id, parentID) {
			got := f.Get(t, id)
			t.Fatalf("a stranger's child reads %s %q; want Cancelled, its parent another caller's", got.State, got.LastReason)
		}
	}
	late := outboxChild(t, f, evil, "k-late", parentID, contract.OnAnyEnd)
	if late.Job.Stored() != jobs.StateCancelled || !stranger(t, f, late.Job.ID, parentID) {
		t.Fatalf("an outbox child after another caller's job reads %s %q; want Cancelled at once", late.Job.Stored(), late.Job.LastReason)
	}
	succeed(t, f, p)
	s := newSends()
	if _, err := f.Store.ReleaseContinuations(ctx, parentID, s.send); err != nil {
		t.Fatal(err)
	}
	if s.count(own.ID) != 1 || len(s.n) != 1 {
		t.Fatalf("the parent's end sent %v; want its own caller's continuation alone", s.n)
	}
}

// The continuation sweep checks the children admitted before their parent
// as soon as the parent exists, before it ends: the same producer's is
// kept and runs at its parent's end, another's is cancelled. And a release
// checks the caller of every continuation, however it was listed.
func TestTheSweepChecksOutboxChildrenOnceTheirParentIsThere(t *testing.T) {
	f := jobstest.New(t)
	ctx := context.Background()
	const mine, evil = contract.OutboxCallerPrefix + "signup", contract.OutboxCallerPrefix + "evil"
	ownParent := message.DeriveMessageID(mine, "k-parent")
	theirs := message.DeriveMessageID("c", "k-theirs")
	kept := outboxChild(t, f, mine, "k-child", ownParent, contract.OnSucceeded).Job
	refused := outboxChild(t, f, evil, "k-refused", theirs, contract.OnAnyEnd).Job
	unlisted := outboxChild(t, f, evil, "k-unlisted", theirs, contract.OnAnyEnd).Job
	p := f.Job("email.welcome.v1", mine, "k-parent", 0)
	p.ID = ownParent
	jobstest.Enqueue(t, f.Store, p)
	q := f.Job("email.welcome.v1", "c", "k-theirs", 0)
	q.ID = theirs
	jobstest.Enqueue(t, f.Store, q)
	// A list written before its children were checked: the release's own
	// check of the caller must stop the one left on it.
	if _, err := f.Client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.JobsTable),
		Key:                       map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.ContinuationsOfPK(theirs)}},
		UpdateExpression:          aws.String("DELETE unchecked :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": &types.AttributeValueMemberSS{Value: []string{unlisted.ID}}},
	}); err != nil {
		t.Fatal(err)
	}
	s := newSends()
	if _, err := f.Store.SweepContinuations(ctx, s.send); err != nil {
		t.Fatal(err)
	}
	if got := f.Get(t, kept.ID); got.State != jobs.StateAwaitingContinuation {
		t.Fatalf("the same producer's child reads %s %q; want it waiting", got.State, got.LastReason)
	}
	if !stranger(t, f, refused.ID, theirs) {
		t.Fatalf("a child after another caller's job reads %s; want Cancelled by the sweep, before that job ended", f.Get(t, refused.ID).State)
	}
	succeed(t, f, p)
	succeed(t, f, q)
	for _, id := range []string{ownParent, theirs} {
		if _, err := f.Store.ReleaseContinuations(ctx, id, s.send); err != nil {
			t.Fatal(err)
		}
	}
	if s.count(kept.ID) != 1 || s.count(refused.ID)+s.count(unlisted.ID) != 0 || !stranger(t, f, unlisted.ID, theirs) {
		t.Fatalf("sent %v, the unchecked stranger reads %s; want the same producer's child alone sent, the other cancelled", s.n, f.Get(t, unlisted.ID).State)
	}
}
