package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyPublicPackages: the example builds as a function of
// another team would, on the module's public packages alone.
func TestImportsOnlyPublicPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := strings.Fields(string(out))
	if len(imports) < 5 {
		t.Fatalf("go list named only %v", imports)
	}
	for _, p := range imports {
		if strings.HasPrefix(p, "github.com/runstwice/runstwice/") && strings.Contains(p+"/", "/internal/") {
			t.Errorf("the example imports %s", p)
		}
	}
}
