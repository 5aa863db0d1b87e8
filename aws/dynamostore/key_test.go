package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
)

// TestPartitionKeyIsOnePerJob: the markers table's hash key has one value
// per job, "<type>#<job id>", never the type alone (four values for every
// marker ever written: a hot partition); the range key is the job id; an
// item decodes back to its key, also when the job id holds a "#".
func TestPartitionKeyIsOnePerJob(t *testing.T) {
	keys := []engine.Key{
		{Type: "email.welcome.v1", JobID: "job-1"},
		{Type: "email.welcome.v1", JobID: "job-2"},
		{Type: "email.partner-digest.v1", JobID: "job-1"},
		{Type: "email.welcome.v1", JobID: "odd#id#"},
	}
	seen := map[string]engine.Key{}
	d := dynamostore.New(nil, "markers")
	for _, k := range keys {
		av := dynamostore.KeyAV(k)
		hash := av[dynamostore.AttrHandler].(*types.AttributeValueMemberS).Value
		if want := k.Type + "#" + k.JobID; hash != want || dynamostore.PartitionKey(k) != want {
			t.Fatalf("hash key of %+v = %q (PartitionKey %q); want %q", k, hash, dynamostore.PartitionKey(k), want)
		}
		if rng := av[dynamostore.AttrMessageKey].(*types.AttributeValueMemberS).Value; rng != k.JobID {
			t.Fatalf("range key of %+v = %q; want the job id", k, rng)
		}
		if other, dup := seen[hash]; dup {
			t.Fatalf("%+v and %+v share the partition %q", k, other, hash)
		}
		seen[hash] = k
		av[dynamostore.AttrState] = &types.AttributeValueMemberS{Value: string(engine.StateDone)}
		rec, ok, err := d.Decode(av)
		if err != nil || !ok || rec.Key != k {
			t.Fatalf("Decode of %+v's item = %+v, %v, %v; want its key back", k, rec.Key, ok, err)
		}
	}
}
