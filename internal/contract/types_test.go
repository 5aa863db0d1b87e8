package contract_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

// shippedRow is one row of docs/job-types.md's table of the shipped types.
type shippedRow struct {
	name, args, queue, onByDefault, key string
}

// shippedTable reads the table of docs/job-types.md's "The shipped types".
func shippedTable(t *testing.T) []shippedRow {
	t.Helper()
	b, err := os.ReadFile("../../docs/job-types.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## The shipped types")
	if !ok {
		t.Fatal("docs/job-types.md has no section The shipped types")
	}
	var rows []shippedRow
	row := regexp.MustCompile("^\\| `([^`]+)` \\| (.*) \\| (\\w+) \\| ([^|]+) \\| `([^`]+)`")
	for _, line := range strings.Split(section, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows = append(rows, shippedRow{m[1], m[2], m[3], strings.TrimSpace(m[4]), m[5]})
		}
	}
	return rows
}

// Every shipped type is in the docs' table, as it is declared (queue,
// switch default, args, natural key), and the table lists no other: a new
// type fails here until docs/job-types.md names it.
func TestShippedTypesAreTheDocumentedOnes(t *testing.T) {
	reg := contract.Registry()
	rows := shippedTable(t)
	var documented []string
	argName := regexp.MustCompile("`(\\w+)` \\(")
	for _, r := range rows {
		documented = append(documented, r.name)
		jt, err := reg.Lookup(r.name)
		if err != nil {
			t.Errorf("docs/job-types.md lists %s, which is not a shipped type", r.name)
			continue
		}
		if string(jt.Queue) != r.queue || jt.EnabledByDefault != (r.onByDefault == "on") {
			t.Errorf("%s: queue %s, on by default %v; the docs say %s, %q", r.name, jt.Queue, jt.EnabledByDefault, r.queue, r.onByDefault)
		}
		var declared, docArgs []string
		values := map[string]string{}
		for _, a := range jt.Args {
			declared = append(declared, a.Name)
			values[a.Name] = a.Format.Example()
		}
		for _, m := range argName.FindAllStringSubmatch(r.args, -1) {
			docArgs = append(docArgs, m[1])
		}
		if !slices.Equal(declared, docArgs) {
			t.Errorf("%s: args %v; the docs say %v", r.name, declared, docArgs)
		}
		want := r.key
		for name, v := range values {
			want = strings.ReplaceAll(want, "<"+name+">", v)
		}
		if got := jt.DeriveKey(values); got != want || !message.ValidKey(got) {
			t.Errorf("%s: natural key %q; the docs' %q gives %q", r.name, got, r.key, want)
		}
	}
	for _, name := range reg.Names() {
		if !slices.Contains(documented, name) {
			t.Errorf("%s is shipped but docs/job-types.md's table of the shipped types does not list it", name)
		}
	}
}

// The shipped types all run effect then claim, with a lease; a tick type
// skips while off and every other type parks.
func TestShippedTypesBias(t *testing.T) {
	for _, jt := range contract.Types() {
		wantOff := engine.Park
		if jt.TickArgs != nil {
			wantOff = engine.Skip
		}
		if jt.Bias != engine.EffectThenClaim || !jt.Lease || jt.WhileOff != wantOff {
			t.Errorf("%s = %+v; want effect-then-claim with a lease, %s while off", jt.Name, jt, wantOff)
		}
	}
}

// The registry of every zone holds the same types; only a tick's label
// differs.
func TestRegistryInAnyZoneHoldsTheSameTypes(t *testing.T) {
	utc := contract.Registry().Names()
	for _, zone := range []string{"Australia/Sydney", "America/Los_Angeles"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		if got := contract.RegistryIn(loc).Names(); !slices.Equal(got, utc) {
			t.Errorf("%s: %v; UTC: %v", zone, got, utc)
		}
	}
}
