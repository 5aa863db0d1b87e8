//go:build !chaos

package killpoint

import "github.com/runstwice/runstwice/internal/runner"

// At does nothing in a release build.
func At(string) {}

// Enabled reports whether this build can be killed at a step: false.
const Enabled = false

// Mutated reports whether this build was told to make the mutation: never,
// in a release build.
func Mutated(string) bool { return false }

// Wire leaves cfg as it is in a release build.
func Wire(*runner.Config) {}

// RelayKey returns the key the outbox relay stores its decision for an item
// under: the item's own Idempotency-Key.
func RelayKey(key string) string { return key }
