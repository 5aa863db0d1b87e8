package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/engine"
)

// kinesis is a record of shard with sequence number seq and data body.
func kinesis(shard, seq, body string) events.KinesisEventRecord {
	return events.KinesisEventRecord{
		EventID: shard + ":" + seq, EventSourceArn: "arn:aws:kinesis:eu-west-1:123456789012:stream/orders",
		Kinesis: events.KinesisRecord{SequenceNumber: seq, Data: []byte(body), PartitionKey: "p"},
	}
}

func (w *world) kinesis(records ...events.KinesisEventRecord) []string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := w.h.HandleKinesis(ctx, events.KinesisEvent{Records: records})
	if err != nil {
		w.t.Fatalf("HandleKinesis returned %v", err)
	}
	var seqs []string
	for _, f := range resp.BatchItemFailures {
		seqs = append(seqs, f.ItemIdentifier)
	}
	return seqs
}

// A shard's records run in order; at the first failure the rest of that
// shard is left for the retry and the response names the failed record's
// sequence number alone; another shard goes on. A replay from the older
// checkpoint runs none of the records that were done.
func TestKinesisShardsRunInOrderAndStopAtTheFirstFailure(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	w.fail["a-2"] = errors.New("carrier down")
	batch := []events.KinesisEventRecord{
		kinesis("shardId-000000000001", "101", orderBody("a-1", 1)),
		kinesis("shardId-000000000002", "201", orderBody("b-1", 1)),
		kinesis("shardId-000000000001", "102", orderBody("a-2", 2)),
		kinesis("shardId-000000000001", "103", orderBody("a-3", 3)),
		kinesis("shardId-000000000002", "202", orderBody("b-2", 2)),
	}
	if got := w.kinesis(batch...); strings.Join(got, " ") != "102" {
		t.Fatalf("failures %v; want the failed record's sequence number alone", got)
	}
	if w.runs("a-3") != 0 || w.runs("b-2") != 1 || w.runs("a-1") != 1 {
		t.Fatalf("runs %v; want a-3 left for the retry and shard 2 run", w.calls)
	}
	// Lambda retries shard 1 from 102; a replay from an older checkpoint
	// (101) finds a-1 done and does not run it again.
	delete(w.fail, "a-2")
	if got := w.kinesis(batch[0], batch[2], batch[3]); len(got) != 0 {
		t.Fatalf("retry: failures %v", got)
	}
	if w.runs("a-1") != 1 || w.runs("a-2") != 2 || w.runs("a-3") != 1 {
		t.Fatalf("runs %v; want a-1 once, a-2 twice (failed, then done), a-3 once", w.calls)
	}
}

// A stream record whose switch is off is never re-sent: its shard stops
// there, to be retried, and nothing after it runs.
func TestAStreamRecordSwitchedOffHoldsItsShard(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	w.switches.Set("orders.ship", false)
	got := w.kinesis(kinesis("shardId-1", "1", orderBody("a-1", 1)), kinesis("shardId-1", "2", orderBody("a-2", 1)))
	if strings.Join(got, " ") != "1" || len(w.queues.ParkedMessages()) != 0 || w.runs("a-1")+w.runs("a-2") != 0 {
		t.Fatalf("failures %v, parked %d, runs %v; want the shard held at its first record, nothing parked or run",
			got, len(w.queues.ParkedMessages()), w.calls)
	}
}

// dynamo is a DynamoDB stream record of event name with the images.
func dynamo(name, seq string, newImage, oldImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		EventName: name, EventSourceArn: "arn:aws:dynamodb:eu-west-1:123456789012:table/orders/stream/2026-12-01T00:00:00.000",
		Change: events.DynamoDBStreamRecord{SequenceNumber: seq, NewImage: newImage, OldImage: oldImage},
	}
}

// Decode gets the new image of an INSERT or MODIFY and the old image of a
// REMOVE, as plain JSON; a shard stops at its first failure as Kinesis's.
func TestDynamoDBStreamsDecodeThePlainImage(t *testing.T) {
	w := newWorld(t, shipKind, nil)
	img := func(id string, amount string) map[string]events.DynamoDBAttributeValue {
		return map[string]events.DynamoDBAttributeValue{"orderId": events.NewStringAttribute(id), "amount": events.NewNumberAttribute(amount)}
	}
	w.fail["o-3"] = errors.New("carrier down")
	resp, err := w.h.HandleDynamoDB(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		dynamo("INSERT", "1", img("o-1", "5"), nil),
		dynamo("REMOVE", "2", nil, img("o-2", "7")),
		dynamo("MODIFY", "3", img("o-3", "9"), img("o-3", "8")),
		dynamo("INSERT", "4", img("o-4", "1"), nil),
	}})
	if err != nil || len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "3" {
		t.Fatalf("response %+v, %v; want the third record's sequence number", resp, err)
	}
	if strings.Join(w.seen, " ") != "o-1:5 o-2:7 o-3:9" {
		t.Fatalf("ran %v; want the new images, the removed item's old one, in order, and nothing after the failure", w.seen)
	}
}

// Every attribute type a stream can carry becomes plain JSON, numbers
// with their digits as written.
func TestImageJSONConvertsEveryAttributeType(t *testing.T) {
	for _, tc := range []struct {
		name string
		av   events.DynamoDBAttributeValue
		want string
	}{
		{"string", events.NewStringAttribute("o-1"), `"o-1"`},
		{"number", events.NewNumberAttribute("12"), `12`},
		{"big number", events.NewNumberAttribute("123456789012345678901234567890.123456789"), `123456789012345678901234567890.123456789`},
		{"exponent", events.NewNumberAttribute("1E+3"), `1E+3`},
		{"negative", events.NewNumberAttribute("-0.5"), `-0.5`},
		{"binary", events.NewBinaryAttribute([]byte{0, 1, 254}), `"AAH+"`},
		{"boolean", events.NewBooleanAttribute(true), `true`},
		{"null", events.NewNullAttribute(), `null`},
		{"list", events.NewListAttribute([]events.DynamoDBAttributeValue{events.NewStringAttribute("a"), events.NewNumberAttribute("2")}), `["a",2]`},
		{"map", events.NewMapAttribute(map[string]events.DynamoDBAttributeValue{"k": events.NewBooleanAttribute(false)}), `{"k":false}`},
		{"string set", events.NewStringSetAttribute([]string{"x", "y"}), `["x","y"]`},
		{"number set", events.NewNumberSetAttribute([]string{"1", "2.50"}), `[1,2.50]`},
		{"binary set", events.NewBinarySetAttribute([][]byte{{1}, {2}}), `["AQ==","Ag=="]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := engine.ImageJSON(map[string]events.DynamoDBAttributeValue{"v": tc.av})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b); got != `{"v":`+tc.want+`}` {
				t.Fatalf("ImageJSON = %s; want {\"v\":%s}", got, tc.want)
			}
			if !json.Valid(b) {
				t.Fatalf("%s is not JSON", b)
			}
		})
	}
}
