package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// handleSQS runs an SQS batch: a retried record is a batch item failure
// named by its message id.
func (m *runner) handleSQS(ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	var resp events.SQSEventResponse
	for _, i := range m.handle(ctx, ev.Records, source{}) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
	}
	return resp
}

// HandleKinesis runs a Kinesis Data Streams batch (the event source
// mapping with ReportBatchItemFailures). Decode gets each record's data.
// The records of a shard run in order; at the first that fails, the rest
// of its shard is not run, and the response names the failed record's
// sequence number, where Lambda checkpoints and retries from. A record
// whose key is done is not run again when Lambda replays from an older
// checkpoint. A stream record is never re-sent: one whose switch is off,
// or that snoozed, fails its shard there, to be retried. It never returns
// an error.
func (h *Handler[T]) HandleKinesis(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	return h.mux.HandleKinesis(ctx, ev)
}

// HandleDynamoDB runs a DynamoDB Streams batch (the event source mapping
// with ReportBatchItemFailures), as HandleKinesis does a Kinesis one.
// Decode gets the JSON of each record's new image (its old image for a
// REMOVE) in plain form, {"orderId":"o-9","amount":5}: strings, numbers
// as written (no float rounding), binary as base64, booleans, null, lists,
// maps, and sets as arrays. (It does not get the event name: filter the
// event source mapping to act on one kind of change.)
func (h *Handler[T]) HandleDynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	return h.mux.HandleDynamoDB(ctx, ev)
}

// HandleKinesis runs a Kinesis batch as Handler.HandleKinesis does, each
// record by the kind its route names.
func (m *Mux[T]) HandleKinesis(ctx context.Context, ev events.KinesisEvent) (events.KinesisEventResponse, error) {
	recs := make([]events.SQSMessage, len(ev.Records))
	groups := make([]string, len(ev.Records))
	for i, r := range ev.Records {
		recs[i] = events.SQSMessage{MessageId: r.Kinesis.SequenceNumber, Body: string(r.Kinesis.Data), EventSourceARN: r.EventSourceArn}
		shard, _, _ := strings.Cut(r.EventID, ":") // "shardId-000000000000:<sequence number>"
		groups[i] = r.EventSourceArn + "/" + shard
	}
	var resp events.KinesisEventResponse
	for _, i := range firstPerGroup(m.core.handle(ctx, recs, source{groups: groups}), groups) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.KinesisBatchItemFailure{ItemIdentifier: recs[i].MessageId})
	}
	return resp, nil
}

// HandleDynamoDB runs a DynamoDB Streams batch as Handler.HandleDynamoDB
// does, each record by the kind its route names.
func (m *Mux[T]) HandleDynamoDB(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	recs := make([]events.SQSMessage, len(ev.Records))
	groups := make([]string, len(ev.Records))
	for i, r := range ev.Records {
		image := r.Change.NewImage
		if events.DynamoDBOperationType(r.EventName) == events.DynamoDBOperationTypeRemove {
			image = r.Change.OldImage
		}
		body, err := ImageJSON(image)
		if err != nil {
			body = nil // Decode refuses it, naming why: a permanent failure
		}
		recs[i] = events.SQSMessage{MessageId: r.Change.SequenceNumber, Body: string(body), EventSourceARN: r.EventSourceArn}
		groups[i] = r.EventSourceArn // Lambda hands a function one shard's records at a time
	}
	var resp events.DynamoDBEventResponse
	for _, i := range firstPerGroup(m.core.handle(ctx, recs, source{groups: groups}), groups) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: recs[i].MessageId})
	}
	return resp, nil
}

// firstPerGroup keeps, of the retried records (in batch order), the first
// of each group: a stream retries a shard from that record on.
func firstPerGroup(failed []int, groups []string) []int {
	var out []int
	seen := map[string]bool{}
	for _, i := range failed {
		if !seen[groups[i]] {
			seen[groups[i]] = true
			out = append(out, i)
		}
	}
	return out
}

// ImageJSON is a DynamoDB stream image as plain JSON: each attribute by
// its name, a string as a string, a number as the number it is (its
// digits as written, never rounded through a float), binary as base64 (as
// encoding/json writes []byte), a boolean, null, a list as an array, a map
// as an object, and a set (SS, NS, BS) as an array of its members.
func ImageJSON(image map[string]events.DynamoDBAttributeValue) ([]byte, error) {
	v, err := plainMap(image)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func plainMap(m map[string]events.DynamoDBAttributeValue) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for name, av := range m {
		v, err := plain(av)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// plain is one attribute value as what encoding/json writes it from.
func plain(av events.DynamoDBAttributeValue) (any, error) {
	switch av.DataType() {
	case events.DataTypeString:
		return av.String(), nil
	case events.DataTypeNumber:
		return number(av.Number())
	case events.DataTypeBinary:
		return av.Binary(), nil
	case events.DataTypeBoolean:
		return av.Boolean(), nil
	case events.DataTypeNull:
		return nil, nil
	case events.DataTypeList:
		list := av.List()
		out := make([]any, len(list))
		for i, x := range list {
			v, err := plain(x)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	case events.DataTypeMap:
		return plainMap(av.Map())
	case events.DataTypeStringSet:
		return av.StringSet(), nil
	case events.DataTypeNumberSet:
		set := av.NumberSet()
		out := make([]json.Number, len(set))
		for i, n := range set {
			v, err := number(n)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	case events.DataTypeBinarySet:
		return av.BinarySet(), nil
	}
	return nil, fmt.Errorf("attribute of unknown type %v", av.DataType())
}

// number is a DynamoDB number as a JSON number, its digits kept.
func number(s string) (json.Number, error) {
	n := json.Number(strings.TrimSpace(s))
	if !json.Valid([]byte(n)) || strings.ContainsAny(string(n), "\"[]{},") {
		return "", fmt.Errorf("%q is not a number", s)
	}
	return n, nil
}
