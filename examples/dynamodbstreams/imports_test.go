package main

import (
	"testing"

	"github.com/runstwice/runstwice/examples/internal/exampletest"
)

// TestImportsOnlyPublicPackages: the example builds as a function of
// another team would, on the library's modules alone (the engine and its
// AWS adapters): nothing internal, nothing of the bundle.
func TestImportsOnlyPublicPackages(t *testing.T) {
	exampletest.CheckImportsOnlyPublicPackages(t)
}
