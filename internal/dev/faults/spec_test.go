package faults

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	got, err := Parse("dynamodb:*:throttle=0.02, dynamodb:PutItem:drop=0.02,sqs:SendMessage:500=0.02,ses:*:drop500#3," +
		"SSM:*:down@30s-1m30s,dynamodb:*:delay(300ms)=0.05,sqs:*:503@2m-,ssm:GetParametersByPath:reset=1,dynamodb:PutItem~markers~DONE:500," +
		"ses:SendEmail:throttle(2/s),ses:*:throttle(0.5/s)=0.5#3@1m-")
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{
		{Service: "dynamodb", Operation: "*", Kind: Throttle, P: 0.02},
		{Service: "dynamodb", Operation: "PutItem", Kind: Drop, P: 0.02},
		{Service: "sqs", Operation: "SendMessage", Kind: Error500, P: 0.02},
		{Service: "ses", Operation: "*", Kind: Drop500, P: 1, Limit: 3},
		{Service: "ssm", Operation: "*", Kind: Down, P: 1, From: 30 * time.Second, Until: 90 * time.Second},
		{Service: "dynamodb", Operation: "*", Kind: Delay, P: 0.05, Delay: 300 * time.Millisecond},
		{Service: "sqs", Operation: "*", Kind: Error503, P: 1, From: 2 * time.Minute},
		{Service: "ssm", Operation: "GetParametersByPath", Kind: Reset, P: 1},
		{Service: "dynamodb", Operation: "PutItem", Contains: []string{"markers", "DONE"}, Kind: Error500, P: 1},
		{Service: "ses", Operation: "SendEmail", Kind: Throttle, P: 1, Rate: 2},
		{Service: "ses", Operation: "*", Kind: Throttle, P: 0.5, Rate: 0.5, Limit: 3, From: time.Minute},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	// String writes what Parse reads.
	for _, r := range want {
		back, err := Parse(r.String())
		if err != nil || len(back) != 1 || !reflect.DeepEqual(back[0], r) {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", r.String(), back, err, r)
		}
	}
	if rules, err := Parse(" , "); err != nil || len(rules) != 0 {
		t.Fatalf("empty spec = %v, %v; want no rules", rules, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, spec := range []string{
		"dynamodb:throttle",
		"dynamodb:*:explode",
		"dynamodb:*:throttle=2",
		"dynamodb:*:throttle=0",
		"dynamodb:*:throttle=x",
		"dynamodb:*:throttle#0",
		"ssm:*:down@1m",
		"ssm:*:down@2m-1m",
		"ssm:*:down@x-1m",
		"dynamodb:*:throttle(1s)",
		"ses:*:throttle(2)",
		"ses:*:throttle(0/s)",
		"ses:*:throttle(x/s)",
		"ses:*:throttle(2/s",
		"ses:*:500(2/s)",
		"ses:*:delay(2/s)",
		"dynamodb:*:delay(-1s)",
		":*:throttle",
		"dynamodb:PutItem~:500",
		"dynamodb:PutItem~a~~b:500",
		"dynamodb:~DONE:500",
	} {
		if _, err := Parse(spec); !errors.Is(err, ErrSpec) {
			t.Errorf("Parse(%q) = %v; want ErrSpec", spec, err)
		}
	}
}
