package lambdarie

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// The runtime API port range: below the kernels' ephemeral port ranges
// (Linux 32768-60999, macOS and Windows 49152-65535).
const (
	runtimePortMin = 20000
	runtimePortMax = 32000
)

// runtimePorts are the runtime API ports held by this process's live
// emulators.
var runtimePorts = struct {
	sync.Mutex
	held map[int]bool
}{held: map[int]bool{}}

// runtimePort picks the port of an emulator's runtime API, which
// aws-lambda-rie binds only when the function first starts (at the first
// invocation), long after the port was picked. A port from the ephemeral
// range could meanwhile become the local port of an outgoing connection
// (the stack makes many), and the emulator would die at its first
// invocation; so the port comes from below that range, is free when
// picked, and is held for its emulator until releaseRuntimePort, so that no
// other emulator of this process gets it.
func runtimePort() (int, error) {
	runtimePorts.Lock()
	defer runtimePorts.Unlock()
	for range 200 {
		p := runtimePortMin + rand.IntN(runtimePortMax-runtimePortMin)
		if runtimePorts.held[p] {
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		runtimePorts.held[p] = true
		return p, nil
	}
	return 0, errors.New("lambdarie: no free port for the runtime API")
}

// releaseRuntimePort gives back a port runtimePort handed out.
func releaseRuntimePort(p int) {
	runtimePorts.Lock()
	delete(runtimePorts.held, p)
	runtimePorts.Unlock()
}
