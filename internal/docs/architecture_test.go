package docs

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module's import path.
const module = "github.com/runstwice/runstwice/"

// floor is one floor of the house: its name and the packages on it.
type floor struct {
	name     string
	packages []string
}

// floors are the house's floors (docs/architecture.md), top first: a
// package may import its own floor and the floors below it, never one
// above. A prefix ending in "/" places every package under it.
var floors = []floor{
	{"wiring", []string{"functions", "functions/", "cmd/", "examples/", "client", "internal/dev/", "internal/docs", "internal/wiring", "internal/wiring/"}},
	{"use cases", []string{"internal/enqueue", "internal/sweep", "internal/email", "internal/email/", "internal/deadletter", "internal/outbox", "internal/operate"}},
	{"bundle mechanisms", []string{"internal/jobs", "internal/jobs/", "internal/marker",
		"internal/switchview", "internal/schedule", "internal/schedule/", "internal/idempotency", "internal/testkit",
		"internal/contract", "internal/envvar", "internal/killpoint", "internal/runner", "internal/obs/obstest"}},
	{"message contract", []string{"message"}},
	{"adapters", []string{"aws/"}},
	{"foundations", []string{"internal/lifetime", "internal/vclock", "internal/obs", "internal/obs/", "internal/ddb", "internal/awsx", "internal/function", "internal/cmdmain", "internal/tracing", "internal/apigw"}},
	{"engine", []string{"engine", "engine/"}},
}

// floorIn is floorOf, with the use cases derived too: a package that a
// function's main imports (in pkgs) and that has no floor of its own is a
// use case, so a new job type's package (its handler, on its own
// function) needs no line in floors.
func floorIn(pkg string, pkgs map[string][]string) int {
	if i := floorOf(pkg); i >= 0 {
		return i
	}
	for fn, imps := range pkgs {
		if strings.HasPrefix(fn, "functions/") && slices.Contains(imps, pkg) {
			return slices.IndexFunc(floors, func(f floor) bool { return f.name == "use cases" })
		}
	}
	return -1
}

// floorOf is the index of pkg's floor in floors (0 is the top), or -1.
func floorOf(pkg string) int {
	for i, f := range floors {
		for _, p := range f.packages {
			if pkg == p || (strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p)) {
				return i
			}
		}
	}
	return -1
}

// packageImports lists every package of the module with the module's
// packages it imports (tests left out), paths relative to the module.
func packageImports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...")
	cmd.Dir = root(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		pkgs[pkg] = nil
		for _, imp := range fields[1:] {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				pkgs[pkg] = append(pkgs[pkg], rel)
			}
		}
	}
	return pkgs
}

// No package imports one on a floor above its own, and every package has a
// floor (a new one must be placed, here and in docs/architecture.md).
func TestNoPackageImportsAFloorAbove(t *testing.T) {
	pkgs := packageImports(t)
	for pkg, imps := range pkgs {
		from := floorIn(pkg, pkgs)
		if from < 0 {
			t.Errorf("%s has no floor: place it in floors and in docs/architecture.md", pkg)
			continue
		}
		for _, imp := range imps {
			if to := floorIn(imp, pkgs); to >= 0 && to < from {
				t.Errorf("%s (%s) imports %s, a floor above (%s)", pkg, floors[from].name, imp, floors[to].name)
			}
		}
	}
}

// No test kit outside the emulation wing (a *test package, or
// internal/testkit) imports the wing: a product's test kit must work
// without moto, the runtime emulator or the local stack. The examples'
// kit (examples/internal) runs them under the emulator, as the wing's
// users do.
func TestNoProductTestKitImportsTheEmulationWing(t *testing.T) {
	for pkg, imps := range packageImports(t) {
		last := pkg[strings.LastIndex(pkg, "/")+1:]
		if strings.HasPrefix(pkg, "internal/dev/") || strings.HasPrefix(pkg, "examples/") || (!strings.HasSuffix(last, "test") && last != "testkit") {
			continue
		}
		for _, imp := range imps {
			if strings.HasPrefix(imp, "internal/dev/") {
				t.Errorf("the test kit %s imports the emulation wing's %s", pkg, imp)
			}
		}
	}
}

// The checks catch what they are there for.
func TestFloorsPlaceWhatTheyMust(t *testing.T) {
	for pkg, want := range map[string]string{
		"internal/email/digest": "use cases", "aws/dynamostore": "adapters",
		"engine/enginetest": "engine", "internal/marker": "bundle mechanisms", "internal/contract": "bundle mechanisms",
		"internal/dev/moto": "wiring", "client": "wiring", "functions/email": "wiring",
	} {
		if i := floorOf(pkg); i < 0 || floors[i].name != want {
			t.Errorf("floorOf(%s) = %d; want the %s floor", pkg, i, want)
		}
	}
	if floorOf("internal/newthing") >= 0 || floorOf("enginex") >= 0 {
		t.Error("an unplaced package got a floor")
	}
	mains := map[string][]string{"functions/newfn": {"internal/newthing"}}
	if i := floorIn("internal/newthing", mains); i < 0 || floors[i].name != "use cases" {
		t.Errorf("a package a function's main imports is on floor %d, not the use cases", i)
	}
	if floorIn("internal/otherthing", mains) >= 0 {
		t.Error("a package no function's main imports got a floor")
	}
	if up, down := floorOf("internal/contract"), floorOf("internal/email"); up <= down {
		t.Error("contract is not below email")
	}
}
