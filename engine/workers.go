package engine

import "time"

// workerIdle is how long a worker goroutine waits for another record before
// it exits.
const workerIdle = time.Minute

// workers runs records on goroutines kept between batches. A record's
// pipeline is several kilobytes of stack deep, and a new goroutine starts
// with two: one per record paid for growing (copying) its stack on every
// record, a fifth of the runner's time. A kept worker has grown it already.
// Workers exit after workerIdle without work; a batch never waits for one,
// since a record that finds none idle gets a new goroutine.
type workers struct {
	tasks chan func()
	idle  time.Duration // workerIdle, shorter in tests
}

func newWorkers() *workers { return &workers{tasks: make(chan func()), idle: workerIdle} }

// recordWorkers are the workers every Runner of the process shares: a
// process that builds many runners (a test suite) keeps as many workers as
// records run at once, not as many per runner.
var recordWorkers = newWorkers()

// run runs f on an idle worker, or on a new one when none is idle.
func (w *workers) run(f func()) {
	select {
	case w.tasks <- f:
	default:
		go w.work(f)
	}
}

func (w *workers) work(f func()) {
	idle := time.NewTimer(w.idle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(w.idle)
		select {
		case f = <-w.tasks:
		case <-idle.C:
			return
		}
	}
}

// goRecord starts a record's work: on Config.Go when set, else on the
// process's workers. A test that runs the runner on a fake clock
// (testing/synctest) sets Go to func(f func()) { go f() }: a kept worker
// would outlive the test's bubble, and its wait on the process's channel
// would keep the bubble's clock from moving.
func (m *runner) goRecord(f func()) {
	if m.o.Go != nil {
		m.o.Go(f)
		return
	}
	recordWorkers.run(f)
}
