package main

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/examples/internal/samtest"
)

// TestTemplateDeploysWhatTheFunctionNeeds: template.yaml builds the
// function as main.go is, gives it every variable it reads, feeds it its
// queue with ReportBatchItemFailures, redrives that queue to a dead-letter
// queue, keeps the markers as dynamostore writes them with TTL on their
// expiry, creates the kind's switch parameter under TOGGLES_PATH, and
// grants the calls the store, the switch, the parks and the dead letters
// make.
func TestTemplateDeploysWhatTheFunctionNeeds(t *testing.T) {
	tpl := samtest.Read(t, "template.yaml")
	vars := samtest.CheckWorker(t, tpl, "WebhookFunction", environment)

	toggles := vars["TOGGLES_PATH"]
	var switches []string
	for _, r := range tpl.Resources {
		if r.Type == "AWS::SSM::Parameter" {
			switches = append(switches, r.Properties.Name)
		}
	}
	if len(switches) != 1 || switches[0] != toggles+"/"+Deliver.Name {
		t.Errorf("the template's parameters are %q; want the switch %s/%s", switches, toggles, Deliver.Name)
	}
	samtest.CheckGrants(t, tpl, "WebhookFunction", map[string]string{
		"sqs:SendMessage": vars["QUEUE_URL"] + ".Arn", // a park goes back to the queue
	})
	granted := tpl.Grants("WebhookFunction")["ssm:GetParametersByPath"]
	if len(granted) != 1 || !strings.HasSuffix(granted[0], ":parameter"+toggles) {
		t.Errorf("the role grants ssm:GetParametersByPath on %q; want the path %s", granted, toggles)
	}
}
