//go:build chaos

package vclock

import (
	"os"
	"time"
)

// Enabled reports whether this build reads a virtual clock: true.
const Enabled = true

// process is this process's clock, its offset file named by EnvVar.
var process = &Reader{Path: os.Getenv("RUNSTWICE_VCLOCK")}

// Now returns the virtual time: the wall clock moved forward by the offset
// the campaign wrote (the wall clock when EnvVar is unset).
func Now() time.Time { return process.Now() }

// Offset returns how far Now is ahead of the wall clock.
func Offset() time.Duration { return process.Offset() }
