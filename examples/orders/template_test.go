package main

import (
	"testing"

	"github.com/runstwice/runstwice/examples/internal/samtest"
)

// TestTemplateDeploysWhatTheFunctionNeeds: template.yaml builds the
// function as main.go is, gives it every variable it reads, feeds it its
// queue with ReportBatchItemFailures, redrives that queue to a dead-letter
// queue, keeps the markers as dynamostore writes them with TTL on their
// expiry, and grants the calls the store and the dead letters make.
func TestTemplateDeploysWhatTheFunctionNeeds(t *testing.T) {
	samtest.CheckWorker(t, samtest.Read(t, "template.yaml"), "OrdersFunction", environment)
}
