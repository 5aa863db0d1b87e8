package librarytest_test

import (
	"flag"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateAPI = flag.Bool("update-api", false, "rewrite the listings in api/ from the code")

// listings are the public modules' listings in api/, each with the
// packages whose exported surface it lists: the engine with its store and
// test kit, each AWS adapter, and the bundle's own public packages (the
// message contract and the producer's client).
var listings = []struct {
	file     string
	packages []string
}{
	{"engine.txt", []string{"github.com/runstwice/runstwice/engine", "github.com/runstwice/runstwice/engine/enginetest", "github.com/runstwice/runstwice/engine/idempotencykey", "github.com/runstwice/runstwice/engine/memstore"}},
	{"dynamostore.txt", []string{"github.com/runstwice/runstwice/aws/dynamostore"}},
	{"sqsqueue.txt", []string{"github.com/runstwice/runstwice/aws/sqsqueue"}},
	{"ssmswitch.txt", []string{"github.com/runstwice/runstwice/aws/ssmswitch"}},
	{"runstwice.txt", []string{"github.com/runstwice/runstwice/message", "github.com/runstwice/runstwice/client"}},
}

// TestAPIListing: the exported surface of each public module (every
// exported name with its type, and every method of every exported type,
// promoted or not, as go/types sees it) is exactly its listing in api/, so
// a change to a public API is always a visible decision in a diff. Run
// `go test ./internal/dev/librarytest -run TestAPIListing -update-api` to
// accept a change.
func TestAPIListing(t *testing.T) {
	for _, l := range listings {
		t.Run(l.file, func(t *testing.T) { checkListing(t, l.file, l.packages) })
	}
}

func checkListing(t *testing.T, file string, packages []string) {
	got := apiListing(t, packages)
	// The public packages own what they export: no exported name is an
	// alias of an internal type or takes or returns one, so an outside
	// module can call every method, and go doc shows every field.
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "/internal/") || strings.Contains(l, " = ") && strings.HasPrefix(strings.TrimSpace(l), "type ") {
			t.Errorf("the public API names an internal type or an alias: %s", l)
		}
	}
	path := filepath.Join(root, "api", file)
	if *updateAPI {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -update-api)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for _, l := range gl {
			if !slices.Contains(wl, l) {
				t.Errorf("in the code, not in api/%s: %s", file, l)
			}
		}
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				t.Errorf("in api/%s, not in the code: %s", file, l)
			}
		}
		t.Error("the public API changed: if on purpose, run go test ./internal/dev/librarytest -run TestAPIListing -args -update-api and say so in CHANGELOG.md")
	}
}

// objectString is obj as types.ObjectString writes it, except that a struct
// lists its exported fields only (as go doc does): a private field is no
// part of the API. An alias of a struct lists the fields too, so renaming
// a field behind an alias changes the listing as well.
func objectString(obj types.Object, q types.Qualifier) string {
	tn, named := obj.(*types.TypeName)
	st, ok := obj.Type().Underlying().(*types.Struct)
	if !named || !ok {
		return types.ObjectString(obj, q)
	}
	var fields []string
	hidden := false
	for i := range st.NumFields() {
		f := st.Field(i)
		if !f.Exported() {
			hidden = true
			continue
		}
		if f.Embedded() {
			fields = append(fields, types.TypeString(f.Type(), q))
		} else {
			fields = append(fields, f.Name()+" "+types.TypeString(f.Type(), q))
		}
	}
	if hidden {
		fields = append(fields, "// has unexported fields")
	}
	body := "struct{" + strings.Join(fields, "; ") + "}"
	if tn.IsAlias() {
		return types.ObjectString(obj, q) + " " + body
	}
	return "type " + obj.Name() + " " + body
}

// apiListing is the listing of packages, one line per name.
func apiListing(t *testing.T, packages []string) string {
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	var b strings.Builder
	for _, path := range packages {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		q := func(p *types.Package) string {
			if p == pkg {
				return ""
			}
			return p.Path()
		}
		var lines []string
		scope := pkg.Scope()
		for _, name := range scope.Names() {
			obj := scope.Lookup(name)
			if !obj.Exported() {
				continue
			}
			lines = append(lines, objectString(obj, q))
			tn, ok := obj.(*types.TypeName)
			if !ok {
				continue
			}
			for _, recv := range []types.Type{tn.Type(), types.NewPointer(tn.Type())} {
				ms := types.NewMethodSet(recv)
				for i := range ms.Len() {
					m := ms.At(i).Obj()
					if m.Exported() {
						lines = append(lines, fmt.Sprintf("method (%s) %s%s", types.TypeString(recv, q), m.Name(),
							strings.TrimPrefix(types.TypeString(m.Type(), q), "func")))
					}
				}
			}
		}
		slices.Sort(lines)
		lines = slices.Compact(lines)
		fmt.Fprintf(&b, "pkg %s\n", path)
		for _, l := range lines {
			fmt.Fprintf(&b, "\t%s\n", l)
		}
	}
	return b.String()
}
