//go:build !chaos

package killpoint

// At does nothing in a release build.
func At(string) {}

// Enabled reports whether this build can be killed at a step: false.
const Enabled = false
