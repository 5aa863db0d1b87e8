package ddb

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fakeBatch answers BatchGetItem from items, leaving the first unprocessed
// keys of a call unprocessed while leave allows.
type fakeBatch struct {
	items map[string]bool // the ids that exist
	leave int             // keys left unprocessed, over all calls
	calls []*dynamodb.BatchGetItemInput
}

func (f *fakeBatch) get(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	f.calls = append(f.calls, in)
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		var rest []map[string]types.AttributeValue
		for _, k := range ka.Keys {
			if f.leave > 0 {
				f.leave--
				rest = append(rest, k)
				continue
			}
			if id := k["pk"].(*types.AttributeValueMemberS).Value; f.items[id] {
				out.Responses[table] = append(out.Responses[table], k)
			}
		}
		if len(rest) > 0 {
			ka.Keys = rest
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: ka}
		}
	}
	return out, nil
}

func keysOf(n int) []map[string]types.AttributeValue {
	out := make([]map[string]types.AttributeValue, n)
	for i := range out {
		out[i] = KeyS("pk", strconv.Itoa(i))
	}
	return out
}

// BatchGet reads 100 keys a call with consistent reads, asks again for
// what was left unprocessed, hands over every item that exists once, and
// passes the projection on.
func TestBatchGetChunksAndFollowsUnprocessedKeys(t *testing.T) {
	f := &fakeBatch{items: map[string]bool{}, leave: 30}
	for i := 0; i < 250; i += 2 {
		f.items[strconv.Itoa(i)] = true
	}
	got := map[string]int{}
	err := BatchGet(context.Background(), f.get, "t", keysOf(250), "pk", func(item map[string]types.AttributeValue) error {
		got[item["pk"].(*types.AttributeValueMemberS).Value]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 125 {
		t.Errorf("read %d items; want 125", len(got))
	}
	for id, n := range got {
		if n != 1 || !f.items[id] {
			t.Errorf("item %s handed over %d times (exists %v)", id, n, f.items[id])
		}
	}
	if len(f.calls) != 4 { // 100 (30 left), the 30, 100, 50
		t.Errorf("%d calls; want 4", len(f.calls))
	}
	for _, in := range f.calls {
		ka := in.RequestItems["t"]
		if len(ka.Keys) > MaxBatchGet || !aws.ToBool(ka.ConsistentRead) || aws.ToString(ka.ProjectionExpression) != "pk" {
			t.Errorf("a call of %d keys, consistent %v, projection %q", len(ka.Keys), aws.ToBool(ka.ConsistentRead), aws.ToString(ka.ProjectionExpression))
		}
	}
}

// Keys DynamoDB keeps leaving unprocessed end in an error, not a silent
// partial read; an error of the callback or of the call stops it.
func TestBatchGetErrors(t *testing.T) {
	none := func(map[string]types.AttributeValue) error { return nil }
	if err := BatchGet(context.Background(), (&fakeBatch{leave: 1 << 20}).get, "t", keysOf(3), "", none); err == nil {
		t.Error("keys never processed: no error")
	}
	stop := errors.New("stop")
	f := &fakeBatch{items: map[string]bool{"0": true, "1": true}}
	if err := BatchGet(context.Background(), f.get, "t", keysOf(2), "", func(map[string]types.AttributeValue) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error: %v", err)
	}
	down := errors.New("down")
	failing := func(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
		return nil, down
	}
	if err := BatchGet(context.Background(), failing, "t", keysOf(2), "", none); !errors.Is(err, down) {
		t.Errorf("call error: %v", err)
	}
}
