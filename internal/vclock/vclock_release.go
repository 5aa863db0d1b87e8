//go:build !chaos

package vclock

import "time"

// Enabled reports whether this build reads a virtual clock: false.
const Enabled = false

// Now returns the wall clock (time.Now) in a release build.
func Now() time.Time { return time.Now() }

// Offset is zero in a release build.
func Offset() time.Duration { return 0 }
