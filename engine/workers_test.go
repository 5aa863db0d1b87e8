package engine

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Workers are kept between batches and reused, never piled up: ten rounds
// of ten concurrent records leave about ten workers, not a hundred, and
// they all exit once idle. (A worker that a loaded machine has not yet
// brought back to its receive when the next round starts is one more, so
// the bound is twice ten: a goroutine per record makes a hundred.)
func TestWorkersAreReusedAndExitWhenIdle(t *testing.T) {
	w := newWorkers()
	w.idle = 200 * time.Millisecond
	base := runtime.NumGoroutine()
	var peak int
	for range 10 {
		var wg sync.WaitGroup
		release := make(chan struct{})
		for range 10 {
			wg.Add(1)
			w.run(func() { defer wg.Done(); <-release })
		}
		peak = max(peak, runtime.NumGoroutine()-base)
		close(release)
		wg.Wait()
		time.Sleep(50 * time.Millisecond) // the workers are back at their receive
	}
	if peak > 20 {
		t.Fatalf("%d worker goroutines for rounds of 10 records; want the same 10 or so reused", peak)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d worker goroutines still run after their idle time", runtime.NumGoroutine()-base)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
