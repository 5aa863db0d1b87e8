//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/testkit"
)

// `make invoke` against a running stack: its function's mail passes the
// stack's proxy (so the stack's mail log, its output and its view show it)
// and its lines land in the stack's functions.log, as the stack's own
// functions' do. The stack here is its two parts that matter: its AWS proxy
// with its mailbox, and its API server taking function output, named in
// stack.json as `make run` writes it.
func TestInvokeBesideARunningStack(t *testing.T) {
	srv := testenv.Moto(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	var mailbox devstack.Mailbox
	proxy, err := awsproxy.Start(srv.Endpoint, mailbox.Hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	functionsLog := &testkit.Buffer{}
	mux := http.NewServeMux()
	mux.Handle("POST "+devstack.FunctionOutputPath, devstack.FunctionOutput(lambdarie.Sinks{App: functionsLog}, []string{"enqueue", "email", "dlq", "outbox", "webhook"}))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	stateDir := t.TempDir()
	info, _ := json.Marshal(localapi.StackInfo{Endpoint: srv.Endpoint, APIURL: api.URL, FunctionEndpoint: proxy.URL,
		Stage: devstack.Stage, Region: testenv.Region, PID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(stateDir, localapi.StackFile), info, 0o644); err != nil {
		t.Fatal(err)
	}

	// The stack's resources, its demo users and its verified sender.
	ctx := context.Background()
	name := testenv.Name(t, "beside")
	tmpl, err := stack.Load("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Provision(ctx, stack.NewClients(srv.Config()), tmpl, stack.Options{StackName: name})
	if err != nil {
		t.Fatal(err)
	}
	users, _ := st.Physical("UsersTable")
	if err := devstack.SeedUsers(ctx, dynamodb.NewFromConfig(srv.Config()), users.Name, devstack.DemoUsers); err != nil {
		t.Fatal(err)
	}
	if err := devstack.VerifySender(ctx, sesv2.NewFromConfig(srv.Config()), st.Param("MailFrom")); err != nil {
		t.Fatal(err)
	}

	var out, errs bytes.Buffer
	if err := run(ctx, []string{"-fn", "email", "-event", "events/email-welcome.json", "-env-file", "", "-stack-name", name, "-state-dir", stateDir}, &out, &errs); err != nil {
		t.Fatalf("invoke: %v\n%s", err, errs.String())
	}
	const jobID = "11111111-1111-4111-8111-000000000003" // events/email-welcome.json
	var mailed bool
	for _, m := range mailbox.Recent(10) {
		mailed = mailed || m.JobID == jobID
	}
	if !mailed {
		t.Errorf("the stack's mailbox lacks the mail of %s: %+v", jobID, mailbox.Recent(10))
	}
	var outcome bool
	for _, l := range strings.Split(functionsLog.String(), "\n") {
		outcome = outcome || (strings.Contains(l, `"msg":"job outcome"`) && strings.Contains(l, jobID) && strings.Contains(l, `"function":"email"`))
	}
	if !outcome {
		t.Errorf("the stack's functions.log lacks the invocation's outcome line of %s:\n%s", jobID, functionsLog)
	}
	if !strings.Contains(errs.String(), "functions.log") {
		t.Errorf("invoke does not say where its lines go:\n%s", errs.String())
	}
}
