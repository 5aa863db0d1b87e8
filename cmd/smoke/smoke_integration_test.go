//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/localapi/localapitest"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// TestSmokeAgainstTheLocalStack runs the smoke test end to end against the
// whole bundle on this machine: pointed at its API (as `make smoke API=…`
// does), then as for a deployed stack whose outputs CloudFormation (moto)
// serves, whose alarms are quiet, whose alarm topic (moto's SNS) has a
// subscription, and whose account has concurrency to spare.
func TestSmokeAgainstTheLocalStack(t *testing.T) {
	l := localapitest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("pointed at the API", func(t *testing.T) {
		var out, errOut bytes.Buffer
		code := run(ctx, []string{"--api", l.APIURL, "--user", "u-demo-2", "--timeout", "90s", "--poll", "250ms"}, &out, &errOut)
		t.Logf("report:\n%s", out.String())
		if code != 0 || !strings.Contains(out.String(), "result: PASS") {
			t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
		}
		for _, line := range []string{"PASS  enqueue", "PASS  succeeded", "PASS  read back", "SKIP  alarms"} {
			if !strings.Contains(out.String(), line) {
				t.Errorf("report lacks %q", line)
			}
		}
	})

	t.Run("a stack's outputs and alarms", func(t *testing.T) {
		cfn := cloudformation.NewFromConfig(moto.Config(l.Endpoint, moto.Region))
		tmpl := `{"Resources":{"AlarmTopic":{"Type":"AWS::SNS::Topic"}},"Outputs":{"ApiUrl":{"Value":"` + l.APIURL + `"},"AlarmTopicArn":{"Value":{"Ref":"AlarmTopic"}}}}`
		if _, err := cfn.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String("smoke-local"), TemplateBody: aws.String(tmpl)}); err != nil {
			t.Fatal(err)
		}
		outputs, err := cfnStack{cfn}.Outputs(ctx, "smoke-local")
		if err != nil || outputs["ApiUrl"] != l.APIURL || !strings.HasPrefix(outputs["AlarmTopicArn"], "arn:aws:sns:") {
			t.Fatalf("outputs %v, %v", outputs, err)
		}
		alarms := []string{"smoke-local-dlq-received", "smoke-local-enqueue-5xx"}
		quiet := fakeAlarms{alarms: []Alarm{
			{Name: alarms[0], State: "OK", Actions: []string{outputs["AlarmTopicArn"]}},
			{Name: alarms[1], State: "INSUFFICIENT_DATA", Actions: []string{outputs["AlarmTopicArn"]}},
		}}
		// moto confirms a subscription at once; the unconfirmed case is
		// aws_test.go's.
		snsClient := sns.NewFromConfig(moto.Config(l.Endpoint, moto.Region))
		if _, err := snsClient.Subscribe(ctx, &sns.SubscribeInput{TopicArn: aws.String(outputs["AlarmTopicArn"]), Protocol: aws.String("email"), Endpoint: aws.String("oncall@example.org")}); err != nil {
			t.Fatal(err)
		}
		sources := []string{"uuid-critical", "uuid-dlq"}
		rep, err := Run(ctx, Config{StackName: "smoke-local", User: "u-demo-2", Timeout: 90 * time.Second, Poll: 250 * time.Millisecond,
			Stack: stackAlarms{cfnStack{cfn}, alarms, sources}, Alarms: quiet, Topics: snsTopics{snsClient},
			Lambda: fakeLambda{unreserved: 1000, maximum: map[string]int{"uuid-critical": 10, "uuid-dlq": 2}},
			Client: func(api string) (*client.Client, error) {
				return client.New(api, client.WithCredentials(localapi.Credentials(), localapi.Region))
			}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		if !rep.OK() || rep.API != l.APIURL || len(rep.Checks) != 7 {
			t.Fatalf("report %s; want 7 passing checks against %s", b, l.APIURL)
		}
	})
}

// stackAlarms is a CloudFormation stack whose alarm names and event source
// mappings are given (moto lists neither among a stack's resources).
type stackAlarms struct {
	cfnStack
	names, sources []string
}

func (s stackAlarms) AlarmNames(context.Context, string) ([]string, error)   { return s.names, nil }
func (s stackAlarms) EventSources(context.Context, string) ([]string, error) { return s.sources, nil }
