package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

var nameSeq atomic.Int64

// Name returns a resource name unique in this test binary, so tests sharing
// one moto server never see each other's tables and queues.
func Name(t testing.TB, base string) string {
	t.Helper()
	return fmt.Sprintf("%s-%d-%d", base, time.Now().UnixNano()%1_000_000_000, nameSeq.Add(1))
}

// CreateTable creates an on-demand table with a string hash key and, when
// rangeKey is not empty, a string range key, and TTL on expiresAt.
func CreateTable(t testing.TB, client *dynamodb.Client, name, hashKey, rangeKey string) {
	t.Helper()
	ctx := context.Background()
	in := &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(hashKey), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(hashKey), KeyType: types.KeyTypeHash}},
	}
	if rangeKey != "" {
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(rangeKey), AttributeType: types.ScalarAttributeTypeS})
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(rangeKey), KeyType: types.KeyTypeRange})
	}
	tries := 0
	if err := setup(func() error {
		tries++
		_, err := client.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if tries > 1 && errors.As(err, &inUse) {
			return nil // our first try was applied, its response lost
		}
		return err
	}); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	if err := setup(func() error {
		_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("expiresAt"), Enabled: aws.Bool(true)},
		})
		return err
	}); err != nil {
		t.Fatalf("ttl on %s: %v", name, err)
	}
}

// setup runs one call that sets up a test's resources, again (up to three
// times) when it failed in transport rather than with an answer of the
// service: the tests' clients have no retryer, so that each test sees and
// counts every call it makes, but a connection lost while a table is being
// created is no finding of any test.
func setup(call func() error) error {
	var err error
	for range 3 {
		var apiErr smithy.APIError
		if err = call(); err == nil || errors.As(err, &apiErr) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// PutItem writes item (a struct or map that attributevalue marshals) to
// table as it is, with no condition: a row some other program wrote.
func PutItem(t testing.TB, client *dynamodb.Client, table string, item any) {
	t.Helper()
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		t.Fatalf("put into %s: %v", table, err)
	}
	if _, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: av}); err != nil {
		t.Fatalf("put into %s: %v", table, err)
	}
}

// Queue is a created queue.
type Queue struct {
	Name string
	URL  string
	ARN  string
}

// CreateQueue creates a standard queue with the given attributes (e.g.
// "VisibilityTimeout", "RedrivePolicy").
func CreateQueue(t testing.TB, client *sqs.Client, name string, attrs map[string]string) Queue {
	t.Helper()
	ctx := context.Background()
	var out *sqs.CreateQueueOutput
	err := setup(func() (err error) { // CreateQueue is idempotent
		out, err = client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		return err
	})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	var got *sqs.GetQueueAttributesOutput
	err = setup(func() (err error) {
		got, err = client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
		})
		return err
	})
	if err != nil {
		t.Fatalf("queue arn %s: %v", name, err)
	}
	return Queue{Name: name, URL: *out.QueueUrl, ARN: got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]}
}

// WorkQueues are the work queues (contract.Queues) and, when they have one, the DLQ they
// redrive to.
type WorkQueues struct {
	Queues map[message.Queue]Queue
	// DLQ is the zero Queue when the work queues redrive nowhere.
	DLQ Queue
}

// URLs returns each work queue's URL by its name, as the functions'
// environment gives them (and package sqsqueue takes them).
func (w WorkQueues) URLs() map[string]string {
	urls := make(map[string]string, len(w.Queues))
	for q, v := range w.Queues {
		urls[string(q)] = v.URL
	}
	return urls
}

// CreateWorkQueues creates every work queue of contract.Queues, each named prefix plus
// its queue's name, and, when maxReceives > 0, the DLQ prefix+"dlq" that
// every one of them redrives to after maxReceives receives.
func CreateWorkQueues(t testing.TB, client *sqs.Client, prefix string, maxReceives int) WorkQueues {
	t.Helper()
	w := WorkQueues{Queues: make(map[message.Queue]Queue, len(contract.Queues))}
	var attrs map[string]string
	if maxReceives > 0 {
		w.DLQ = CreateQueue(t, client, prefix+"dlq", nil)
		attrs = map[string]string{"RedrivePolicy": RedrivePolicy(w.DLQ.ARN, maxReceives)}
	}
	for _, q := range contract.Queues {
		w.Queues[q] = CreateQueue(t, client, prefix+string(q), attrs)
	}
	return w
}

// RedrivePolicy returns a queue's RedrivePolicy attribute value.
func RedrivePolicy(dlqARN string, maxReceiveCount int) string {
	return fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":%d}`, dlqARN, maxReceiveCount)
}

// Receive reads up to 10 messages from a queue without deleting them, with
// all attributes.
func Receive(t testing.TB, client *sqs.Client, url string, wait time.Duration) []sqstypes.Message {
	t.Helper()
	out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: int32(wait / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		t.Fatalf("receive from %s: %v", url, err)
	}
	return out.Messages
}

// QueueNameFromURL returns the last path element of a queue URL.
func QueueNameFromURL(url string) string { return url[strings.LastIndex(url, "/")+1:] }
