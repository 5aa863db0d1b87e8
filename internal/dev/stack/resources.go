package stack

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	// The resources the local stack creates: DynamoDB tables, SQS queues and
	// SSM parameters, from their template properties.

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

func (s *Stack) defaultName(id string) string { return s.opts.StackName + "-" + id }

func (s *Stack) createTable(id string, props map[string]any) (Physical, error) {
	name := str(props["TableName"])
	if name == "" {
		name = s.defaultName(id)
	}
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest}
	if bm := str(props["BillingMode"]); bm != "" {
		in.BillingMode = ddbtypes.BillingMode(bm)
	}
	if in.BillingMode == ddbtypes.BillingModeProvisioned {
		pt := asMap(props["ProvisionedThroughput"])
		in.ProvisionedThroughput = &ddbtypes.ProvisionedThroughput{
			ReadCapacityUnits: aws.Int64(int64(atoi(pt["ReadCapacityUnits"]))), WriteCapacityUnits: aws.Int64(int64(atoi(pt["WriteCapacityUnits"]))),
		}
	}
	for _, a := range list(props["AttributeDefinitions"]) {
		m := asMap(a)
		in.AttributeDefinitions = append(in.AttributeDefinitions, ddbtypes.AttributeDefinition{
			AttributeName: aws.String(str(m["AttributeName"])), AttributeType: ddbtypes.ScalarAttributeType(str(m["AttributeType"])),
		})
	}
	in.KeySchema = keySchema(props["KeySchema"])
	for _, g := range list(props["GlobalSecondaryIndexes"]) {
		m := asMap(g)
		proj := asMap(m["Projection"])
		gsi := ddbtypes.GlobalSecondaryIndex{
			IndexName: aws.String(str(m["IndexName"])),
			KeySchema: keySchema(m["KeySchema"]),
			Projection: &ddbtypes.Projection{
				ProjectionType: ddbtypes.ProjectionType(str(proj["ProjectionType"])), NonKeyAttributes: strs(proj["NonKeyAttributes"]),
			},
		}
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, gsi)
	}
	if truthy(props["DeletionProtectionEnabled"]) {
		in.DeletionProtectionEnabled = aws.Bool(true)
	}
	if sse := asMap(props["SSESpecification"]); truthy(sse["SSEEnabled"]) {
		in.SSESpecification = &ddbtypes.SSESpecification{Enabled: aws.Bool(true)}
	}
	// In CloudFormation a StreamSpecification is the stream's view type;
	// its presence enables the stream.
	if view := str(asMap(props["StreamSpecification"])["StreamViewType"]); view != "" {
		in.StreamSpecification = &ddbtypes.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: ddbtypes.StreamViewType(view)}
	}
	out, err := s.clients.Dynamo.CreateTable(s.ctx, in)
	var inUse *ddbtypes.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		d, derr := s.clients.Dynamo.DescribeTable(s.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if derr != nil {
			return Physical{}, fmt.Errorf("describe existing table %s: %w", name, derr)
		}
		return Physical{Name: name, ARN: aws.ToString(d.Table.TableArn), StreamARN: aws.ToString(d.Table.LatestStreamArn)}, nil
	case err != nil:
		return Physical{}, fmt.Errorf("create table %s: %w", name, err)
	}
	if ttl := asMap(props["TimeToLiveSpecification"]); truthy(ttl["Enabled"]) {
		if _, err := s.clients.Dynamo.UpdateTimeToLive(s.ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(name),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(str(ttl["AttributeName"])), Enabled: aws.Bool(true)},
		}); err != nil {
			return Physical{}, fmt.Errorf("ttl on %s: %w", name, err)
		}
	}
	if pitr := asMap(props["PointInTimeRecoverySpecification"]); truthy(pitr["PointInTimeRecoveryEnabled"]) {
		if _, err := s.clients.Dynamo.UpdateContinuousBackups(s.ctx, &dynamodb.UpdateContinuousBackupsInput{
			TableName:                        aws.String(name),
			PointInTimeRecoverySpecification: &ddbtypes.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)},
		}); err != nil {
			return Physical{}, fmt.Errorf("point-in-time recovery on %s: %w", name, err)
		}
	}
	return Physical{Name: name, ARN: aws.ToString(out.TableDescription.TableArn), StreamARN: aws.ToString(out.TableDescription.LatestStreamArn)}, nil
}

func keySchema(v any) []ddbtypes.KeySchemaElement {
	var out []ddbtypes.KeySchemaElement
	for _, k := range list(v) {
		m := asMap(k)
		out = append(out, ddbtypes.KeySchemaElement{AttributeName: aws.String(str(m["AttributeName"])), KeyType: ddbtypes.KeyType(str(m["KeyType"]))})
	}
	return out
}

// queueAttributes are the AWS::SQS::Queue properties that are queue
// attributes of the same name.
var queueAttributes = []string{
	"DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
	"VisibilityTimeout", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled",
	"FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit",
}

func (s *Stack) createQueue(id string, props map[string]any) (Physical, error) {
	name := str(props["QueueName"])
	if name == "" {
		name = s.defaultName(id)
		if truthy(props["FifoQueue"]) {
			name += ".fifo"
		}
	}
	attrs := map[string]string{}
	for _, a := range queueAttributes {
		if v, ok := props[a]; ok {
			attrs[a] = scalarString(v)
		}
	}
	if rp := asMap(props["RedrivePolicy"]); len(rp) > 0 {
		policy := map[string]any{"deadLetterTargetArn": str(rp["deadLetterTargetArn"])}
		if n, err := strconv.Atoi(scalarString(rp["maxReceiveCount"])); err == nil {
			policy["maxReceiveCount"] = n
		} else {
			return Physical{}, fmt.Errorf("queue %s: maxReceiveCount %v: %w", name, rp["maxReceiveCount"], err)
		}
		b, _ := json.Marshal(policy)
		attrs["RedrivePolicy"] = string(b)
	}
	if rap := asMap(props["RedriveAllowPolicy"]); len(rap) > 0 {
		b, _ := json.Marshal(rap)
		attrs["RedriveAllowPolicy"] = string(b)
	}
	out, err := s.clients.SQS.CreateQueue(s.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return Physical{}, fmt.Errorf("create queue %s: %w", name, err)
	}
	got, err := s.clients.SQS.GetQueueAttributes(s.ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return Physical{}, fmt.Errorf("arn of queue %s: %w", name, err)
	}
	return Physical{Name: name, URL: aws.ToString(out.QueueUrl), ARN: got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]}, nil
}

func (s *Stack) putParameter(id string, props map[string]any) (Physical, error) {
	name := str(props["Name"])
	if name == "" {
		name = "/" + s.defaultName(id)
	}
	typ := str(props["Type"])
	if typ == "" {
		typ = string(ssmtypes.ParameterTypeString)
	}
	value := scalarString(props["Value"])
	in := &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterType(typ)}
	if d := str(props["Description"]); d != "" {
		in.Description = aws.String(d)
	}
	// Created, or read back when it exists, as createTable does: each service
	// has its own already-exists error.
	_, err := s.clients.SSM.PutParameter(s.ctx, in)
	var exists *ssmtypes.ParameterAlreadyExists
	switch {
	case errors.As(err, &exists):
		got, gerr := s.clients.SSM.GetParameter(s.ctx, &ssm.GetParameterInput{Name: aws.String(name)})
		if gerr != nil {
			return Physical{}, fmt.Errorf("read existing parameter %s: %w", name, gerr)
		}
		value = aws.ToString(got.Parameter.Value)
	case err != nil:
		return Physical{}, fmt.Errorf("put parameter %s: %w", name, err)
	}
	arn := fmt.Sprintf("arn:aws:ssm:%s:%s:parameter%s", s.opts.Region, s.opts.AccountID, name)
	return Physical{Name: name, ARN: arn, Value: value}, nil
}
