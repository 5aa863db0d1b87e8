package main

import (
	"testing"

	"github.com/runstwice/runstwice/examples/internal/samtest"
)

// TestTemplateDeploysWhatTheFunctionNeeds: template.yaml builds the
// function as main.go is, gives it every variable it reads, feeds it the
// orders table's stream with ReportBatchItemFailures from a starting
// position, that stream carrying both images (a REMOVE's record holds the
// removed order only then), gives the batches Lambda gives up on to the
// dead-letter queue the engine's dead letters go to, keeps the markers as
// dynamostore writes them with TTL on their expiry, and grants the calls
// the store and the dead letters make.
func TestTemplateDeploysWhatTheFunctionNeeds(t *testing.T) {
	tpl := samtest.Read(t, "template.yaml")
	samtest.CheckStreamWorker(t, tpl, "ConfirmFunction", "DynamoDB", "OrdersTable.StreamArn", environment)
	if view := tpl.Resources["OrdersTable"].Properties.StreamSpecification.StreamViewType; view != "NEW_AND_OLD_IMAGES" {
		t.Errorf("the orders table streams %q; want NEW_AND_OLD_IMAGES", view)
	}
}
