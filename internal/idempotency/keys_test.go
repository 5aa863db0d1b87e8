package idempotency_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/idempotency"
)

// vanishing is a table whose every put fails its condition against an
// item that is gone by the time it is read: a key contended without end.
type vanishing struct{ puts int }

func (v *vanishing) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (v *vanishing) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	v.puts++
	return nil, &types.ConditionalCheckFailedException{}
}

func (v *vanishing) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (v *vanishing) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// A lease that keeps losing its put to records that vanish gives up after
// a few tries as a request in flight for a second (what Begin answers
// then), never as an error engine.Do would make a 503 of.
func TestLeaseUnderEndlessContentionIsInFlight(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	client := &vanishing{}
	s := idempotency.NewStore(client, "idem")
	s.Now = func() time.Time { return now }
	r, err := s.Keys("api").Lease(context.Background(), idempotency.KeyOf("api", "c", "k"), engine.Mark{Owner: "o", Until: now.Add(30 * time.Second), Fingerprint: "fp"})
	if !errors.Is(err, engine.ErrLeaseHeld) || r.State != engine.StateLeased || !r.LeaseUntil.Equal(now.Add(time.Second)) || client.puts != 3 {
		t.Fatalf("lease = %+v, %v after %d puts; want a lease held for a second after 3", r, err, client.puts)
	}
}
