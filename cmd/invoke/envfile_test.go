package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// envFileParameters is the block of an env file that applies to every
// function (sam local invoke's, and lambdarie.EnvFile's).
const envFileParameters = "Parameters"

// envFile is events/env.json: its path and its blocks, by name.
type envFile struct {
	path   string
	blocks map[string]map[string]any
}

// vars is what `make invoke` lays over function id's environment, read as
// it reads it (lambdarie.EnvFile: the Parameters block, then the
// function's own).
func (f envFile) vars(t *testing.T, id string) map[string]string {
	t.Helper()
	vars, err := lambdarie.EnvFile(f.path, id)
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// readEnvFile reads events/env.json and template.yaml.
func readEnvFile(t *testing.T) (envFile, *stack.Template) {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	f := envFile{path: filepath.Join(root, "events", "env.json")}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &f.blocks); err != nil {
		t.Fatalf("events/env.json: %v", err)
	}
	tmpl := stack.RepoTemplate(t)
	return f, tmpl
}

// mayBeAbsent reports whether a template value is set only under a
// condition (!If [cond, value, !Ref AWS::NoValue]): the function then runs
// without the variable, as the local stack does.
func mayBeAbsent(v any) bool {
	m, _ := v.(map[string]any)
	branches, _ := m["Fn::If"].([]any)
	for _, b := range branches {
		if bm, _ := b.(map[string]any); bm["Ref"] == "AWS::NoValue" {
			return true
		}
	}
	return false
}

// events/env.json is what `make invoke` and `sam local invoke --env-vars`
// lay over the template's environment, so its block for a function names
// every variable template.yaml gives that function (Globals included; the
// Parameters block counts for every function), each with a value: a
// variable it lacks runs on the template's unresolved value under sam, and
// a function that requires it does not start. Every block is named after a
// function of the template (or is Parameters): a block under another name
// is silently ignored.
func TestEnvFileNamesEveryTemplateVariable(t *testing.T) {
	file, tmpl := readEnvFile(t)
	functions := tmpl.IDs(stack.TypeFunction)
	if len(functions) == 0 {
		t.Fatal("template.yaml has no functions")
	}
	for _, id := range functions {
		props, err := tmpl.FunctionProperties(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := file.blocks[id]; !ok {
			t.Errorf("events/env.json has no %s block (template.yaml's %s, CodeUri %v)", id, id, props["CodeUri"])
			continue
		}
		vars := file.vars(t, id)
		var missing []string
		env := stack.EnvironmentVariables(props)
		for _, name := range stack.SortedIDs(env) {
			if strings.TrimSpace(vars[name]) == "" && !mayBeAbsent(env[name]) {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			t.Errorf("events/env.json's %s block lacks %s, which template.yaml gives the function: add the local stack's values", id, strings.Join(missing, ", "))
		}
	}
	for name := range file.blocks {
		if name != envFileParameters && !slices.Contains(functions, name) {
			t.Errorf("events/env.json has a block %s, which is no function of template.yaml (%s): it is ignored", name, strings.Join(functions, ", "))
		}
	}
}

// A mail that `make invoke` sends links where the local stack's mails do:
// events/env.json's APP_BASE_URL is the AppBaseUrl the stack runs with
// (the template's default), never the API's address.
func TestEnvFileLinksWhereTheStacksMailsDo(t *testing.T) {
	file, tmpl := readEnvFile(t)
	want := tmpl.Parameters["AppBaseUrl"].Default
	if want == "" {
		t.Fatal("template.yaml's AppBaseUrl has no default")
	}
	for _, id := range tmpl.IDs(stack.TypeFunction) {
		if got, ok := file.vars(t, id)["APP_BASE_URL"]; ok && got != want {
			t.Errorf("events/env.json: %s APP_BASE_URL = %q; the local stack's mails link to %q", id, got, want)
		}
	}
}
