//go:build !chaos

package killpoint

// At does nothing in a release build.
func At(string) {}

// Enabled reports whether this build can be killed at a step: false.
const Enabled = false

// Mutated reports whether this build was told to make the mutation: never,
// in a release build.
func Mutated(string) bool { return false }
