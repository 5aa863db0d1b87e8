package main

import (
	"testing"

	"github.com/runstwice/runstwice/examples/internal/samtest"
)

// TestTemplateDeploysWhatTheFunctionNeeds: template.yaml builds the
// function as main.go is, gives it every variable it reads, routes POST
// /charges of its HTTP API to it in payload format 2.0 (the event Handle
// reads) behind the IAM authorizer (the caller its keys are scoped by),
// keeps the markers as dynamostore writes them with TTL on their expiry,
// and grants the calls the store makes.
func TestTemplateDeploysWhatTheFunctionNeeds(t *testing.T) {
	tpl := samtest.Read(t, "template.yaml")
	vars := samtest.CheckFunction(t, tpl, "ChargeFunction", environment)
	samtest.CheckMarkers(t, tpl, "ChargeFunction", vars["MARKERS_TABLE"])

	events := tpl.Resources["ChargeFunction"].Properties.Events
	if len(events) != 1 {
		t.Fatalf("ChargeFunction has events %v; want its route", events)
	}
	for name, ev := range events {
		e := ev.Properties
		if ev.Type != "HttpApi" || e.Method != "POST" || e.Path != "/charges" || e.PayloadFormatVersion != "2.0" {
			t.Errorf("event %s is %s %s %s in format %q; want HttpApi POST /charges in format 2.0", name, ev.Type, e.Method, e.Path, e.PayloadFormatVersion)
		}
		if e.Auth.Authorizer != "AWS_IAM" {
			t.Errorf("event %s is authorized by %q; want AWS_IAM, whose caller the keys are scoped by", name, e.Auth.Authorizer)
		}
		api := tpl.Resources[e.APIID]
		if api.Type != "AWS::Serverless::HttpApi" || !api.Properties.Auth.EnableIamAuthorizer {
			t.Errorf("event %s's API %q is a %s, IAM authorizer enabled %v; want an HTTP API with it", name, e.APIID, api.Type, api.Properties.Auth.EnableIamAuthorizer)
		}
	}
}
