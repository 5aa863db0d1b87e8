package docs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every ```go block of docs/ and the README compiles against the code as
// it is, so an
// example the API outgrew fails here and not in a reader's editor.
//
// A block is one of three kinds, told by what it holds:
//
//   - a whole file (it begins with its package clause): compiled as it
//     is, with the imports it writes;
//   - declarations (types, funcs, vars): wrapped in a package of their own,
//     with the imports they use (snippetImports names the packages the
//     docs use, by the name they are called by);
//   - statements: wrapped in a function, their variables used.
//
// A block may need what the page's prose declares, or belong to a package
// of the module. A marker on the line just before it says so, and stays
// out of the rendered page:
//
//	<!-- go-snippet in=internal/email -->
//	<!-- go-snippet
//	var ctx context.Context // given: the declarations the block uses
//	-->
//
// in=DIR adds the block to that package of the module (its unexported
// names in reach), as a file the compiler sees through -overlay; the
// blocks of one package compile together, in page order. Errors name the
// page and line of the block (//line directives).
func TestDocsGoBlocksCompile(t *testing.T) {
	r := root(t)
	docs, err := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(r, "README.md"))
	var blocks []goBlock
	for _, doc := range docs {
		rel, _ := filepath.Rel(r, doc)
		bs, err := readGoBlocks(filepath.ToSlash(rel), doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, bs...)
	}
	if len(blocks) < 10 {
		t.Fatalf("found %d ```go blocks in docs/; want the library's, the API's and the job types' at least", len(blocks))
	}
	vetSnippets(t, r, blocks)
	t.Logf("%d Go blocks of docs/ compile", len(blocks))
}

// fakePage names the page of TestGoBlockErrorsNameThePage (no page of
// docs/, which TestCitedDocsExist would look for).
const fakePage = "page-of-the-test.md"

// The test fails for a block that does not compile, naming its page and
// line, and for a marker that marks no block.
func TestGoBlockErrorsNameThePage(t *testing.T) {
	r := root(t)
	md := filepath.Join(t.TempDir(), "page.md")
	page := "# A page\n\nText.\n\n```go\nvar x = engine.NoSuchName\n```\n"
	if err := os.WriteFile(md, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	blocks, err := readGoBlocks(fakePage, md)
	if err != nil || len(blocks) != 1 || blocks[0].kind != kindDecls || blocks[0].line != 6 {
		t.Fatalf("blocks %+v, %v; want one block of declarations at line 6", blocks, err)
	}
	out, err := compileSnippets(r, blocks)
	if err == nil || !strings.Contains(out, fakePage+":6:") || !strings.Contains(out, "NoSuchName") {
		t.Fatalf("vet: %v\n%s\nwant an error at %s:6", err, out, fakePage)
	}
	if err := os.WriteFile(md, []byte("<!-- go-snippet -->\n\nText.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readGoBlocks(fakePage, md); err == nil {
		t.Fatal("a marker before no ```go block was accepted")
	}
}

// The kinds of block (see TestDocsGoBlocksCompile).
const (
	kindFile  = "file"
	kindDecls = "declarations"
	kindBody  = "statements"
)

// goBlock is one ```go block of a page.
type goBlock struct {
	root string // the repository's root
	doc  string // the page, a slash path from the root
	line int    // the page's line of the block's first line
	code string
	kind string
	// in is the module's package directory the block belongs to ("": one
	// of its own); given, the declarations its marker gives it, from the
	// page's line givenLine.
	in        string
	given     string
	givenLine int
}

// readGoBlocks reads a page's ```go blocks and their markers.
func readGoBlocks(doc, path string) ([]goBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks []goBlock
		marker *goBlock // the marker read just before, if any
		n      int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "<!-- go-snippet"):
			attrs, rest, closed := strings.Cut(strings.TrimPrefix(line, "<!-- go-snippet"), "-->")
			marker = &goBlock{givenLine: n + 1}
			for _, a := range strings.Fields(attrs) {
				dir, ok := strings.CutPrefix(a, "in=")
				if !ok {
					return nil, fmt.Errorf("%s:%d: go-snippet takes in=DIR and given declarations, not %q", doc, n, a)
				}
				marker.in = dir
			}
			var given strings.Builder
			for !closed && sc.Scan() {
				n++
				var text string
				text, rest, closed = strings.Cut(sc.Text(), "-->")
				given.WriteString(text + "\n")
			}
			if !closed || strings.TrimSpace(rest) != "" {
				return nil, fmt.Errorf("%s:%d: a go-snippet marker ends with --> alone on its line", doc, n)
			}
			marker.given = given.String()
			continue
		case strings.TrimSpace(line) == "```go":
			b := goBlock{doc: doc, line: n + 1}
			if marker != nil {
				b.in, b.given, b.givenLine = marker.in, marker.given, marker.givenLine
			}
			var code strings.Builder
			closed := false
			for sc.Scan() {
				n++
				if strings.TrimSpace(sc.Text()) == "```" {
					closed = true
					break
				}
				code.WriteString(sc.Text() + "\n")
			}
			if !closed {
				return nil, fmt.Errorf("%s:%d: the ```go block is never closed", doc, b.line-1)
			}
			b.code = code.String()
			b.kind = kindOf(b.code)
			blocks = append(blocks, b)
		case marker != nil:
			return nil, fmt.Errorf("%s:%d: a go-snippet marker is followed by this line, not by a ```go block", doc, n)
		}
		marker = nil
	}
	if marker != nil {
		return nil, fmt.Errorf("%s: a go-snippet marker ends the page", doc)
	}
	return blocks, sc.Err()
}

// kindOf tells a whole file from declarations and from statements.
func kindOf(code string) string {
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "", code, parser.PackageClauseOnly); err == nil {
		return kindFile
	}
	if _, err := parser.ParseFile(fset, "", "package p\n"+code, 0); err == nil {
		return kindDecls
	}
	return kindBody
}

// vetSnippets compiles the blocks and fails the test with the compiler's
// and vet's words.
func vetSnippets(t *testing.T, r string, blocks []goBlock) {
	t.Helper()
	if out, err := compileSnippets(r, blocks); err != nil {
		t.Fatalf("the Go blocks of docs/ do not compile (%v):\n%s", err, out)
	}
}

// compileSnippets writes each block as a Go file, a package of its own in a
// directory inside the module (removed afterwards) or a file added to its
// package through -overlay, and runs go vet on them all.
func compileSnippets(r string, blocks []goBlock) (string, error) {
	tmp, err := os.MkdirTemp(filepath.Join(r, "internal", "docs"), "snippets-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	overlay := map[string]string{}
	pkgs := []string{}
	for i, b := range blocks {
		b.root = r
		dir := filepath.Join(tmp, fmt.Sprintf("b%02d", i))
		pkg := "snippet"
		if b.in != "" {
			dir = filepath.Join(r, filepath.FromSlash(b.in))
			if pkg, err = packageName(dir); err != nil {
				return "", fmt.Errorf("%s:%d: in=%s: %w", b.doc, b.line, b.in, err)
			}
		}
		src, err := snippetSource(b, pkg)
		if err != nil {
			return "", err
		}
		name := filepath.Join(dir, fmt.Sprintf("zz_doc_snippet_%02d.go", i))
		if b.in != "" {
			written := filepath.Join(tmp, filepath.Base(name))
			if err := os.WriteFile(written, []byte(src), 0o644); err != nil {
				return "", err
			}
			overlay[name] = written
		} else {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(name, []byte(src), 0o644); err != nil {
				return "", err
			}
		}
		if rel, _ := filepath.Rel(r, dir); !slices.Contains(pkgs, "./"+filepath.ToSlash(rel)) {
			pkgs = append(pkgs, "./"+filepath.ToSlash(rel))
		}
	}
	o, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		return "", err
	}
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, o, 0o644); err != nil {
		return "", err
	}
	cmd := exec.Command("go", append([]string{"vet", "-overlay=" + overlayFile}, pkgs...)...)
	cmd.Dir = r
	out, err := cmd.CombinedOutput()
	// Errors name the page by its path from the root.
	return strings.ReplaceAll(string(out), r+string(filepath.Separator), ""), err
}

// packageName is the package clause of dir's Go files.
func packageName(dir string) (string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			return "", err
		}
		return parsed.Name.Name, nil
	}
	return "", fmt.Errorf("no Go package in %s", dir)
}

// snippetSource is the Go file of a block: a whole file as it is, else
// its package clause, the imports it uses, its given declarations and its
// code, statements wrapped in a function that uses their variables.
func snippetSource(b goBlock, pkg string) (string, error) {
	at := func(line int) string {
		return fmt.Sprintf("//line %s:%d\n", filepath.Join(b.root, filepath.FromSlash(b.doc)), line)
	}
	if b.kind == kindFile {
		if b.given != "" {
			return "", fmt.Errorf("%s:%d: a whole file gives itself its declarations: no given ones", b.doc, b.line)
		}
		return at(b.line) + b.code, nil
	}
	var body strings.Builder
	if b.given != "" {
		body.WriteString(at(b.givenLine) + b.given)
	}
	if b.kind == kindDecls {
		body.WriteString(at(b.line) + b.code)
	} else {
		body.WriteString("func _() {\n" + at(b.line) + b.code + "}\n")
	}
	src := "package " + pkg + "\n\n" + body.String()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, 0)
	if err != nil {
		return "", fmt.Errorf("%s:%d: does not parse as Go %s: %w", b.doc, b.line, b.kind, err)
	}
	var imports []string
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Obj == nil {
				if path, known := snippetImports[id.Name]; known && !slices.Contains(imports, id.Name+" "+path) {
					imports = append(imports, id.Name+" "+path)
				}
			}
		}
		return true
	})
	if b.kind == kindBody {
		// Statements declare variables a reader uses in the next block:
		// used here, so the compiler takes them.
		var uses strings.Builder
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Name.Name != "_" {
				continue
			}
			for _, st := range fn.Body.List {
				for _, name := range declared(st) {
					uses.WriteString("\t_ = " + name + "\n")
				}
			}
		}
		src = strings.TrimSuffix(src, "}\n") + uses.String() + "}\n"
	}
	slices.Sort(imports)
	var head strings.Builder
	head.WriteString("package " + pkg + "\n\nimport (\n")
	for _, imp := range imports {
		name, path, _ := strings.Cut(imp, " ")
		fmt.Fprintf(&head, "\t%s %q\n", name, path)
	}
	head.WriteString(")\n\n")
	return head.String() + strings.TrimPrefix(src, "package "+pkg+"\n\n"), nil
}

// declared names the variables a statement declares (:= and var).
func declared(st ast.Stmt) []string {
	var names []string
	switch s := st.(type) {
	case *ast.AssignStmt:
		if s.Tok == token.DEFINE {
			for _, l := range s.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
					names = append(names, id.Name)
				}
			}
		}
	case *ast.DeclStmt:
		if g, ok := s.Decl.(*ast.GenDecl); ok && g.Tok == token.VAR {
			for _, spec := range g.Specs {
				for _, id := range spec.(*ast.ValueSpec).Names {
					if id.Name != "_" {
						names = append(names, id.Name)
					}
				}
			}
		}
	}
	return names
}

// snippetImports are the packages a block of declarations or statements
// may use without writing its imports, by the name it calls them by.
var snippetImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "http": "net/http", "io": "io", "json": "encoding/json",
	"log": "log", "os": "os", "slog": "log/slog", "strings": "strings", "sync": "sync", "testing": "testing", "time": "time",
	"url": "net/url",

	"engine":         "github.com/runstwice/runstwice/engine",
	"memstore":       "github.com/runstwice/runstwice/engine/memstore",
	"idempotencykey": "github.com/runstwice/runstwice/engine/idempotencykey",
	"enginetest":     "github.com/runstwice/runstwice/engine/enginetest",
	"dynamostore":    "github.com/runstwice/runstwice/aws/dynamostore",
	"sqsqueue":       "github.com/runstwice/runstwice/aws/sqsqueue",
	"ssmswitch":      "github.com/runstwice/runstwice/aws/ssmswitch",
	"client":         "github.com/runstwice/runstwice/client",
	"contract":       "github.com/runstwice/runstwice/internal/contract",
	"message":        "github.com/runstwice/runstwice/message",
	"runner":         "github.com/runstwice/runstwice/internal/runner",
	"testkit":        "github.com/runstwice/runstwice/internal/testkit",

	"events":   "github.com/aws/aws-lambda-go/events",
	"lambda":   "github.com/aws/aws-lambda-go/lambda",
	"aws":      "github.com/aws/aws-sdk-go-v2/aws",
	"config":   "github.com/aws/aws-sdk-go-v2/config",
	"dynamodb": "github.com/aws/aws-sdk-go-v2/service/dynamodb",
	"types":    "github.com/aws/aws-sdk-go-v2/service/dynamodb/types",
	"sqs":      "github.com/aws/aws-sdk-go-v2/service/sqs",
	"ssm":      "github.com/aws/aws-sdk-go-v2/service/ssm",
	"sdktrace": "go.opentelemetry.io/otel/sdk/trace",
	"trace":    "go.opentelemetry.io/otel/trace",
}
