package chaos

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress writes a live progress line once a second: the phase, the jobs
// enqueued, the mails sent, kills, faults, and what is still queued. To a
// terminal the line is rewritten in place; to anything else (a log file,
// CI) a plain line goes out every logEvery, and at the end.
type progress struct {
	w     io.Writer
	live  bool
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

// logEvery is how often a progress line goes to a writer that is not a
// terminal.
const logEvery = 10 * time.Second

func newProgress(w io.Writer, c *campaign) *progress {
	p := &progress{w: w, live: isTerminal(w), c: c, start: time.Now(), end: make(chan struct{})}
	if w == nil {
		return p
	}
	every := logEvery
	if p.live {
		every = time.Second
	}
	p.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.end:
				p.write(true)
				return
			case <-t.C:
				p.write(false)
			}
		}
	})
	return p
}

// write writes the line: in place on a terminal, else as a line of its own.
func (p *progress) write(last bool) {
	switch {
	case !p.live:
		fmt.Fprintln(p.w, p.line())
	case last:
		fmt.Fprintf(p.w, "\r\033[K%s\n", p.line())
	default:
		fmt.Fprintf(p.w, "\r\033[K%s", p.line())
	}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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
