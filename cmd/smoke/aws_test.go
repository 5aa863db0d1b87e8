package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/smithy-go/encoding/cbor"
)

// The emulator the integration tests use (moto) does not list CloudWatch
// alarms or event source mappings among a stack's resources, does not speak
// CloudWatch's CBOR protocol, and confirms every SNS subscription, so these
// tests serve the calls in AWS's wire formats to the real SDK clients.

func sdkConfig(endpoint string) aws.Config {
	return aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", ""), Retryer: func() aws.Retryer { return aws.NopRetryer{} }}
}

const listStackResourcesPage = `<ListStackResourcesResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/">
  <ListStackResourcesResult>
    <StackResourceSummaries>%s</StackResourceSummaries>%s
  </ListStackResourcesResult>
  <ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata>
</ListStackResourcesResponse>`

func resource(typ, physical string) string {
	return "<member><LogicalResourceId>L</LogicalResourceId><PhysicalResourceId>" + physical +
		"</PhysicalResourceId><ResourceType>" + typ + "</ResourceType><ResourceStatus>CREATE_COMPLETE</ResourceStatus>" +
		"<LastUpdatedTimestamp>2026-01-02T03:04:05Z</LastUpdatedTimestamp></member>"
}

func TestCloudFormationAlarmNamesPagesThroughTheStack(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		if form.Get("Action") != "ListStackResources" || form.Get("StackName") != "s" {
			http.Error(w, "unexpected "+string(b), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		if form.Get("NextToken") == "" {
			_, _ = io.WriteString(w, fmt.Sprintf(listStackResourcesPage,
				resource("AWS::SNS::Topic", "arn:aws:sns:us-east-1:1:t")+resource("AWS::CloudWatch::Alarm", "s-dlq-received")+
					resource("AWS::Lambda::EventSourceMapping", "0f1e2d3c-0000-4000-8000-000000000001"), "<NextToken>p2</NextToken>"))
			return
		}
		_, _ = io.WriteString(w, fmt.Sprintf(listStackResourcesPage,
			resource("AWS::CloudWatch::CompositeAlarm", "s-any")+resource("AWS::Lambda::Function", "s-email")+
				resource("AWS::Lambda::EventSourceMapping", "0f1e2d3c-0000-4000-8000-000000000002"), ""))
	}))
	defer srv.Close()
	stack := cfnStack{cloudformation.NewFromConfig(sdkConfig(srv.URL))}
	got, err := stack.AlarmNames(context.Background(), "s")
	if err != nil || !slices.Equal(got, []string{"s-dlq-received", "s-any"}) {
		t.Fatalf("AlarmNames = %v, %v; want both pages' alarms and nothing else", got, err)
	}
	sources, err := stack.EventSources(context.Background(), "s")
	if err != nil || !slices.Equal(sources, []string{"0f1e2d3c-0000-4000-8000-000000000001", "0f1e2d3c-0000-4000-8000-000000000002"}) {
		t.Fatalf("EventSources = %v, %v; want both pages' event source mappings and nothing else", sources, err)
	}
}

func TestCloudWatchAlarmsReadsMetricAndCompositeAlarms(t *testing.T) {
	var asked []cbor.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		in, err := cbor.Decode(b)
		m, ok := in.(cbor.Map)
		if err != nil || !ok || r.URL.Path != "/service/GraniteServiceVersion20100801/operation/DescribeAlarms" {
			http.Error(w, "unexpected request "+r.URL.Path, http.StatusBadRequest)
			return
		}
		asked = append(asked, m)
		w.Header().Set("Smithy-Protocol", "rpc-v2-cbor")
		w.Header().Set("Content-Type", "application/cbor")
		out := cbor.Map{"MetricAlarms": cbor.List{
			cbor.Map{"AlarmName": cbor.String("s-dlq-received"), "StateValue": cbor.String("OK"), "AlarmActions": cbor.List{cbor.String("arn:topic")}},
		}, "NextToken": cbor.String("p2")}
		if _, second := m["NextToken"]; second {
			out = cbor.Map{"CompositeAlarms": cbor.List{
				cbor.Map{"AlarmName": cbor.String("s-any"), "StateValue": cbor.String("ALARM"), "AlarmActions": cbor.List{}},
			}}
		}
		_, _ = w.Write(cbor.Encode(out))
	}))
	defer srv.Close()
	got, err := cwAlarms{cloudwatch.NewFromConfig(sdkConfig(srv.URL))}.Alarms(context.Background(), "s-")
	want := []Alarm{{Name: "s-dlq-received", State: "OK", Actions: []string{"arn:topic"}}, {Name: "s-any", State: "ALARM", Actions: []string{}}}
	if err != nil || len(got) != 2 || got[0].Name != want[0].Name || got[0].State != "OK" || !slices.Equal(got[0].Actions, want[0].Actions) ||
		got[1].Name != "s-any" || got[1].State != "ALARM" {
		t.Fatalf("Alarms = %+v, %v; want %+v", got, err, want)
	}
	if len(asked) != 2 || asked[0]["AlarmNamePrefix"] != cbor.String("s-") {
		t.Fatalf("requests %v; want two pages with the prefix", asked)
	}
	types, _ := asked[0]["AlarmTypes"].(cbor.List)
	if len(types) != 2 {
		t.Fatalf("AlarmTypes %v; want metric and composite alarms", asked[0]["AlarmTypes"])
	}
}

const listSubscriptionsPage = `<ListSubscriptionsByTopicResponse xmlns="http://sns.amazonaws.com/doc/2010-03-31/">
  <ListSubscriptionsByTopicResult>
    <Subscriptions>%s</Subscriptions>%s
  </ListSubscriptionsByTopicResult>
  <ResponseMetadata><RequestId>r-2</RequestId></ResponseMetadata>
</ListSubscriptionsByTopicResponse>`

func subscription(arn, endpoint string) string {
	return "<member><TopicArn>" + topic + "</TopicArn><Protocol>email</Protocol><SubscriptionArn>" + arn +
		"</SubscriptionArn><Owner>123456789012</Owner><Endpoint>" + endpoint + "</Endpoint></member>"
}

// SNS answers ListSubscriptionsByTopic a page at a time; an unconfirmed
// subscription has the SubscriptionArn "PendingConfirmation". The second
// page's confirmed subscription is what makes the check pass.
func TestSNSSubscriptionsPagesThroughTheTopic(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(b))
		if form.Get("Action") != "ListSubscriptionsByTopic" || form.Get("TopicArn") != topic {
			http.Error(w, "unexpected "+string(b), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/xml")
		if form.Get("NextToken") == "" {
			_, _ = io.WriteString(w, fmt.Sprintf(listSubscriptionsPage, subscription("PendingConfirmation", "new@example.org"), "<NextToken>p2</NextToken>"))
			return
		}
		_, _ = io.WriteString(w, fmt.Sprintf(listSubscriptionsPage, subscription(topic+":6f1c2a9e-1b2c-4d5e-8f90-0a1b2c3d4e5f", "oncall@example.org"), ""))
	}))
	defer srv.Close()
	topics := snsTopics{sns.NewFromConfig(sdkConfig(srv.URL))}
	got, err := topics.Subscriptions(context.Background(), topic)
	want := []Subscription{{"email", "new@example.org", "PendingConfirmation"}, {"email", "oncall@example.org", topic + ":6f1c2a9e-1b2c-4d5e-8f90-0a1b2c3d4e5f"}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Subscriptions = %+v, %v; want %+v", got, err, want)
	}
	rep := &Report{Outputs: map[string]string{"AlarmTopicArn": topic}}
	checkSubscription(context.Background(), Config{Topics: topics}, rep)
	if c := rep.Checks[0]; c.Status != Pass || !strings.Contains(c.Detail, "oncall@example.org") || strings.Contains(c.Detail, "new@example.org") {
		t.Fatalf("check %+v; want a pass naming only the confirmed subscription", c)
	}
}

// Lambda answers GetAccountSettings and GetEventSourceMapping in REST JSON;
// the check reads AccountLimit.UnreservedConcurrentExecutions and each
// mapping's ScalingConfig.MaximumConcurrency.
func TestLambdaConcurrencyReadsAccountAndMappings(t *testing.T) {
	maximum := map[string]string{"uuid-critical": `{"MaximumConcurrency":10}`, "uuid-default": `{"MaximumConcurrency":5}`, "uuid-unbounded": `null`, "uuid-outbox": `null`,
		"uuid-china": `{"MaximumConcurrency":3}`, "uuid-govcloud": `{"MaximumConcurrency":2}`}
	var unreserved atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch uuid, isMapping := strings.CutPrefix(r.URL.Path, "/2015-03-31/event-source-mappings/"); {
		case r.Method != http.MethodGet:
			http.Error(w, "unexpected "+r.Method, http.StatusBadRequest)
		case strings.TrimSuffix(r.URL.Path, "/") == "/2016-08-19/account-settings":
			_, _ = fmt.Fprintf(w, `{"AccountLimit":{"TotalCodeSize":80530636800,"CodeSizeUnzipped":262144000,"CodeSizeZipped":52428800,"ConcurrentExecutions":%d,"UnreservedConcurrentExecutions":%d},"AccountUsage":{"TotalCodeSize":1024,"FunctionCount":3}}`,
				unreserved.Load(), unreserved.Load())
		case isMapping && maximum[uuid] != "":
			source := "arn:aws:sqs:us-east-1:123456789012:s-critical"
			switch uuid {
			case "uuid-outbox":
				source = "arn:aws:dynamodb:us-east-1:123456789012:table/s-outbox/stream/2026-12-01T00:00:00.000"
			case "uuid-china": // another partition's queue is a queue too
				source = "arn:aws-cn:sqs:cn-north-1:123456789012:s-bulk"
			case "uuid-govcloud":
				source = "arn:aws-us-gov:sqs:us-gov-west-1:123456789012:s-bulk"
			}
			_, _ = fmt.Fprintf(w, `{"UUID":%q,"BatchSize":10,"EventSourceArn":%q,"FunctionArn":"arn:aws:lambda:us-east-1:123456789012:function:s-email","State":"Enabled","ScalingConfig":%s}`, uuid, source, maximum[uuid])
		default:
			w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"Type":"User","Message":"The resource you requested does not exist."}`)
		}
	}))
	defer srv.Close()
	l := lambdaConcurrency{lambda.NewFromConfig(sdkConfig(srv.URL))}
	ctx := context.Background()
	for uuid, want := range map[string]int{"uuid-critical": 10, "uuid-default": 5, "uuid-unbounded": 0, "uuid-outbox": 0, "uuid-china": 3, "uuid-govcloud": 2} {
		got, queue, err := l.MaximumConcurrency(ctx, uuid)
		if err != nil || got != want || queue != (uuid != "uuid-outbox") {
			t.Errorf("MaximumConcurrency(%s) = %d, queue %v, %v; want %d, queue %v", uuid, got, queue, err, want, uuid != "uuid-outbox")
		}
	}
	if _, _, err := l.MaximumConcurrency(ctx, "uuid-gone"); err == nil || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("MaximumConcurrency of a deleted mapping: %v; want Lambda's ResourceNotFoundException", err)
	}
	stack := fakeStack{sources: []string{"uuid-critical", "uuid-default"}}
	for _, tc := range []struct {
		unreserved int32
		status     Status
	}{{15, Pass}, {14, Fail}} {
		unreserved.Store(tc.unreserved)
		if got, err := l.UnreservedConcurrency(ctx); err != nil || got != int(tc.unreserved) {
			t.Fatalf("UnreservedConcurrency = %d, %v; want %d", got, err, tc.unreserved)
		}
		rep := &Report{}
		checkConcurrency(ctx, Config{StackName: "s", Stack: stack, Lambda: l}, rep)
		if c := rep.Checks[0]; c.Status != tc.status {
			t.Fatalf("unreserved %d against 10 + 5: check %+v; want %s", tc.unreserved, c, tc.status)
		}
	}
}
