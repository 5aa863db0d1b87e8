package stack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The shipped template is inside the local stack's scope; a resource of a
// type the stack neither emulates nor knowingly leaves out is refused,
// named with its type, and the refusal lists the scope.
func TestScopeRefusesAnUnlistedType(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	if err := CheckScope(tmpl); err != nil {
		t.Fatalf("the shipped template: %v", err)
	}
	tmpl.Resources["Workflow"] = Resource{Type: "AWS::StepFunctions::StateMachine"}
	err := CheckScope(tmpl)
	var se *ScopeError
	if !errors.As(err, &se) || se.Resources["Workflow"] != "AWS::StepFunctions::StateMachine" {
		t.Fatalf("CheckScope = %v; want a ScopeError naming Workflow", err)
	}
	if _, perr := Provision(context.Background(), Clients{}, tmpl, Options{}); !errors.As(perr, &se) {
		t.Fatalf("Provision = %v; want it to refuse the template before it touches an endpoint", perr)
	}
	for _, want := range []string{"Workflow (AWS::StepFunctions::StateMachine)", TypeQueue, "AWS::CloudWatch::Alarm", "docs/local.md"} {
		if !regexp.MustCompile(regexp.QuoteMeta(want)).MatchString(err.Error()) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
}

// docs/local.md lists exactly the types the code emulates and leaves out.
func TestScopeIsTheDocsList(t *testing.T) {
	_, root := loadTemplate(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "local.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(AWS::[A-Za-z0-9:]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		listed[m[1]] = true
	}
	for _, m := range []map[string]string{Emulated, NotEmulated} {
		for typ := range m {
			if !listed[typ] {
				t.Errorf("docs/local.md does not list %s", typ)
			}
			delete(listed, typ)
		}
	}
	for typ := range listed {
		t.Errorf("docs/local.md lists %s, which the code neither emulates nor leaves out", typ)
	}
}
