// Package functions_test holds the rules about what the Lambda functions
// may link.
package functions_test

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/testkit"
)

// No package a Lambda function links comes from the local emulation
// (internal/dev) or from a test kit: those exist only to run and test the
// bundle without AWS.
func TestFunctionsLinkNoEmulationOrTestCode(t *testing.T) {
	const module = "github.com/runstwice/runstwice/"
	forbidden := []string{"internal/dev/", "internal/testkit", "enginetest", "markertest", "obstest"}
	for _, pkg := range testkit.Deps(t, "-tags", "lambda.norpc", "./...") {
		if !strings.HasPrefix(pkg, module) {
			continue
		}
		for _, f := range forbidden {
			if strings.Contains(strings.TrimPrefix(pkg, module), f) {
				t.Errorf("a Lambda function links %s", pkg)
			}
		}
	}
}
