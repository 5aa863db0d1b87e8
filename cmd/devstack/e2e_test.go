//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/testkit"
)

// e2e is a running devstack binary, driven as a user would: HTTP for the
// API, the jobctl binary for operations.
type e2e struct {
	t         *testing.T
	dir       string // holds .devstack, where jobctl is run from
	api       string
	endpoint  string
	jobctl    string
	resources map[string]string
	out       *testkit.Buffer
	cmd       *exec.Cmd
	state     string   // the stack's state directory
	args      []string // the stack's command line
}

func build(t *testing.T, root, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// devstackBinary builds cmd/devstack once per test binary.
var devstackBinary = sync.OnceValues(func() (string, error) {
	root, err := moto.RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "devstack-e2e")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "devstack")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/devstack")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/devstack: %w\n%s", err, b)
	}
	return out, nil
})

func devstackBin(t *testing.T) string {
	t.Helper()
	bin, err := devstackBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// startDevstack starts the built devstack on free ports, with extra flags.
func startDevstack(t *testing.T, extra ...string) *e2e {
	t.Helper()
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &e2e{t: t, dir: dir, jobctl: filepath.Join(dir, "jobctl"), out: &testkit.Buffer{}}
	build(t, root, "./cmd/jobctl", e.jobctl)
	motoPort, _ := moto.FreePort()
	apiPort, _ := moto.FreePort()
	otlpPort, _ := moto.FreePort()
	webhookPort, _ := moto.FreePort()
	e.state = filepath.Join(dir, ".devstack")
	// A lock left by a stack that died is no obstacle.
	if err := os.MkdirAll(e.state, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.state, devstack.LockFile), []byte("999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.args = []string{"--moto-port", fmt.Sprint(motoPort), "--api-addr", fmt.Sprintf("127.0.0.1:%d", apiPort),
		"--otlp-addr", fmt.Sprintf("127.0.0.1:%d", otlpPort), "--webhook-addr", fmt.Sprintf("127.0.0.1:%d", webhookPort),
		"--park-delay", "2s", "--toggle-ttl", "1s", "--state-dir", e.state}
	e.args = append(e.args, extra...)
	e.cmd = exec.Command(devstackBin(t), e.args...)
	e.cmd.Dir = root
	// An exported AWS_ENDPOINT_URL (here pointing at nothing) is ignored.
	e.cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL=http://127.0.0.1:1")
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	e.cmd.Stdout, e.cmd.Stderr = pw, pw
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		once := sync.Once{}
		for sc.Scan() {
			fmt.Fprintln(e.out, sc.Text())
			if strings.Contains(sc.Text(), "(ready)") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	t.Cleanup(func() {
		if e.cmd.ProcessState == nil {
			_ = e.cmd.Process.Kill()
			_ = e.cmd.Wait()
		}
		pw.Close()
		if t.Failed() {
			t.Logf("devstack output:\n%s", e.out.String())
			for _, name := range []string{devstack.FunctionsLog, devstack.EmulatorLog} {
				if b, err := os.ReadFile(filepath.Join(e.state, name)); err == nil {
					t.Logf("%s (tail):\n%s", name, tail(string(b), 6000))
				}
			}
		}
	})
	select {
	case <-ready:
	case <-time.After(4 * time.Minute):
		t.Fatalf("devstack not ready after 4 minutes:\n%s", e.out.String())
	}
	e.api = fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	e.endpoint = fmt.Sprintf("http://127.0.0.1:%d", motoPort)
	b, err := os.ReadFile(filepath.Join(e.state, devstack.ResourcesFile))
	if err != nil || json.Unmarshal(b, &e.resources) != nil {
		t.Fatalf("resources.json: %v %s", err, b)
	}
	return e
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

type response struct {
	status  int
	headers http.Header
	body    map[string]any
}

// request sends body (JSON when not empty) to the stack's API, under the
// Idempotency-Key key when not empty.
func (e *e2e) request(method, path, key, body string) response {
	e.t.Helper()
	return e.requestAs(method, path, key, body, nil)
}

func (e *e2e) run(args ...string) (int, string, string) {
	e.t.Helper()
	cmd := exec.Command(e.jobctl, args...)
	cmd.Dir = e.dir
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL="+e.endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=us-east-1", "STAGE=local", "TOGGLE_TTL=1s")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

// mailLine is a "mail sent" line of devstack's output.
var mailLine = regexp.MustCompile(`mail sent\s+to=(\S+)\s+subject=("(?:[^"\\]|\\.)*")\s+link=(\S+)\s+job=(\S+)`)

// mails returns the mails to the address that devstack printed.
func (e *e2e) mails(to string) []devstack.Mail {
	e.t.Helper()
	var out []devstack.Mail
	for _, line := range strings.Split(e.out.String(), "\n") {
		m := mailLine.FindStringSubmatch(line)
		if m == nil || !slices.Contains(strings.Split(m[1], ","), to) {
			continue
		}
		subject, err := strconv.Unquote(m[2])
		if err != nil {
			e.t.Fatalf("mail line %q: subject: %v", line, err)
		}
		out = append(out, devstack.Mail{To: strings.Split(m[1], ","), Subject: subject, Link: m[3], JobID: m[4]})
	}
	return out
}

// motoMails reads, once, every mail moto's SES holds (GET
// /moto-api/data.json), to check what devstack showed against it.
func (e *e2e) motoMails() map[string]int {
	e.t.Helper()
	resp, err := http.Get(e.endpoint + "/moto-api/data.json")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var data struct {
		SES struct {
			Message []struct {
				Destinations struct{ ToAddresses []string }
			}
		} `json:"ses"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&data); err != nil {
		e.t.Fatal(err)
	}
	byTo := map[string]int{}
	for _, m := range data.SES.Message {
		for _, to := range m.Destinations.ToAddresses {
			byTo[to]++
		}
	}
	return byTo
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestEndToEnd drives the running local stack: HTTP → SQS → worker → mail,
// replay, a poison message to the dead letters, and the kill switch.
func TestEndToEnd(t *testing.T) {
	e := startDevstack(t)
	const verification = `{"args":{"userId":"u-demo-1","roleCode":"city-partner","countryCode":"BD"}}`

	// A verification job for a demo user: exactly one mail, with a link, and
	// the job Succeeded.
	first := e.request("POST", "/v1/jobs/email.partner-verification.v1", "e2e-first", verification)
	if first.status != http.StatusAccepted {
		t.Fatalf("POST = %d %v; want 202", first.status, first.body)
	}
	jobID, _ := first.body["jobId"].(string)
	eventually(t, 30*time.Second, "no verification mail to demo1@example.com", func() bool { return len(e.mails("demo1@example.com")) == 1 })
	mail := e.mails("demo1@example.com")[0]
	if !strings.Contains(mail.Link, "token=") || !strings.Contains(mail.Link, "userId=u-demo-1") {
		t.Fatalf("mail link %q; want a verification link with a token", mail.Link)
	}
	if mail.JobID != jobID {
		t.Fatalf("mail line names job %q; want %q", mail.JobID, jobID)
	}
	eventually(t, 10*time.Second, "job never read Succeeded", func() bool {
		return e.request("GET", "/v1/jobs/"+jobID, "", "").body["state"] == "Succeeded"
	})
	code, out, _ := e.run("jobs", "get", jobID, "--json")
	if code != 0 || !strings.Contains(out, `"Succeeded"`) {
		t.Fatalf("jobctl jobs get: %d %s", code, out)
	}

	// The same request again: replayed, still one mail.
	again := e.request("POST", "/v1/jobs/email.partner-verification.v1", "e2e-first", verification)
	if again.status != first.status || again.headers.Get("Idempotent-Replayed") != "true" || again.body["jobId"] != jobID {
		t.Fatalf("replay = %d %v %v; want the first response replayed", again.status, again.headers, again.body)
	}
	time.Sleep(3 * time.Second)
	if n := len(e.mails("demo1@example.com")); n != 1 {
		t.Fatalf("%d mails after the replay; want still 1", n)
	}

	// A poison message on a work queue reaches the dead letters with a reason.
	client := sqs.NewFromConfig(moto.Config(e.endpoint, "us-east-1"))
	if _, err := client.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(e.resources["CriticalQueue"]), MessageBody: aws.String("this is not a job"),
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "poison message not listed by jobctl dlq list", func() bool {
		code, out, _ := e.run("dlq", "list", "--json")
		var list struct {
			Letters []struct{ Body, Reason string }
		}
		if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
			return false
		}
		for _, l := range list.Letters {
			if l.Body == "this is not a job" && strings.Contains(l.Reason, "invalid JSON") {
				return true
			}
		}
		return false
	})

	// A misspelled type is refused with a suggestion.
	code, _, stderr := e.run("toggles", "set", "email.welcom.v1", "off")
	if code != 4 || !strings.Contains(stderr, "did you mean email.welcome.v1") {
		t.Fatalf("toggles set typo: exit %d %q; want 4 (refused) and a suggestion", code, stderr)
	}

	// Switched off, a welcome job is parked, not sent; on again, sent once.
	// It says how soon: the ToggleTtl its workers were given (TOGGLE_TTL here).
	if code, out, stderr := e.run("toggles", "set", "email.welcome.v1", "off"); code != 0 || !strings.Contains(out, "takes effect within 1s (") {
		t.Fatalf("toggles set off: %d %s %s", code, out, stderr)
	}
	time.Sleep(1500 * time.Millisecond) // the workers' toggle TTL
	welcome := e.request("POST", "/v1/jobs/email.welcome.v1", "e2e-welcome", `{"args":{"userId":"u-demo-2"}}`)
	if welcome.status != http.StatusAccepted {
		t.Fatalf("POST welcome = %d %v", welcome.status, welcome.body)
	}
	metrics := filepath.Join(e.state, devstack.MetricsLog)
	eventually(t, 20*time.Second, "welcome job was not parked", func() bool {
		b, _ := os.ReadFile(metrics)
		return strings.Contains(string(b), `"JobsParked":1`)
	})
	if n := len(e.mails("demo2@example.com")); n != 0 {
		t.Fatalf("%d welcome mails while switched off; want 0", n)
	}
	if code, out, stderr := e.run("toggles", "set", "email.welcome.v1", "on"); code != 0 {
		t.Fatalf("toggles set on: %d %s %s", code, out, stderr)
	}
	eventually(t, 30*time.Second, "welcome mail not sent after switching on", func() bool { return len(e.mails("demo2@example.com")) == 1 })
	time.Sleep(3 * time.Second)
	if n := len(e.mails("demo2@example.com")); n != 1 {
		t.Fatalf("%d welcome mails; want exactly 1", n)
	}

	// What devstack showed is what moto's SES holds.
	if got := e.motoMails(); got["demo1@example.com"] != 1 || got["demo2@example.com"] != 1 {
		t.Fatalf("moto holds mails %v; want one to each demo user", got)
	}

	t.Run("two sessions of one assumed role are one caller", e.assumedRoleSessions)
	t.Run("a parked job keeps its key and runs once", e.parkedJob)
	t.Run("a redrive makes the job active again", e.redriveReactivates)
	t.Run("a cancelled job never runs", func(t *testing.T) { e.cancel(t, jobID) })
	t.Run("one traceId from request to worker", e.traceFlows)
	t.Run("the local web view shows the stack", func(t *testing.T) { e.webView(t, jobID) })
	t.Run("a second make run leaves the first intact", e.secondRunsFail)
	t.Run("every application log line is JSON with function", e.checkFunctionsLog)

	// Ctrl-C stops everything it started.
	_ = e.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- e.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("devstack exited with %v after Ctrl-C", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("devstack did not stop within 20s of Ctrl-C")
	}
	if _, err := http.Get(e.endpoint + "/moto-api/"); err == nil {
		t.Fatal("moto still answers after Ctrl-C")
	}
	for _, name := range []string{devstack.StackFile, devstack.EnvFile} {
		if _, err := os.Stat(filepath.Join(e.state, name)); !os.IsNotExist(err) {
			t.Errorf("%s left behind after Ctrl-C (%v)", name, err)
		}
	}
}
