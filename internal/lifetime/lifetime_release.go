//go:build !chaos

package lifetime

// floorOnly is false in a release build: every guard lives past the last
// delivery it must stop.
const floorOnly = false
