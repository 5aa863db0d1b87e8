package docs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// walkThrough are the pages of the README's walk-through, in the order a
// reader follows them: the README's first job, then the tour that goes on
// from it. Their commands run as one walk-through (TestREADMECommands).
var walkThrough = []string{"README.md", "docs/tour.md"}

// maxREADMELines is as long as the README may grow: what runstwice is, the
// two commands, the first job, the library, deploy and where to read on,
// which a newcomer reads in five minutes. The tour of every feature is
// docs/tour.md.
const maxREADMELines = 250

// The README stays a page a newcomer reads in five minutes.
func TestREADMEIsShort(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > maxREADMELines {
		t.Errorf("README.md has %d lines; want at most %d: move the detail to docs/tour.md or the page it belongs to", n, maxREADMELines)
	}
}

// walkSteps returns the steps of the walk-through's pages, in order, each
// section named with its page ("docs/tour.md (Flip a kill switch)"), and
// how many steps each page has.
func walkSteps(t *testing.T) ([]step, map[string]int) {
	t.Helper()
	var steps []step
	per := map[string]int{}
	for _, page := range walkThrough {
		b, err := os.ReadFile(filepath.Join(root(t), filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range readmeSteps(string(b)) {
			st.section = page + " (" + st.section + ")"
			steps = append(steps, st)
			per[page]++
		}
	}
	return steps, per
}

// walkText is the walk-through's pages, one after the other.
func walkText(t *testing.T) string {
	t.Helper()
	var all strings.Builder
	for _, page := range walkThrough {
		b, err := os.ReadFile(filepath.Join(root(t), filepath.FromSlash(page)))
		if err != nil {
			t.Fatal(err)
		}
		all.Write(b)
		all.WriteString("\n")
	}
	return all.String()
}

// A step of the walk-through: the commands of one ```sh block, and the
// output block shown right after it, if any (lang "" when none).
type step struct {
	section string   // the ## heading it is under (with its page, from walkSteps)
	cmds    []string // one command per entry, continuation lines joined
	lang    string   // http, json or text: the output block's language
	output  string   // the output block's text
}

// A mail or outcome line of `make run`: it starts with the time.
var stackLine = regexp.MustCompile(`^\d\d:\d\d:\d\d  `)

// outputLangs are the languages of the blocks that show a command's output.
var outputLangs = []string{"http", "json", "text"}

var blockStart = regexp.MustCompile("^```([a-z]*)\\s*$")

// readmeSteps returns a page's ```sh blocks in order, each with the
// output block that follows it (with nothing but blank lines between),
// and, as steps with no commands, the text blocks of `make run` lines
// (mail and outcome lines), which the stack prints.
func readmeSteps(md string) []step {
	type block struct {
		section, lang, text string
		afterProse          bool // prose stands between it and the block before
	}
	var blocks []block
	section, prose := "", false
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		line := sc.Text()
		if h, ok := strings.CutPrefix(line, "## "); ok {
			section, prose = h, true
			continue
		}
		m := blockStart.FindStringSubmatch(line)
		if m == nil {
			if strings.TrimSpace(line) != "" {
				prose = true
			}
			continue
		}
		var text strings.Builder
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "```") {
			text.WriteString(sc.Text() + "\n")
		}
		blocks = append(blocks, block{section: section, lang: m[1], text: text.String(), afterProse: prose})
		prose = false
	}
	var steps []step
	for i, b := range blocks {
		switch {
		case b.lang == "sh":
			s := step{section: b.section, cmds: commands(b.text)}
			if i+1 < len(blocks) && !blocks[i+1].afterProse && slices.Contains(outputLangs, blocks[i+1].lang) {
				s.lang, s.output = blocks[i+1].lang, blocks[i+1].text
			}
			steps = append(steps, s)
		case b.lang == "text" && b.afterProse && stackLine.MatchString(b.text):
			steps = append(steps, step{section: b.section, lang: b.lang, output: b.text})
		}
	}
	return steps
}

// commands splits a shell block into commands: a trailing backslash joins
// the next line, a # starts a comment.
func commands(block string) []string {
	var out []string
	cur := ""
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur += cont + " "
			continue
		}
		cur += line
		if w := words(cur); len(w) > 0 {
			out = append(out, cur)
		}
		cur = ""
	}
	return out
}

// words splits a command line as a POSIX shell would for the README's
// commands: single and double quotes, backslash escapes outside single
// quotes, a # that starts a word ending the line.
func words(line string) []string {
	var out []string
	var w strings.Builder
	in, quote, escaped := false, rune(0), false
	for _, r := range line {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped, in = false, true
		case quote != 0 && r == quote:
			quote = 0
		case quote == '\'':
			w.WriteRune(r)
		case r == '\\':
			escaped, in = true, true
		case quote == '"':
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, w.String())
				w.Reset()
				in = false
			}
		case r == '#' && !in:
			return out
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, w.String())
	}
	return out
}

// variable are the parts of an output that differ from run to run: ids,
// times, numbers. shape replaces each with a placeholder.
var variable = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`), "<time>"},
	{regexp.MustCompile(`\b\d\d:\d\d:\d\d\b`), "<time>"},
	{regexp.MustCompile(`\d+`), "<n>"},
	{regexp.MustCompile(`\s+`), " "},
}

// shapeOf is a line with its variable parts replaced and its spacing
// collapsed (column widths follow the values).
func shapeOf(line string) string {
	for _, v := range variable {
		line = v.re.ReplaceAllString(line, v.with)
	}
	return strings.TrimSpace(line)
}

// linePattern matches the lines of the shape of a shown line, in which
// "…" stands for whatever the README left out.
func linePattern(shown string) *regexp.Regexp {
	parts := strings.Split(shapeOf(shown), "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

func nonBlank(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// sameTextShape: as many lines, and each shown line has the shape of its
// own line of got (in any order: rows of equal times may come either way).
func sameTextShape(shown, got string) error {
	want, have := nonBlank(shown), nonBlank(got)
	if len(want) != len(have) {
		return fmt.Errorf("%d lines; the README shows %d", len(have), len(want))
	}
	used := make([]bool, len(have))
next:
	for _, w := range want {
		re := linePattern(w)
		for i, h := range have {
			if !used[i] && re.MatchString(shapeOf(h)) {
				used[i] = true
				continue next
			}
		}
		return fmt.Errorf("no line has the shape of %q (%s)", w, re)
	}
	return nil
}

// jsonKeys returns the top-level keys of a JSON object.
func jsonKeys(text string) ([]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &obj); err != nil {
		return nil, err
	}
	return slices.Sorted(maps.Keys(obj)), nil
}

// sameJSONShape: the same top-level keys.
func sameJSONShape(shown, got string) error {
	want, err := jsonKeys(shown)
	if err != nil {
		return fmt.Errorf("the README's JSON does not parse: %w", err)
	}
	have, err := jsonKeys(got)
	if err != nil {
		return fmt.Errorf("not a JSON object (%w): %s", err, got)
	}
	if !slices.Equal(want, have) {
		return fmt.Errorf("keys %v; the README shows %v", have, want)
	}
	return nil
}

// sameHTTPShape: the same status line, every header shown present, and a
// body of the same JSON shape.
func sameHTTPShape(shown string, status string, header http.Header, body string) error {
	head, shownBody, _ := strings.Cut(strings.ReplaceAll(shown, "\r\n", "\n"), "\n\n")
	lines := strings.Split(head, "\n")
	if lines[0] != status {
		return fmt.Errorf("status %q; the README shows %q", status, lines[0])
	}
	for _, h := range lines[1:] {
		name, _, _ := strings.Cut(h, ":")
		if header.Get(name) == "" {
			return fmt.Errorf("no %s header; the README shows %q", name, h)
		}
	}
	return sameJSONShape(shownBody, body)
}

func TestShapes(t *testing.T) {
	okHeader := http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/jobs/x"}}
	for _, tc := range []struct {
		name  string
		check func() error
		ok    bool
	}{
		{"a table with other ids, times and widths", func() error {
			return sameTextShape("ID                                    TYPE   LAST SEEN\n10a14d74-04f3-58c3-b1dd-6cedfeb42e34  email  2026-12-01T15:08:59Z\n",
				"ID  TYPE   LAST SEEN\n63439fba-4b53-5296-ad14-b44825badabc  email  2027-01-02T03:04:05Z\n")
		}, true},
		{"rows in another order", func() error {
			return sameTextShape("a 1\nb 2\n", "b 7\na 9\n")
		}, true},
		{"an elided part", func() error {
			return sameTextShape(`x {"enabled":true,…  off`, `x {"enabled":true,"until":"2026"}  off`)
		}, true},
		{"a line more", func() error { return sameTextShape("a\n", "a\nb\n") }, false},
		{"another column", func() error { return sameTextShape("ID TYPE STATUS\n", "ID TYPE\n") }, false},
		{"another word", func() error {
			return sameTextShape("redrive: 1 letter: redriven 1\n", "redrive: 1 letter(s): redriven 1\n")
		}, false},
		{"JSON with the same keys", func() error { return sameJSONShape(`{"a":"…","b":1}`, `{"b":2,"a":"x"}`) }, true},
		{"JSON with a key more", func() error { return sameJSONShape(`{"a":"…"}`, `{"a":"x","b":2}`) }, false},
		{"JSON with a key less", func() error { return sameJSONShape(`{"a":"…","b":1}`, `{"a":"x"}`) }, false},
		{"HTTP as shown", func() error {
			return sameHTTPShape("HTTP/1.1 202 Accepted\nContent-Type: application/json\nLocation: /v1/jobs/f\n\n{\"jobId\":\"f\"}\n", "HTTP/1.1 202 Accepted", okHeader, `{"jobId":"g"}`)
		}, true},
		{"HTTP with another status", func() error {
			return sameHTTPShape("HTTP/1.1 202 Accepted\n\n{}", "HTTP/1.1 200 OK", okHeader, `{}`)
		}, false},
		{"HTTP without a header shown", func() error {
			return sameHTTPShape("HTTP/1.1 202 Accepted\nIdempotent-Replayed: true\n\n{}", "HTTP/1.1 202 Accepted", okHeader, `{}`)
		}, false},
	} {
		if err := tc.check(); (err == nil) != tc.ok {
			t.Errorf("%s: %v; want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestWordsAndCommands(t *testing.T) {
	got := commands("curl -i -X POST http://h/v1 \\\n  -H 'Content-Type: application/json' -d '{\"a\":\"b c\"}'\ngo run ./cmd/jobctl dlq list   # a comment\n\n")
	want := [][]string{{"curl", "-i", "-X", "POST", "http://h/v1", "-H", "Content-Type: application/json", "-d", `{"a":"b c"}`},
		{"go", "run", "./cmd/jobctl", "dlq", "list"}}
	if len(got) != len(want) {
		t.Fatalf("commands = %q", got)
	}
	for i := range want {
		if w := words(got[i]); !slices.Equal(w, want[i]) {
			t.Errorf("words(%q) = %q; want %q", got[i], w, want[i])
		}
	}
	if w := words(`grep '"run started"' .devstack/functions.log`); !slices.Equal(w, []string{"grep", `"run started"`, ".devstack/functions.log"}) {
		t.Errorf("words = %q", w)
	}
}
