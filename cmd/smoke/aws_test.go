package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/smithy-go/encoding/cbor"
)

// The emulator the integration tests use (moto) does not list CloudWatch
// alarms among a stack's resources and does not speak CloudWatch's CBOR
// protocol, so these tests serve the two calls in AWS's wire formats to the
// real SDK clients.

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
				resource("AWS::SNS::Topic", "arn:aws:sns:us-east-1:1:t")+resource("AWS::CloudWatch::Alarm", "s-dlq-received"), "<NextToken>p2</NextToken>"))
			return
		}
		_, _ = io.WriteString(w, fmt.Sprintf(listStackResourcesPage,
			resource("AWS::CloudWatch::CompositeAlarm", "s-any")+resource("AWS::Lambda::Function", "s-email"), ""))
	}))
	defer srv.Close()
	got, err := cfnStack{cloudformation.NewFromConfig(sdkConfig(srv.URL))}.AlarmNames(context.Background(), "s")
	if err != nil || !slices.Equal(got, []string{"s-dlq-received", "s-any"}) {
		t.Fatalf("AlarmNames = %v, %v; want both pages' alarms and nothing else", got, err)
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
