package devstack

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeInstance fails the test if it is invoked while busy, like
// aws-lambda-rie (which crashes then); each invocation waits for release.
type fakeInstance struct {
	t      *testing.T
	busy   atomic.Bool
	exited atomic.Bool
	starts *fakeStarts
	calls  atomic.Int32
}

func (f *fakeInstance) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	if !f.busy.CompareAndSwap(false, true) {
		f.t.Errorf("invoked while busy with another invocation")
		return nil, errors.New("AlreadyReserved")
	}
	defer f.busy.Store(false)
	f.calls.Add(1)
	if gate := f.starts.gate(); gate != nil {
		<-gate
	}
	return payload, nil
}
func (f *fakeInstance) Exited() bool { return f.exited.Load() }
func (f *fakeInstance) Stop()        { f.exited.Store(true) }

type fakeStarts struct {
	mu        sync.Mutex
	instances []*fakeInstance
	release   chan struct{}
	t         *testing.T
}

func (s *fakeStarts) start(context.Context) (Instance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := &fakeInstance{t: s.t, starts: s}
	s.instances = append(s.instances, in)
	return in, nil
}

// gate is what invocations wait for now (nil: nothing).
func (s *fakeStarts) gate() chan struct{} { s.mu.Lock(); defer s.mu.Unlock(); return s.release }

func (s *fakeStarts) setGate(c chan struct{}) { s.mu.Lock(); defer s.mu.Unlock(); s.release = c }

func (s *fakeStarts) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.instances) }

func TestPoolNeverHandsOutABusyInstance(t *testing.T) {
	starts := &fakeStarts{t: t, release: make(chan struct{})}
	p := NewPool(1, starts.start)
	impatient, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { _, err := p.Invoke(impatient, []byte("1")); first <- err }()
	for starts.count() == 0 || starts.instances[0].calls.Load() == 0 {
		runtime.Gosched() // wait until the first invocation runs
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v; want context.Canceled", err)
	}
	second := make(chan error, 1)
	go func() {
		out, err := p.Invoke(context.Background(), []byte("2"))
		if err == nil && string(out) != "2" {
			err = fmt.Errorf("reply %q", out)
		}
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("the second call ran (%v) while the first invocation still held the only instance", err)
	default:
	}
	close(starts.release) // the first invocation ends; the second may run
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if n := starts.count(); n != 1 {
		t.Fatalf("%d instances started; want 1 (the limit)", n)
	}
}

func TestPoolGrowsToItsLimitAndReusesWarmInstances(t *testing.T) {
	starts := &fakeStarts{t: t}
	p := NewPool(3, starts.start)
	for range 5 { // one at a time: one warm instance serves them all
		if _, err := p.Invoke(context.Background(), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if n := starts.count(); n != 1 {
		t.Fatalf("%d instances for sequential calls; want 1 warm one reused", n)
	}
	gate := make(chan struct{})
	starts.setGate(gate)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := p.Invoke(context.Background(), []byte("y")); err != nil {
				t.Error(err)
			}
		})
	}
	for starts.count() < 3 {
		runtime.Gosched()
	}
	close(gate)
	wg.Wait()
	if n := starts.count(); n != 3 {
		t.Fatalf("%d instances for 8 concurrent calls; want the limit, 3", n)
	}
}

func TestPoolReplacesAnInstanceThatExited(t *testing.T) {
	starts := &fakeStarts{t: t}
	p := NewPool(1, starts.start)
	if _, err := p.Invoke(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	starts.instances[0].exited.Store(true) // it crashed
	if _, err := p.Invoke(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if n := starts.count(); n != 2 || starts.instances[1].calls.Load() != 1 {
		t.Fatalf("%d instances; want a fresh one to have served the call", n)
	}
	if p.Size() != 1 {
		t.Fatalf("pool size %d; want 1", p.Size())
	}
}

func TestPoolWaitsNoLongerThanItsCaller(t *testing.T) {
	starts := &fakeStarts{t: t, release: make(chan struct{})}
	defer close(starts.release)
	p := NewPool(1, starts.start)
	go func() { _, _ = p.Invoke(context.Background(), nil) }()
	for starts.count() == 0 || starts.instances[0].calls.Load() == 0 {
		runtime.Gosched()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Invoke(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want the caller's context error while every instance is busy", err)
	}
}
