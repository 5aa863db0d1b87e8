package devstack

import (
	"context"
	"encoding/json"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
)

// record converts a stream record to the event record Lambda builds.
func (p *StreamPoller) record(r streamtypes.Record) events.DynamoDBEventRecord {
	sr := r.Dynamodb
	out := events.DynamoDBEventRecord{
		AWSRegion:      p.Region,
		EventID:        aws.ToString(r.EventID),
		EventName:      string(r.EventName),
		EventSource:    "aws:dynamodb",
		EventVersion:   "1.1",
		EventSourceArn: p.Source.StreamARN,
		Change: events.DynamoDBStreamRecord{
			Keys:           attributes(sr.Keys),
			NewImage:       attributes(sr.NewImage),
			OldImage:       attributes(sr.OldImage),
			SequenceNumber: aws.ToString(sr.SequenceNumber),
			SizeBytes:      aws.ToInt64(sr.SizeBytes),
			StreamViewType: string(sr.StreamViewType),
		},
	}
	if sr.ApproximateCreationDateTime != nil {
		out.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: *sr.ApproximateCreationDateTime}
	}
	if id := r.UserIdentity; id != nil {
		out.UserIdentity = &events.DynamoDBUserIdentity{Type: aws.ToString(id.Type), PrincipalID: aws.ToString(id.PrincipalId)}
	}
	return out
}

func attributes(m map[string]streamtypes.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if m == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(m))
	for k, v := range m {
		out[k] = attribute(v)
	}
	return out
}

func attribute(v streamtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch a := v.(type) {
	case *streamtypes.AttributeValueMemberS:
		return events.NewStringAttribute(a.Value)
	case *streamtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(a.Value)
	case *streamtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(a.Value)
	case *streamtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(a.Value)
	case *streamtypes.AttributeValueMemberSS:
		return events.NewStringSetAttribute(a.Value)
	case *streamtypes.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(a.Value)
	case *streamtypes.AttributeValueMemberBS:
		return events.NewBinarySetAttribute(a.Value)
	case *streamtypes.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(a.Value))
		for i, e := range a.Value {
			l[i] = attribute(e)
		}
		return events.NewListAttribute(l)
	case *streamtypes.AttributeValueMemberM:
		return events.NewMapAttribute(attributes(a.Value))
	default:
		return events.NewNullAttribute()
	}
}

// OnFailureRecord is what Lambda sends to a stream event source's on-failure
// destination: the batch it gave up on, by shard and sequence numbers.
type OnFailureRecord struct {
	RequestContext struct {
		RequestID              string `json:"requestId"`
		FunctionARN            string `json:"functionArn"`
		Condition              string `json:"condition"`
		ApproximateInvokeCount int    `json:"approximateInvokeCount"`
	} `json:"requestContext"`
	ResponseContext struct {
		StatusCode      int    `json:"statusCode"`
		ExecutedVersion string `json:"executedVersion"`
		FunctionError   string `json:"functionError,omitempty"`
	} `json:"responseContext"`
	Version   string        `json:"version"`
	Timestamp string        `json:"timestamp"`
	BatchInfo DDBStreamInfo `json:"DDBStreamBatchInfo"`
}

// DDBStreamInfo names the records of a batch given up on.
type DDBStreamInfo struct {
	ShardID                         string `json:"shardId"`
	StartSequenceNumber             string `json:"startSequenceNumber"`
	EndSequenceNumber               string `json:"endSequenceNumber"`
	ApproximateArrivalOfFirstRecord string `json:"approximateArrivalOfFirstRecord"`
	ApproximateArrivalOfLastRecord  string `json:"approximateArrivalOfLastRecord"`
	BatchSize                       int    `json:"batchSize"`
	StreamARN                       string `json:"streamArn"`
}

// giveUp describes recs on the on-failure queue and logs it; the shard
// moves on either way.
func (p *StreamPoller) giveUp(ctx context.Context, shard string, a attempt, recs []streamtypes.Record, condition string) {
	arrival := func(r streamtypes.Record) string {
		if t := r.Dynamodb.ApproximateCreationDateTime; t != nil {
			return t.UTC().Format(time.RFC3339)
		}
		return ""
	}
	var rec OnFailureRecord
	rec.RequestContext.RequestID = uuid.NewString()
	rec.RequestContext.FunctionARN = p.Source.FunctionARN
	rec.RequestContext.Condition = condition
	rec.RequestContext.ApproximateInvokeCount = a.failures
	if condition == conditionRetries {
		rec.ResponseContext.StatusCode = 200
		rec.ResponseContext.ExecutedVersion = "$LATEST"
		if a.lastErr != nil {
			rec.ResponseContext.FunctionError = "Unhandled"
		}
	}
	rec.Version = "1.0"
	rec.Timestamp = p.now().UTC().Format("2006-01-02T15:04:05.000Z")
	rec.BatchInfo = DDBStreamInfo{
		ShardID:                         shard,
		StartSequenceNumber:             aws.ToString(recs[0].Dynamodb.SequenceNumber),
		EndSequenceNumber:               aws.ToString(recs[len(recs)-1].Dynamodb.SequenceNumber),
		ApproximateArrivalOfFirstRecord: arrival(recs[0]),
		ApproximateArrivalOfLastRecord:  arrival(recs[len(recs)-1]),
		BatchSize:                       len(recs),
		StreamARN:                       p.Source.StreamARN,
	}
	log := p.Logger.With("stream", p.Source.StreamARN, "shard", shard, "condition", condition,
		"startSequenceNumber", rec.BatchInfo.StartSequenceNumber, "endSequenceNumber", rec.BatchInfo.EndSequenceNumber, "records", len(recs))
	if p.Source.OnFailureURL == "" {
		log.Error("stream poller: gave up on a batch; no on-failure destination")
		return
	}
	body, _ := json.Marshal(rec)
	if _, err := p.SQS.SendMessage(context.WithoutCancel(ctx), &sqs.SendMessageInput{QueueUrl: aws.String(p.Source.OnFailureURL), MessageBody: aws.String(string(body))}); err != nil {
		log.Error("stream poller: gave up on a batch; sending it to the on-failure destination failed", "error", err)
		return
	}
	log.Warn("stream poller: gave up on a batch; described on the on-failure destination")
}
