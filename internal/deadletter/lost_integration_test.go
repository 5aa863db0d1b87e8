//go:build integration

package deadletter_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// A store write applied with its response lost and retried by the SDK
// finds the item it wrote itself: that is its own success.
func TestStoreWritesRetriedAfterALostResponse(t *testing.T) {
	moto := testenv.Moto(t)
	direct := dynamodb.NewFromConfig(moto.Config())
	table := testenv.NewTable(t, direct, "dead", deadletter.AttrPK, "")
	ctx := context.Background()
	lossy := func() (*deadletter.Store, *testenv.LostResponses) {
		lost := testenv.NewLostResponses("DynamoDB.UpdateItem")
		return deadletter.NewStore(dynamodb.NewFromConfig(moto.ConfigWithRetries(lost.Option)), table), lost
	}
	rec := deadletter.Record{ID: "job-1", Type: "email.welcome.v1", Body: "{}", Reason: "r", Status: deadletter.StatusDead}

	s, lost := lossy()
	if isNew, err := s.Save(ctx, rec, "sqs-1"); err != nil || !isNew || lost.Lost() != 1 {
		t.Fatalf("Save with its response lost = %v, %v (lost %d); want a new letter, counted and alerted once", isNew, err, lost.Lost())
	}
	if isNew, err := s.Save(ctx, rec, "sqs-1"); err != nil || isNew {
		t.Fatalf("the same delivery saved again = %v, %v; want already recorded", isNew, err)
	}

	s, lost = lossy()
	if err := s.MarkDropped(ctx, rec.ID); err != nil || lost.Lost() != 1 {
		t.Fatalf("MarkDropped with its response lost = %v (lost %d); want nil", err, lost.Lost())
	}
	if got, err := s.Get(ctx, rec.ID); err != nil || got.Status != deadletter.StatusDropped {
		t.Fatalf("letter = %+v, %v; want dropped", got.Status, err)
	}
}
