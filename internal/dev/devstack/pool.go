package devstack

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
)

// Instance is one execution environment of a function: it runs one
// invocation at a time, to its end.
type Instance interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
	// Exited reports that the instance is gone (crashed or stopped).
	Exited() bool
	Stop()
}

// Pool runs a function's invocations the way Lambda does: each on an
// instance of its own, up to a concurrency limit, starting instances on
// demand and reusing warm ones. An instance stays busy until its invocation
// ends, even when the caller gives up; a caller waits for a free instance
// instead (as long as its context allows), never lands on a busy one. An
// instance that crashed is replaced by a fresh one.
type Pool struct {
	start func(ctx context.Context) (Instance, error)
	warm  chan Instance // started and free
	cold  chan struct{} // a slot with no instance yet
	mu    sync.Mutex
	all   map[Instance]bool
	done  bool
}

// NewPool returns a pool of at most size instances made by start.
func NewPool(size int, start func(ctx context.Context) (Instance, error)) *Pool {
	size = max(size, 1)
	p := &Pool{start: start, warm: make(chan Instance, size), cold: make(chan struct{}, size), all: map[Instance]bool{}}
	for range size {
		p.cold <- struct{}{}
	}
	return p
}

// EmulatorPool returns a pool of aws-lambda-rie processes started with cfg,
// each writing to an output of its own from output (a process's output is
// a stream of its own lines).
func EmulatorPool(size int, cfg lambdarie.Config, output func() io.Writer) *Pool {
	return NewPool(size, emulatorStart(cfg, output))
}

// emulatorStart starts one aws-lambda-rie instance of cfg, writing to an
// output of its own from output.
func emulatorStart(cfg lambdarie.Config, output func() io.Writer) func(ctx context.Context) (Instance, error) {
	return func(ctx context.Context) (Instance, error) {
		cfg := cfg
		if output != nil {
			cfg.Output = output()
		}
		em, err := lambdarie.Start(ctx, cfg)
		if err != nil {
			return nil, err // a nil *Emulator must not become a non-nil Instance
		}
		return em, nil
	}
}

// Invoke implements Invoker. It returns when the invocation ends or when
// ctx is done, whichever comes first; in the second case the invocation
// still runs to its end on its instance, which stays busy until then.
func (p *Pool) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	in, err := p.acquire(ctx)
	if err != nil {
		return nil, err
	}
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		body, err := in.Invoke(context.WithoutCancel(ctx), payload)
		p.release(in)
		done <- result{body, err}
	}()
	select {
	case r := <-done:
		return r.body, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("devstack: the caller gave up; the invocation runs on: %w", ctx.Err())
	}
}

// acquire takes a warm instance, else starts one in a free slot, else waits
// for either.
func (p *Pool) acquire(ctx context.Context) (Instance, error) {
	select {
	case in := <-p.warm:
		return p.ready(ctx, in)
	default:
	}
	select {
	case in := <-p.warm:
		return p.ready(ctx, in)
	case <-p.cold:
		return p.fresh(ctx)
	case <-ctx.Done():
		return nil, fmt.Errorf("devstack: waiting for a free function instance: %w", ctx.Err())
	}
}

// ready returns in, or a fresh instance in its place when it has exited.
func (p *Pool) ready(ctx context.Context, in Instance) (Instance, error) {
	if !in.Exited() {
		return in, nil
	}
	p.mu.Lock()
	delete(p.all, in)
	p.mu.Unlock()
	in.Stop()
	return p.fresh(ctx)
}

// fresh starts an instance in a slot the caller holds; on failure the slot
// is free again.
func (p *Pool) fresh(ctx context.Context) (Instance, error) {
	p.mu.Lock()
	closed := p.done
	p.mu.Unlock()
	if closed {
		p.cold <- struct{}{}
		return nil, fmt.Errorf("devstack: the pool is stopped")
	}
	in, err := p.start(context.WithoutCancel(ctx))
	if err != nil {
		p.cold <- struct{}{}
		return nil, fmt.Errorf("devstack: start a function instance: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		in.Stop()
		p.cold <- struct{}{}
		return nil, fmt.Errorf("devstack: the pool is stopped")
	}
	p.all[in] = true
	return in, nil
}

func (p *Pool) release(in Instance) { p.warm <- in }

// Warm starts one instance ahead of the first invocation (if none is warm
// yet), so a function that cannot start says so at once.
func (p *Pool) Warm(ctx context.Context) error {
	select {
	case <-p.cold:
	default:
		return nil
	}
	in, err := p.fresh(ctx)
	if err != nil {
		return err
	}
	p.release(in)
	return nil
}

// Size reports how many instances are running now.
func (p *Pool) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// Stop stops every instance. Invocations under way end with an error.
func (p *Pool) Stop() {
	p.mu.Lock()
	p.done = true
	all := make([]Instance, 0, len(p.all))
	for in := range p.all {
		all = append(all, in)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range all {
		wg.Go(in.Stop)
	}
	wg.Wait()
}
