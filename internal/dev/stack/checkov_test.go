package stack

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// checkovSkipProblems returns what is wrong with the checkov skips in the
// resources' Metadata: each names a check (CKV_…) once per resource and
// gives a one-line reason a reviewer can read.
func checkovSkipProblems(tm *Template) []string {
	id := regexp.MustCompile(`^CKV2?_AWS_[0-9]+$`)
	var problems []string
	for _, name := range SortedIDs(tm.Resources) {
		seen := map[string]bool{}
		for i, s := range list(asMap(tm.Resources[name].Metadata["checkov"])["skip"]) {
			skip := asMap(s)
			check, comment := str(skip["id"]), str(skip["comment"])
			switch {
			case !id.MatchString(check):
				problems = append(problems, fmt.Sprintf("%s: skip %d names no check: %q", name, i, check))
			case seen[check]:
				problems = append(problems, name+": "+check+" skipped twice")
			case len(strings.Fields(comment)) < 5 || strings.Contains(comment, "\n"):
				problems = append(problems, name+": "+check+" skipped without a one-line reason")
			}
			seen[check] = true
		}
	}
	return problems
}

// TestCheckovSkipsGiveReasons: `make template-check` runs checkov, and every
// check the template does not meet is skipped in the resource's Metadata
// with its reason; the local stack reads that Metadata and ignores it.
func TestCheckovSkipsGiveReasons(t *testing.T) {
	tm := RepoTemplate(t)
	skips := 0
	for _, r := range tm.Resources {
		skips += len(list(asMap(r.Metadata["checkov"])["skip"]))
	}
	if skips == 0 {
		t.Fatal("no checkov skip in template.yaml's Metadata: read the wrong template?")
	}
	for _, p := range checkovSkipProblems(tm) {
		t.Error(p)
	}
	if _, err := New(tm, Options{}); err != nil {
		t.Fatalf("the stack refuses the template with its Metadata: %v", err)
	}
}

// TestCheckovSkipProblemsCatchMistakes: the check above finds a skip
// without a reason, one without a check id, and one given twice.
func TestCheckovSkipProblemsCatchMistakes(t *testing.T) {
	for _, tc := range []struct {
		name string
		skip []any
		want string
	}{
		{"no reason", []any{map[string]any{"id": "CKV_AWS_27"}}, "without a one-line reason"},
		{"no id", []any{map[string]any{"comment": "SQS-managed keys encrypt it at rest."}}, "names no check"},
		{"twice", []any{
			map[string]any{"id": "CKV_AWS_27", "comment": "SQS-managed keys encrypt it at rest."},
			map[string]any{"id": "CKV_AWS_27", "comment": "SQS-managed keys encrypt it at rest."},
		}, "skipped twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm := &Template{Resources: map[string]Resource{"Q": {Type: TypeQueue, Metadata: map[string]any{"checkov": map[string]any{"skip": tc.skip}}}}}
			got := strings.Join(checkovSkipProblems(tm), "; ")
			if !strings.Contains(got, tc.want) {
				t.Fatalf("problems %q; want %q", got, tc.want)
			}
		})
	}
}
