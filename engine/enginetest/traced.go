package enginetest

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/engine/memstore"

	"github.com/runstwice/runstwice/engine"
)

// Trace is the ordered log of what test fakes were asked to do ("peek",
// "lease", "send", …), shared by the fakes of one test so it can assert the
// order of their calls. It is safe for concurrent use.
type Trace struct {
	mu  sync.Mutex
	ops []string
}

// Add appends op.
func (t *Trace) Add(op string) { t.mu.Lock(); t.ops = append(t.ops, op); t.mu.Unlock() }

// Has reports whether an op starting with prefix was recorded.
func (t *Trace) Has(prefix string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.ContainsFunc(t.ops, func(o string) bool { return strings.HasPrefix(o, prefix) })
}

// Count returns how many times op was recorded.
func (t *Trace) Count(op string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.ops {
		if o == op {
			n++
		}
	}
	return n
}

// Reset forgets every op.
func (t *Trace) Reset() { t.mu.Lock(); t.ops = nil; t.mu.Unlock() }

// String lists the ops in order, separated by spaces.
func (t *Trace) String() string { t.mu.Lock(); defer t.mu.Unlock(); return strings.Join(t.ops, " ") }

// Traced is the in-memory marker store (whose rules RunStore proves equal to
// DynamoDB's) recording "peek", "lease", "claim" and "release" on a Trace.
type Traced struct {
	*memstore.Store
	Trace *Trace
}

// PeekBatch records "peek" and reads the markers.
func (m Traced) PeekBatch(ctx context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	m.Trace.Add("peek")
	return m.Store.PeekBatch(ctx, keys)
}

// Lease records "lease" and takes the lease.
func (m Traced) Lease(ctx context.Context, k engine.Key, mk engine.Mark) (engine.Record, error) {
	m.Trace.Add("lease")
	return m.Store.Lease(ctx, k, mk)
}

// Claim records "claim" and claims the marker.
func (m Traced) Claim(ctx context.Context, k engine.Key, mk engine.Mark) (bool, error) {
	m.Trace.Add("claim")
	return m.Store.Claim(ctx, k, mk)
}

// Release records "release" and releases the lease.
func (m Traced) Release(ctx context.Context, k engine.Key, owner string) error {
	m.Trace.Add("release")
	return m.Store.Release(ctx, k, owner)
}

// Fail records "fail" and marks the claim failed.
func (m Traced) Fail(ctx context.Context, k engine.Key, mk engine.Mark) error {
	m.Trace.Add("fail")
	return m.Store.Fail(ctx, k, mk)
}

// Tombstone records "tombstone" and cancels the job.
func (m Traced) Tombstone(ctx context.Context, k engine.Key, due time.Time) (engine.Record, error) {
	m.Trace.Add("tombstone")
	return m.Store.Tombstone(ctx, k, due)
}
