// Package functions_test holds the rules about what the Lambda functions
// may link.
package functions_test

import (
	"os/exec"
	"strings"
	"testing"
)

// No package a Lambda function links comes from the local emulation
// (internal/dev) or from a test kit: those exist only to run and test the
// bundle without AWS.
func TestFunctionsLinkNoEmulationOrTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v: %s", err, out)
	}
	const module = "github.com/runstwice/runstwice/"
	forbidden := []string{"internal/dev/", "internal/testkit", "enginetest", "markertest", "obstest"}
	for _, pkg := range strings.Fields(string(out)) {
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
