package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
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
	var names []string
	p := cloudformation.NewListStackResourcesPaginator(s.client, &cloudformation.ListStackResourcesInput{StackName: aws.String(stack)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.StackResourceSummaries {
			switch aws.ToString(r.ResourceType) {
			case "AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm":
				names = append(names, aws.ToString(r.PhysicalResourceId))
			}
		}
	}
	return names, nil
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
