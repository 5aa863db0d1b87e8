package dynamostore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
)

// throttlingBatch is a DynamoAPI whose BatchGetItem answers only the first key
// of each call and returns the rest as UnprocessedKeys, as DynamoDB does under
// load. moto never does, so this small fake of our port covers the loop.
type throttlingBatch struct {
	dynamostore.API
	calls int
	seen  []string
}

func (f *throttlingBatch) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	f.calls++
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	for table, ka := range in.RequestItems {
		if len(ka.Keys) == 0 {
			continue
		}
		if ka.ConsistentRead == nil || !*ka.ConsistentRead {
			panic("peek without a consistent read")
		}
		first := ka.Keys[0]
		f.seen = append(f.seen, first[dynamostore.AttrMessageKey].(*types.AttributeValueMemberS).Value)
		item := map[string]types.AttributeValue{
			dynamostore.AttrHandler: first[dynamostore.AttrHandler], dynamostore.AttrMessageKey: first[dynamostore.AttrMessageKey],
			dynamostore.AttrState: &types.AttributeValueMemberS{Value: string(engine.StateDone)},
		}
		out.Responses[table] = append(out.Responses[table], item)
		if len(ka.Keys) > 1 {
			out.UnprocessedKeys = map[string]types.KeysAndAttributes{table: {Keys: ka.Keys[1:], ConsistentRead: ka.ConsistentRead}}
		}
	}
	return out, nil
}

func TestPeekBatchFollowsUnprocessedKeys(t *testing.T) {
	f := &throttlingBatch{}
	d := dynamostore.New(f, "markers")
	keys := []engine.Key{{Type: "h", JobID: "a"}, {Type: "h", JobID: "b"}, {Type: "h", JobID: "c"}}
	got, err := d.PeekBatch(context.Background(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || f.calls != 3 {
		t.Fatalf("found %d markers in %d calls; want all 3 by following UnprocessedKeys", len(got), f.calls)
	}
}

func TestPeekBatchGivesUpOnEndlessUnprocessedKeys(t *testing.T) {
	f := &throttlingBatch{}
	d := dynamostore.New(f, "markers")
	var keys []engine.Key
	for i := range 20 {
		keys = append(keys, engine.Key{Type: "h", JobID: string(rune('a' + i))})
	}
	if _, err := d.PeekBatch(context.Background(), keys); err == nil {
		t.Fatal("PeekBatch kept retrying forever or hid that keys stayed unprocessed")
	}
}
