package scalemodel

import (
	"runtime"
	"time"
)

// progress samples the process's memory every virtual minute until stop,
// keeping its peak, and says through Logf, when set, how far the run is
// and what it holds: the links not yet checked and dropped, the table's
// items and the markers.
func (w *world) progress(stop time.Time) {
	start := time.Now()
	for time.Now().Before(stop) {
		time.Sleep(time.Minute)
		held := heldMemory()
		w.mu.Lock()
		w.res.PeakMemory = max(w.res.PeakMemory, held)
		made, links := w.res.Continuations, len(w.byChild)
		w.mu.Unlock()
		if w.cfg.Logf != nil {
			w.cfg.Logf("%v: %d continuations made, %d links held, %d items, %d markers, %d MB held",
				time.Since(start).Round(time.Minute), made, links, w.db.Len(), w.markers.Len(), held>>20)
		}
	}
}

// heldMemory is the memory the Go runtime holds from the OS: what it
// mapped, less the heap it gave back.
func heldMemory() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Sys - ms.HeapReleased
}
