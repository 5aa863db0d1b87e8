package enginetest_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
)

// Check is RunTwice without a testing.T: it reports the first way the work
// fails to converge. Work that counts its effects by the job's key
// converges under a lease.
func ExampleCheck() {
	type invoice struct {
		ID string `json:"invoiceId"`
	}
	var mu sync.Mutex
	sent := map[string]int{} // invoice id -> notifications
	err := enginetest.Check(enginetest.Case[invoice]{
		Kind: engine.Kind[invoice]{
			Name:  "billing.invoice-ready",
			Key:   func(i invoice) (string, error) { return i.ID, nil },
			Lease: true,
		},
		Work: func(ctx context.Context, job engine.Job[invoice]) error {
			mu.Lock()
			defer mu.Unlock()
			sent[job.Key]++
			return nil
		},
		New:     func(key string) invoice { return invoice{ID: key} },
		Effects: func(key string) int { mu.Lock(); defer mu.Unlock(); return sent[key] },
	})
	fmt.Println("converges:", err == nil)
	// Output: converges: true
}
