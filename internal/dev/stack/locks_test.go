package stack

import (
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/idempotency"
	"github.com/runstwice/runstwice/internal/jobs"
)

// A request that makes a job (the enqueue function, the outbox relay) is
// over before its request lock and its Pending reservation can be taken
// over, and before the schedule sweep takes a job cancelled while it was
// Pending off its list: each function's timeout is shorter than the lock
// timeout and the pending timeout. A longer timeout would let a second
// request make the same job while the first still runs, or the sweep
// forget a schedule the first is about to make.
func TestTimeoutsFitTheLocks(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	for _, id := range []string{"EnqueueFunction", "OutboxFunction"} {
		timeout := time.Duration(num(tmpl.Resources[id].Properties["Timeout"])) * time.Second
		if timeout <= 0 {
			t.Fatalf("%s has no Timeout", id)
		}
		if timeout >= jobs.DefaultPendingTimeout || timeout >= idempotency.DefaultLockTimeout {
			t.Errorf("%s: Timeout %s is not shorter than the pending timeout %s and the request lock %s",
				id, timeout, jobs.DefaultPendingTimeout, idempotency.DefaultLockTimeout)
		}
	}
}
