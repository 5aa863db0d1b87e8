package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportsOnlyPublicPackages: the example builds as a function of
// another team would, on the library's modules alone (the engine and its
// AWS adapters): nothing internal, nothing of the bundle.
func TestImportsOnlyPublicPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	imports := strings.Fields(string(out))
	if len(imports) < 5 {
		t.Fatalf("go list named only %v", imports)
	}
	const module = "github.com/runstwice/runstwice/"
	for _, p := range imports {
		rel, ours := strings.CutPrefix(p, module)
		if ours && rel != "engine" && !strings.HasPrefix(rel, "engine/") && !strings.HasPrefix(rel, "aws/") {
			t.Errorf("the example imports %s", p)
		}
	}
}
