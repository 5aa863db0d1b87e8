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

// besideStack is a running local stack as `make invoke` meets it: its two
// parts that matter, its AWS proxy with its mailbox and its API server
// taking function output, and its webhook receiver, named in stack.json
// as `make run` writes it; its resources provisioned under name, with the
// demo users and a verified sender.
type besideStack struct {
	stateDir, name string
	mailbox        *devstack.Mailbox
	functionsLog   *testkit.Buffer
	receiver       *devstack.Receiver
}

func startBesideStack(t *testing.T) besideStack {
	srv := testenv.Moto(t)
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	b := besideStack{stateDir: t.TempDir(), name: testenv.Name(t, "beside"), mailbox: &devstack.Mailbox{}, functionsLog: &testkit.Buffer{}}
	proxy, err := awsproxy.Start(srv.Endpoint, b.mailbox.Hook)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	mux := http.NewServeMux()
	mux.Handle("POST "+devstack.FunctionOutputPath, devstack.FunctionOutput(lambdarie.Sinks{App: b.functionsLog}, []string{"enqueue", "email", "dlq", "outbox", "webhook"}))
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	// The receiver on a port of its own: never the env file's 3001.
	if b.receiver, err = devstack.StartReceiver("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.receiver.Close)
	info, _ := json.Marshal(localapi.StackInfo{Endpoint: srv.Endpoint, APIURL: api.URL, FunctionEndpoint: proxy.URL, WebhookURL: b.receiver.URL,
		Stage: devstack.Stage, Region: testenv.Region, PID: os.Getpid()})
	if err := os.WriteFile(filepath.Join(b.stateDir, localapi.StackFile), info, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	tmpl, err := stack.Load("template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Provision(ctx, stack.NewClients(srv.Config()), tmpl, stack.Options{StackName: b.name})
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
	return b
}

// `make invoke` against a running stack: its function's mail passes the
// stack's proxy (so the stack's mail log, its output and its view show it)
// and its lines land in the stack's functions.log, as the stack's own
// functions' do.
func TestInvokeBesideARunningStack(t *testing.T) {
	b := startBesideStack(t)
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-fn", "email", "-event", "events/email-welcome.json", "-env-file", "", "-stack-name", b.name, "-state-dir", b.stateDir}, &out, &errs); err != nil {
		t.Fatalf("invoke: %v\n%s", err, errs.String())
	}
	const jobID = "11111111-1111-4111-8111-000000000003" // events/email-welcome.json
	var mailed bool
	for _, m := range b.mailbox.Recent(10) {
		mailed = mailed || m.JobID == jobID
	}
	if !mailed {
		t.Errorf("the stack's mailbox lacks the mail of %s: %+v", jobID, b.mailbox.Recent(10))
	}
	var outcome bool
	for _, l := range strings.Split(b.functionsLog.String(), "\n") {
		outcome = outcome || (strings.Contains(l, `"msg":"job outcome"`) && strings.Contains(l, jobID) && strings.Contains(l, `"function":"email"`))
	}
	if !outcome {
		t.Errorf("the stack's functions.log lacks the invocation's outcome line of %s:\n%s", jobID, b.functionsLog)
	}
	if !strings.Contains(errs.String(), "functions.log") {
		t.Errorf("invoke does not say where its lines go:\n%s", errs.String())
	}
}

// `make invoke FN=webhook` beside a running stack posts to that stack's
// receiver, wherever it listens, though the env file names the default
// one's (http://127.0.0.1:3001/events).
func TestInvokeWebhookBesideAStackPostsToItsReceiver(t *testing.T) {
	b := startBesideStack(t)
	envFile := filepath.Join(t.TempDir(), "env.json")
	if err := os.WriteFile(envFile, []byte(`{"WebhookFunction":{"WEBHOOK_URL":"`+envFileWebhook+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if err := run(context.Background(), []string{"-fn", "webhook", "-event", "events/webhook-deliver.json", "-env-file", envFile, "-stack-name", b.name, "-state-dir", b.stateDir}, &out, &errs); err != nil {
		t.Fatalf("invoke: %v\n%s", err, errs.String())
	}
	const jobID = "11111111-1111-4111-8111-000000000101" // events/webhook-deliver.json
	if got := b.receiver.Deliveries(); len(got) != 1 || got[0].Key != jobID {
		t.Fatalf("the stack's receiver took %+v; want the event of job %s\n%s\n%s", got, jobID, out.String(), errs.String())
	}
	if strings.Contains(out.String(), "batchItemFailures\": [\n    {") {
		t.Errorf("the record failed:\n%s", out.String())
	}
}
