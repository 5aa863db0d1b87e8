package exampletest

import (
	"context"
	"os/exec"
	"strings"
	"testing"
)

// CheckImportsOnlyPublicPackages checks that the example in the current
// directory builds as a function of another team would, on the library's
// modules alone (the engine and its AWS adapters): nothing internal,
// nothing of the bundle.
func CheckImportsOnlyPublicPackages(t *testing.T) {
	t.Helper()
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

// CheckBuildRefusesAMissingVariable checks that build does not wire the
// function without one of the variables of environment, and that its
// error names it, and that with all of them (and the SDK's defaults
// alone: no profile or file of this machine's) it does.
func CheckBuildRefusesAMissingVariable[H any](t *testing.T, environment []string, build func(context.Context) (H, error)) {
	t.Helper()
	for _, missing := range environment {
		t.Run(missing, func(t *testing.T) {
			for _, n := range environment {
				t.Setenv(n, "set")
			}
			t.Setenv(missing, "")
			_, err := build(context.Background())
			if err == nil || !strings.Contains(err.Error(), missing+" is not set") {
				t.Fatalf("build = %v; want it to name %s", err, missing)
			}
		})
	}
	for _, n := range environment {
		t.Setenv(n, "set")
	}
	// No profile or file of this machine's: the SDK's defaults alone.
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/credentials")
	if _, err := build(context.Background()); err != nil {
		t.Fatalf("build with every variable = %v", err)
	}
}
