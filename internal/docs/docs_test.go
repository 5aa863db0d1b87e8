// Package docs keeps the repository's documentation whole: it stands alone
// (nothing points to a file outside the repository), every relative link
// and every cited docs/ page exists, and the table of job types lists every
// registered type.
package docs

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/runstwice/runstwice/internal/contract"
)

// skipDirs are never read: version control, installed tools, build output
// and the local stack's state.
var skipDirs = []string{".git", ".venv", ".venv-checkov", "bin", ".aws-sam", ".devstack", "build"}

// outside are the references to documents outside the repository that no
// file may carry. They are split so that this file does not match itself.
var outside = []string{"DESIGN" + ".md", "DESIGN" + " §", ".." + "/shared"}

// root returns the repository root (the directory holding go.mod).
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// files returns every file of the repository (slash paths relative to the
// root), skipping skipDirs.
func files(t *testing.T, rootDir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(rootDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != rootDir && slices.Contains(skipDirs, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a worktree's .git file, a bin symlink
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(rootDir, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNothingPointsOutsideTheRepository(t *testing.T) {
	rootDir := root(t)
	all := files(t, rootDir)
	if !slices.Contains(all, "README.md") || !slices.Contains(all, "docs/README.md") {
		t.Fatalf("walked %d files from %s without README.md and docs/README.md", len(all), rootDir)
	}
	for _, f := range all {
		b, err := os.ReadFile(filepath.Join(rootDir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range outside {
			if i := bytes.Index(b, []byte(ref)); i >= 0 {
				line := 1 + bytes.Count(b[:i], []byte("\n"))
				t.Errorf("%s:%d mentions %q, a file outside the repository; cite the page under docs/ instead", f, line, ref)
			}
		}
	}
}

var (
	fence      = regexp.MustCompile("(?ms)^ {0,3}```.*?^ {0,3}```[^\n]*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	headingRe  = regexp.MustCompile(`(?m)^ {0,3}#{1,6}\s+(.+?)\s*#*\s*$`)
	docsCited  = regexp.MustCompile(`\bdocs/[A-Za-z0-9._/-]+\.md\b`)
	schemeRe   = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
)

// links returns the link targets of a Markdown text, outside code.
func links(md string) []string {
	md = fence.ReplaceAllString(md, "")
	md = inlineCode.ReplaceAllString(md, "")
	var out []string
	for _, re := range []*regexp.Regexp{inlineLink, refLink} {
		for _, m := range re.FindAllStringSubmatch(md, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// anchors returns the heading anchors GitHub makes for a Markdown text:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func anchors(md string) map[string]bool {
	md = fence.ReplaceAllString(md, "")
	out := map[string]bool{}
	for _, m := range headingRe.FindAllStringSubmatch(md, -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteByte('-')
			}
		}
		a := b.String()
		for n, base := 1, a; out[a]; n++ {
			a = base + "-" + strconv.Itoa(n)
		}
		out[a] = true
	}
	return out
}

func TestDocsLinksResolve(t *testing.T) {
	rootDir := root(t)
	var pages []string
	for _, f := range files(t, rootDir) {
		if f == "README.md" || (strings.HasPrefix(f, "docs/") && strings.HasSuffix(f, ".md")) {
			pages = append(pages, f)
		}
	}
	read := func(f string) (string, bool) {
		b, err := os.ReadFile(filepath.Join(rootDir, filepath.FromSlash(f)))
		return string(b), err == nil
	}
	checked := 0
	for _, page := range pages {
		text, _ := read(page)
		for _, target := range links(text) {
			if schemeRe.MatchString(target) {
				continue // a URL elsewhere
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = path.Clean(path.Join(path.Dir(page), file))
			}
			checked++
			if strings.HasPrefix(dest, "../") {
				t.Errorf("%s links %q, outside the repository", page, target)
				continue
			}
			info, err := os.Stat(filepath.Join(rootDir, filepath.FromSlash(dest)))
			if err != nil {
				t.Errorf("%s links %q: %s does not exist", page, target, dest)
				continue
			}
			if frag == "" || info.IsDir() || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if destText, _ := read(dest); !anchors(destText)[frag] {
				t.Errorf("%s links %q: %s has no heading with anchor #%s", page, target, dest, frag)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no relative link to check")
	}
}

// TestCitedDocsExist: a docs/ page that code, the template or a page cites
// exists.
func TestCitedDocsExist(t *testing.T) {
	rootDir := root(t)
	for _, f := range files(t, rootDir) {
		switch path.Ext(f) {
		case ".go", ".yaml", ".md", ".toml":
		default:
			continue
		}
		b, err := os.ReadFile(filepath.Join(rootDir, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for _, cited := range docsCited.FindAllString(string(b), -1) {
			if _, err := os.Stat(filepath.Join(rootDir, filepath.FromSlash(cited))); err != nil {
				t.Errorf("%s cites %s, which does not exist", f, cited)
			}
		}
	}
}

// TestJobTypesTableListsEveryType: docs/job-types.md has a row for every
// registered type, with its queue and its switch default.
func TestJobTypesTableListsEveryType(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "job-types.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if name, ok := strings.CutPrefix(line, "| `"); ok {
			name, _, _ = strings.Cut(name, "`")
			rows[name] = line
		}
	}
	for _, jt := range contract.Types() {
		row, ok := rows[jt.Name]
		if !ok {
			t.Errorf("docs/job-types.md has no row for %s", jt.Name)
			continue
		}
		def := "| on |"
		if !jt.EnabledByDefault {
			def = "| **off: fail-closed** |"
		}
		if !strings.Contains(row, "| "+string(jt.Queue)+" |") || !strings.Contains(row, def) ||
			!strings.Contains(row, "`"+jt.KeyPrefix+":") {
			t.Errorf("docs/job-types.md's row for %s does not say queue %s, default %q and key prefix %s: %s",
				jt.Name, jt.Queue, def, jt.KeyPrefix, row)
		}
	}
}
