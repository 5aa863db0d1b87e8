//go:build integration

package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// localEndpoint is where the local stack's moto listens (cmd/devstack's
// --moto-port default), which events/env.json's queue URLs name.
const localEndpoint = "http://127.0.0.1:5000"

// events/env.json holds the local stack's values: every variable the
// template derives from a resource (a table's name, a queue's URL or ARN, a
// role's ARN, a schedule group) is what the local stack resolves it to. A
// variable the template sets from a parameter, or to a literal, is a
// setting the file may tune for local runs (LOG_LEVEL, TOGGLE_TTL,
// PARK_DELAY, APP_BASE_URL…).
func TestEnvFileHasTheLocalStacksValues(t *testing.T) {
	srv := testenv.Moto(t)
	file, tmpl := readEnvFile(t)
	ctx := context.Background()
	st, err := stack.Provision(ctx, stack.NewClients(srv.Config()), tmpl, stack.Options{StackName: testenv.Name(t, "envfile"),
		Params: map[string]string{"Stage": devstack.Stage, "SesMaxSendRate": strconv.Itoa(devstack.LocalSesMaxSendRate)}})
	if err != nil {
		t.Fatal(err)
	}
	local := strings.NewReplacer(srv.Endpoint, localEndpoint, st.StackName()+"-", stack.DefaultStackName+"-")
	for _, id := range tmpl.IDs(stack.TypeFunction) {
		props, err := tmpl.FunctionProperties(id)
		if err != nil {
			t.Fatal(err)
		}
		env, err := st.FunctionEnv(id)
		if err != nil {
			t.Fatal(err)
		}
		vars := file.vars(t, id)
		for name, raw := range stack.EnvironmentVariables(props) {
			if isSetting(tmpl, raw) {
				continue
			}
			got, ok := vars[name]
			if !ok {
				continue // TestEnvFileNamesEveryTemplateVariable says so
			}
			if want := local.Replace(env[name]); got != want {
				t.Errorf("events/env.json: %s %s = %q; the local stack's is %q", id, name, got, want)
			}
		}
	}
}

// isSetting reports whether a template value is a literal or a reference to
// a template parameter, rather than derived from a resource.
func isSetting(tmpl *stack.Template, v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return true
	}
	ref, ok := m["Ref"].(string)
	if !ok || len(m) != 1 {
		return false
	}
	_, isParam := tmpl.Parameters[ref]
	return isParam
}
