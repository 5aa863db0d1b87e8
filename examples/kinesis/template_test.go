package main

import (
	"testing"

	"github.com/runstwice/runstwice/examples/internal/samtest"
)

// TestTemplateDeploysWhatTheFunctionNeeds: template.yaml builds the
// function as main.go is, gives it every variable it reads, feeds it its
// Kinesis stream with ReportBatchItemFailures from a starting position,
// gives the batches Lambda gives up on to the dead-letter queue the
// engine's dead letters go to, keeps the markers as dynamostore writes
// them with TTL on their expiry, and grants the calls the store and the
// dead letters make.
func TestTemplateDeploysWhatTheFunctionNeeds(t *testing.T) {
	samtest.CheckStreamWorker(t, samtest.Read(t, "template.yaml"), "PointsFunction", "Kinesis", "PurchasesStream.Arn", environment)
}
