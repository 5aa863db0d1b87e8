package lambdarie

import "testing"

// Runtime API ports come from below the ephemeral range and are never
// handed to two live emulators at once.
func TestRuntimePortsAreHeldAndOutsideTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 300 {
		p, err := runtimePort()
		if err != nil {
			t.Fatal(err)
		}
		if p < runtimePortMin || p >= runtimePortMax || p >= 32768 {
			t.Fatalf("port %d; want one in [%d, %d), below the ephemeral range", p, runtimePortMin, runtimePortMax)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice while held", p)
		}
		seen[p] = true
	}
	for p := range seen {
		releaseRuntimePort(p)
	}
	runtimePorts.Lock()
	left := len(runtimePorts.held)
	runtimePorts.Unlock()
	if left != 0 {
		t.Fatalf("%d ports still held after release", left)
	}
}
