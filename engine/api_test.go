package engine_test

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

var updateAPI = flag.Bool("update-api", false, "rewrite api/engine.txt from the code")

// publicPackages are the packages whose exported surface api/engine.txt
// lists: the engine, its stores, its test kit and its AWS adapters.
var publicPackages = []string{
	"github.com/runstwice/runstwice/engine",
	"github.com/runstwice/runstwice/engine/enginetest",
	"github.com/runstwice/runstwice/engine/memstore",
	"github.com/runstwice/runstwice/aws/dynamostore",
	"github.com/runstwice/runstwice/aws/sqsqueue",
	"github.com/runstwice/runstwice/aws/ssmswitch",
}

// TestAPIListing: the exported surface of the public packages (every
// exported name with its type, and every method of every exported type,
// promoted or not, as go/types sees it) is exactly api/engine.txt, so a
// change to the public API is always a visible decision in a diff. Run
// `go test ./engine -run TestAPIListing -update-api` to accept a change.
func TestAPIListing(t *testing.T) {
	got := apiListing(t)
	// The public packages own what they export: no exported name is an
	// alias of an internal type or takes or returns one, so an outside
	// module can call every method, and go doc shows every field.
	for _, l := range strings.Split(got, "\n") {
		if strings.Contains(l, "/internal/") || strings.Contains(l, " = ") && strings.HasPrefix(strings.TrimSpace(l), "type ") {
			t.Errorf("the public API names an internal type or an alias: %s", l)
		}
	}
	path := filepath.Join("..", "api", "engine.txt")
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
				t.Errorf("in the code, not in api/engine.txt: %s", l)
			}
		}
		for _, l := range wl {
			if !slices.Contains(gl, l) {
				t.Errorf("in api/engine.txt, not in the code: %s", l)
			}
		}
		t.Error("the public API changed: if on purpose, run go test ./engine -run TestAPIListing -update-api and say so in docs/library.md")
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

// apiListing is the listing of publicPackages, one line per name.
func apiListing(t *testing.T) string {
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "source", nil)
	var b strings.Builder
	for _, path := range publicPackages {
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
