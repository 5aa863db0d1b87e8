package devstack

import (
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/dev/proc"
)

// Stop stops every process the stack started and removes stack.json and
// env. It is safe to call twice, and on a stack that did not fully start.
func (l *Local) Stop() {
	if l == nil {
		return
	}
	l.stopOnce.Do(func() {
		if l.cancel != nil {
			l.cancel()
		}
		if l.server != nil {
			proc.Shutdown(l.server, 3*time.Second)
		}
		l.wg.Wait()
		var wg sync.WaitGroup
		for _, p := range l.pools {
			wg.Go(p.Stop)
		}
		wg.Wait()
		l.proxy.Close()
		l.webhooks.Close()
		if l.traces != nil {
			_ = l.traces.Close()
		}
		if l.moto != nil {
			l.moto.Stop()
		}
		if l.wrote {
			removeStackFiles(l.stateDir)
		}
		if l.runLog != nil {
			l.runLog.Info(RunStoppedMsg)
		}
		for _, f := range l.logs {
			f.Close()
		}
		l.lock.release()
	})
}
