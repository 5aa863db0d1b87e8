package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every page renders as written (CommonMark): each code block closes with a
// fence that has nothing after its backticks. A closing fence followed by
// text is no fence to CommonMark, which then shows the rest of the page as
// code (docs/library.md's "The compatibility promise" was a code block so).
func TestDocsFencesAreWellFormed(t *testing.T) {
	r := root(t)
	pages, err := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range append(pages, filepath.Join(r, "README.md")) {
		rel, _ := filepath.Rel(r, page)
		for _, problem := range fenceProblems(t, page) {
			t.Errorf("%s:%s", filepath.ToSlash(rel), problem)
		}
	}
}

// fenceProblems lists a page's malformed fences, each as "line: what".
func fenceProblems(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var problems []string
	open, openedAt, n := "", 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := strings.TrimLeft(sc.Text(), " ")
		if len(sc.Text())-len(line) > 3 {
			continue // indented code, not a fence
		}
		fence := line[:len(line)-len(strings.TrimLeft(line, "`"))]
		switch {
		case len(fence) < 3:
		case open == "":
			open, openedAt = fence, n
		case len(fence) >= len(open) && strings.TrimSpace(line[len(fence):]) == "":
			open = ""
		case len(fence) == len(open):
			problems = append(problems, fmt.Sprintf("%d: text after a closing fence: CommonMark reads the line as code and the block "+
				"opened at line %d goes on; put the text on a line of its own", n, openedAt))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if open != "" {
		problems = append(problems, fmt.Sprintf("%d: a code block that never closes", openedAt))
	}
	return problems
}
