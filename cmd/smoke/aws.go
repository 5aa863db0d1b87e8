package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// cfnStack reads a stack with CloudFormation.
type cfnStack struct {
	client *cloudformation.Client
}

// Outputs implements Stack.
func (s cfnStack) Outputs(ctx context.Context, stack string) (map[string]string, error) {
	out, err := s.client.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil {
		return nil, err
	}
	if len(out.Stacks) != 1 {
		return nil, fmt.Errorf("%d stacks named %s", len(out.Stacks), stack)
	}
	outputs := map[string]string{}
	for _, o := range out.Stacks[0].Outputs {
		outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	return outputs, nil
}

// AlarmNames implements Stack: the physical ids (names) of the stack's
// metric and composite alarms.
func (s cfnStack) AlarmNames(ctx context.Context, stack string) ([]string, error) {
	return s.physicalIDs(ctx, stack, "AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
}

// EventSources implements Stack: the UUIDs of the stack's event source
// mappings (SAM makes one per SQS or stream event of a function).
func (s cfnStack) EventSources(ctx context.Context, stack string) ([]string, error) {
	return s.physicalIDs(ctx, stack, "AWS::Lambda::EventSourceMapping")
}

// physicalIDs lists the physical ids of the stack's resources of the types.
func (s cfnStack) physicalIDs(ctx context.Context, stack string, types ...string) ([]string, error) {
	var ids []string
	p := cloudformation.NewListStackResourcesPaginator(s.client, &cloudformation.ListStackResourcesInput{StackName: aws.String(stack)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.StackResourceSummaries {
			if slices.Contains(types, aws.ToString(r.ResourceType)) {
				ids = append(ids, aws.ToString(r.PhysicalResourceId))
			}
		}
	}
	return ids, nil
}

// cwAlarms reads alarm states with CloudWatch.
type cwAlarms struct {
	client *cloudwatch.Client
}

// Alarms implements Alarms.
func (a cwAlarms) Alarms(ctx context.Context, prefix string) ([]Alarm, error) {
	in := &cloudwatch.DescribeAlarmsInput{AlarmTypes: []cwtypes.AlarmType{cwtypes.AlarmTypeMetricAlarm, cwtypes.AlarmTypeCompositeAlarm}}
	if prefix != "" {
		in.AlarmNamePrefix = aws.String(prefix)
	}
	var alarms []Alarm
	p := cloudwatch.NewDescribeAlarmsPaginator(a.client, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, m := range page.MetricAlarms {
			alarms = append(alarms, Alarm{Name: aws.ToString(m.AlarmName), State: string(m.StateValue), Actions: m.AlarmActions})
		}
		for _, c := range page.CompositeAlarms {
			alarms = append(alarms, Alarm{Name: aws.ToString(c.AlarmName), State: string(c.StateValue), Actions: c.AlarmActions})
		}
	}
	return alarms, nil
}

// snsTopics reads a topic's subscriptions with SNS.
type snsTopics struct {
	client *sns.Client
}

// Subscriptions implements Topics, following pagination.
func (t snsTopics) Subscriptions(ctx context.Context, topicARN string) ([]Subscription, error) {
	var subs []Subscription
	p := sns.NewListSubscriptionsByTopicPaginator(t.client, &sns.ListSubscriptionsByTopicInput{TopicArn: aws.String(topicARN)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, s := range page.Subscriptions {
			subs = append(subs, Subscription{Protocol: aws.ToString(s.Protocol), Endpoint: aws.ToString(s.Endpoint), ARN: aws.ToString(s.SubscriptionArn)})
		}
	}
	return subs, nil
}

// lambdaConcurrency reads the account's concurrency and the event sources'
// maximum concurrency with Lambda.
type lambdaConcurrency struct {
	client *lambda.Client
}

// UnreservedConcurrency implements Concurrency.
func (l lambdaConcurrency) UnreservedConcurrency(ctx context.Context) (int, error) {
	out, err := l.client.GetAccountSettings(ctx, &lambda.GetAccountSettingsInput{})
	if err != nil {
		return 0, err
	}
	if out.AccountLimit == nil || out.AccountLimit.UnreservedConcurrentExecutions == nil {
		return 0, fmt.Errorf("GetAccountSettings gave no AccountLimit.UnreservedConcurrentExecutions")
	}
	return int(*out.AccountLimit.UnreservedConcurrentExecutions), nil
}

// MaximumConcurrency implements Concurrency: the mapping reads a queue when
// its source is an SQS ARN, in whatever partition (aws, aws-cn,
// aws-us-gov) the stack runs.
func (l lambdaConcurrency) MaximumConcurrency(ctx context.Context, uuid string) (int, bool, error) {
	out, err := l.client.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(uuid)})
	if err != nil {
		return 0, false, err
	}
	source, err := arn.Parse(aws.ToString(out.EventSourceArn))
	queue := err == nil && source.Service == "sqs"
	if out.ScalingConfig == nil {
		return 0, queue, nil
	}
	return int(aws.ToInt32(out.ScalingConfig.MaximumConcurrency)), queue, nil
}
