package chaos

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// progress writes a live progress line once a second: the phase, the jobs
// enqueued, the mails sent, kills, faults, and what is still queued.
type progress struct {
	w     io.Writer
	c     *campaign
	start time.Time
	end   chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	name     string
	total    int
	enqueued *atomic.Int64
	queued   int
	busy     int
}

func newProgress(w io.Writer, c *campaign) *progress {
	p := &progress{w: w, c: c, start: time.Now(), end: make(chan struct{})}
	if w == nil {
		return p
	}
	p.wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-p.end:
				fmt.Fprintf(p.w, "\r\033[K%s\n", p.line())
				return
			case <-t.C:
				fmt.Fprintf(p.w, "\r\033[K%s", p.line())
			}
		}
	})
	return p
}

func (p *progress) phase(name string) {
	p.mu.Lock()
	p.name = name
	p.mu.Unlock()
}

func (p *progress) setLoad(total int, enqueued *atomic.Int64) {
	p.mu.Lock()
	p.total, p.enqueued = total, enqueued
	p.mu.Unlock()
}

func (p *progress) setQueued(n, busy int) {
	p.mu.Lock()
	p.queued, p.busy = n, busy
	p.mu.Unlock()
}

func (p *progress) line() string {
	p.mu.Lock()
	name, total, queued, busy := p.name, p.total, p.queued, p.busy
	var enq int64
	if p.enqueued != nil {
		enq = p.enqueued.Load()
	}
	p.mu.Unlock()
	c := p.c
	return fmt.Sprintf("chaos %6s  %-24s enqueued %d/%d  mails %d  kills %d  faults %d  queued %d  running %d",
		time.Since(p.start).Round(time.Second), name, enq, total, c.witness.count(), c.obs.killCount(), len(c.faults.Events()), queued, busy)
}

func (p *progress) stop() {
	if p.w == nil {
		return
	}
	select {
	case <-p.end:
	default:
		close(p.end)
	}
	p.wg.Wait()
}
