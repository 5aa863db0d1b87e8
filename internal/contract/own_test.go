package contract

import "testing"

// runstwice's own types are exactly the ones no user asks for: the ticks
// of its sweeps and a batch's finisher. The mail and webhook types a user
// enqueues, and the weekly digest's fan-out (a tick of the user's own
// schedule), are not.
func TestOwnTypesAreRunstwicesOwn(t *testing.T) {
	own := map[string]bool{ScheduleSweep.Name: true, BatchFinish.Name: true, ContinuationSweep.Name: true}
	for _, jt := range Types() {
		if got := Own(jt.Name); got != own[jt.Name] {
			t.Errorf("Own(%s) = %v; want %v", jt.Name, got, own[jt.Name])
		}
		if Own(jt.Name) && jt.TickArgs == nil && !Internal(jt.Name) {
			t.Errorf("%s is runstwice's own but a request may enqueue it: make it a tick type or Internal", jt.Name)
		}
	}
}
