//go:build chaos

package lifetime

import (
	"os"
	"slices"
	"strings"
)

// floorOnly is the chaos build's mutation short-guards (killpoint.ShortGuards,
// read from the same variable, RUNSTWICE_MUTATE): every guard lives its
// floor alone, as if no job could run later than that.
var floorOnly = slices.ContainsFunc(strings.Split(os.Getenv("RUNSTWICE_MUTATE"), ","), func(m string) bool {
	return strings.TrimSpace(m) == "short-guards"
})
