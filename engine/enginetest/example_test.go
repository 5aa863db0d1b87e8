package enginetest_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// Check is RunTwice without a testing.T: it reports the first way the
// handler fails to converge. A handler that counts its effects by job id
// converges; one that keys its effect by something else would not.
func ExampleCheck() {
	invoice := engine.JobType{
		Name:  "billing.invoice-ready.v1",
		Args:  []engine.ArgSpec{{Name: "invoiceId", Format: engine.FormatID, Required: true}},
		Queue: "default", EnabledByDefault: true, Lease: true,
		KeyPrefix: "invoice-ready", KeyArgs: []string{"invoiceId"},
	}
	var mu sync.Mutex
	sent := map[string]int{} // job id -> notifications
	err := enginetest.Check(enginetest.Case{
		Type: invoice,
		Handler: engine.HandlerFunc(func(ctx context.Context, job engine.Job) error {
			mu.Lock()
			defer mu.Unlock()
			sent[job.Envelope.MessageID]++
			return nil
		}),
		Effects: func(jobID string) int { mu.Lock(); defer mu.Unlock(); return sent[jobID] },
	})
	fmt.Println("converges:", err == nil)
	// Output: converges: true
}
