//go:build integration

package docs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/testkit"
)

// readmeStack is a local stack started as `make run` starts it, and the
// directory the walk-through's commands run from (its .devstack is the stack's).
type readmeStack struct {
	t      *testing.T
	root   string
	dir    string
	jobctl string
	out    *testkit.Buffer // what `make run` prints
	local  *devstack.Local
	ports  [2]int // API, moto
}

func (s *readmeStack) start() {
	s.t.Helper()
	l, err := devstack.Start(context.Background(), devstack.Options{
		Root: s.root, StateDir: filepath.Join(s.dir, ".devstack"), MotoPort: s.ports[1],
		APIAddr: fmt.Sprintf("127.0.0.1:%d", s.ports[0]), Out: s.out,
	})
	if err != nil {
		s.t.Fatalf("the local stack did not start: %v\n%s", err, s.out.String())
	}
	s.local = l
}

func startREADMEStack(t *testing.T) *readmeStack {
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s := &readmeStack{t: t, root: root, dir: t.TempDir(), out: &testkit.Buffer{}}
	// The walk-through's bin/jobctl is what `make jobctl` builds: the test builds
	// it the same way, into a directory of its own.
	bin := filepath.Join(s.dir, "bin")
	s.jobctl = filepath.Join(bin, "jobctl")
	build := exec.Command("make", "--no-print-directory", "jobctl", "BIN="+bin)
	build.Dir = root
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make jobctl: %v\n%s", err, b)
	}
	for i := range s.ports {
		if s.ports[i], err = moto.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	s.start()
	t.Cleanup(func() {
		s.local.Stop()
		if t.Failed() {
			t.Logf("make run printed:\n%s", s.out.String())
		}
	})
	return s
}

// result is what one command printed on stdout (an HTTP answer for curl).
type result struct {
	stdout string
	status string
	header http.Header
}

// run runs one command of the walk-through the way a user would from the checkout:
// curl as its HTTP request, `bin/jobctl` as the jobctl `make jobctl` built
// (which finds the stack through .devstack/stack.json), grep as grep.
func (s *readmeStack) run(cmd string) (result, error) {
	w := words(strings.ReplaceAll(cmd, localapi.DefaultURL, s.local.APIURL))
	switch {
	case w[0] == "curl":
		return curl(w[1:])
	case w[0] == "bin/jobctl":
		return s.exec(s.jobctl, w[1:]...)
	case w[0] == "grep":
		return s.exec("grep", w[1:]...)
	}
	return result{}, fmt.Errorf("no way to run %q", cmd)
}

func (s *readmeStack) exec(name string, args ...string) (result, error) {
	c := exec.Command(name, args...)
	c.Dir = s.dir
	// No AWS settings: jobctl finds the local stack by itself.
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir, "AWS_EC2_METADATA_DISABLED=true"}
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		return result{stdout: out.String()}, fmt.Errorf("%s %q: %w\n%s%s", name, args, err, out.String(), errOut.String())
	}
	return result{stdout: out.String()}, nil
}

// curl sends the request of a curl line of the walk-through (-i, -s, -X, -H, -d, URL).
func curl(args []string) (result, error) {
	method, body, url := "GET", "", ""
	header := http.Header{}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-i", "-s":
		case "-X":
			i++
			method = args[i]
		case "-H":
			i++
			k, v, _ := strings.Cut(args[i], ":")
			header.Set(k, strings.TrimSpace(v))
		case "-d":
			i++
			body = args[i]
			if method == "GET" {
				method = "POST"
			}
		default:
			if strings.HasPrefix(args[i], "-") {
				return result{}, fmt.Errorf("curl flag %s is not one the test knows", args[i])
			}
			url = args[i]
		}
	}
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return result{}, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{stdout: string(b), status: fmt.Sprintf("HTTP/1.1 %s", resp.Status), header: resp.Header}, err
}

// runnable tells the walk-through's commands the test can run against its stack:
// curl, jobctl and grep, with no placeholder left to fill in (JOB_ID, in a
// URL too, or ID).
func runnable(cmd string) bool {
	w := words(cmd)
	if len(w) == 0 || !(w[0] == "curl" || w[0] == "grep" || w[0] == "bin/jobctl") {
		return false
	}
	return !slices.ContainsFunc(w, func(s string) bool {
		return s == "ID" || strings.Contains(s, "JOB_ID") || strings.Contains(s, "<")
	})
}

// check runs a step's commands and compares what they printed with the
// page's output, trying again for a while: a job takes seconds to run.
func (s *readmeStack) check(st step) error {
	var last error
	for deadline := time.Now().Add(45 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		if len(st.cmds) == 0 { // lines `make run` prints
			last = s.printed(st.output)
		} else {
			last = s.runAndCompare(st)
		}
		if last == nil {
			return nil
		}
	}
	return last
}

func (s *readmeStack) runAndCompare(st step) error {
	var stdout strings.Builder
	var res result
	for _, cmd := range st.cmds {
		var err error
		if res, err = s.run(cmd); err != nil {
			return err
		}
		// A request the page shows no answer for works as shown.
		if st.lang == "" && res.status != "" && !strings.HasPrefix(res.status, "HTTP/1.1 2") {
			return fmt.Errorf("%q answered %s %s; the page shows it as working", cmd, res.status, res.stdout)
		}
		stdout.WriteString(res.stdout)
	}
	var err error
	switch st.lang {
	case "http":
		err = sameHTTPShape(st.output, res.status, res.header, res.stdout)
	case "json":
		err = sameJSONShape(st.output, stdout.String())
	case "text":
		err = sameTextShape(st.output, stdout.String())
	}
	if err != nil {
		return fmt.Errorf("%w; it printed:\n%s", err, stdout.String())
	}
	return nil // (with no output shown, it only has to succeed)
}

// printed: `make run` printed a line of the shape of each shown line.
func (s *readmeStack) printed(shown string) error {
	for _, line := range nonBlank(shown) {
		re := linePattern(line)
		if !slices.ContainsFunc(nonBlank(s.out.String()), func(l string) bool { return re.MatchString(shapeOf(l)) }) {
			return fmt.Errorf("make run printed no line of the shape of %q", line)
		}
	}
	return nil
}

// TestREADMECommands runs, on a local stack of its own, each command of
// the walk-through (the README, then docs/tour.md, as one) that can run
// there, in the pages' order, and compares what each printed with the
// output the page shows: status line, headers, JSON keys, table lines and
// columns, not ids or times. Then it checks that the dead-letter
// walk-through did what the tour says, that the demo signup's mail
// arrives, and that a restart is what the tour says: empty, the README's
// first job id again, a new run mark.
func TestREADMECommands(t *testing.T) {
	steps, _ := walkSteps(t)
	s := startREADMEStack(t)
	var ran []string
	compared := 0
	ranOn := map[string]int{} // commands run, by page
	for _, st := range steps {
		if !slices.ContainsFunc(st.cmds, runnable) && len(st.cmds) > 0 {
			continue // make, sam: not for this stack
		}
		if slices.ContainsFunc(st.cmds, func(c string) bool { return !runnable(c) }) {
			t.Errorf("%s: a block mixes commands the test runs with others: %q", st.section, st.cmds)
			continue
		}
		if err := s.check(st); err != nil {
			t.Fatalf("%s %q:\n%v", st.section, st.cmds, err)
		}
		ran = append(ran, st.cmds...)
		page, _, _ := strings.Cut(st.section, " (")
		ranOn[page] += len(st.cmds)
		if st.lang != "" {
			compared++
		}
	}
	t.Logf("ran %d commands of %q (%v), compared %d outputs", len(ran), walkThrough, ranOn, compared)
	for _, page := range walkThrough {
		if ranOn[page] == 0 {
			t.Fatalf("ran no command of %s (%v); want each page of the walk-through to show commands that run", page, ranOn)
		}
	}

	// The walk-through is all there, in its order.
	order := []string{"enqueue email.welcome.v1 userId=u-bad", "dlq list", "dlq redrive --all --type email.welcome.v1 --dry-run",
		"users set-email u-bad", "dlq redrive --all --type email.welcome.v1", "dlq drop --all --type email.password-reset.v1 --yes"}
	at := 0
	for _, cmd := range ran {
		if at < len(order) && strings.Contains(cmd, order[at]) && (order[at] != "dlq redrive --all --type email.welcome.v1" || !strings.Contains(cmd, "--dry-run")) {
			at++
		}
	}
	if !slices.ContainsFunc(ran, func(c string) bool { return strings.Contains(c, "/v1/jobs?") }) {
		t.Fatalf("the walk-through's commands ran %q; want the caller's list of jobs (GET /v1/jobs?…) among them", ran)
	}
	if at < len(order) || compared < 8 {
		t.Fatalf("the walk-through's commands ran %q (%d outputs compared); want the dead-letter steps %q in order and at least 8 outputs", ran, compared, order)
	}

	t.Run("the dead-letter walk-through did what the tour says", s.deadLetters)
	t.Run("the demo signup's verification mail arrives once, through the outbox", func(t *testing.T) { s.demoSignup(t, steps) })
	t.Run("a restart starts empty and makes the same job id again", func(t *testing.T) { s.restart(t, steps) })
}

// deadLetters: the welcome for u-bad was redriven and sent once to the
// mended address, under its job id, which reads Succeeded (and so does its
// letter, redriven first); the password
// reset was dropped, its job Failed, no mail sent for it.
func (s *readmeStack) deadLetters(t *testing.T) {
	res, err := s.run("bin/jobctl dlq list --status all --json")
	if err != nil {
		t.Fatal(err)
	}
	var list struct{ Letters []deadletter.Record }
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
		t.Fatal(err)
	}
	status := map[string]deadletter.Record{}
	for _, l := range list.Letters {
		status[l.Type] = l
	}
	welcome, reset := status["email.welcome.v1"], status["email.password-reset.v1"]
	if welcome.Status != deadletter.StatusSucceeded || welcome.RedrivenAt.IsZero() || reset.Status != deadletter.StatusDropped || len(list.Letters) != 2 {
		t.Fatalf("letters %+v; want the welcome redriven, then succeeded, and the reset dropped", list.Letters)
	}
	if !strings.Contains(reset.Reason, "not a plain address") {
		t.Errorf("the dropped letter's reason is %q; want it kept", reset.Reason)
	}
	job := func(id string) map[string]any {
		r, err := curl([]string{s.local.APIURL + "/v1/jobs/" + id})
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal([]byte(r.stdout), &m)
		return m
	}
	deadline := time.Now().Add(30 * time.Second)
	for job(welcome.JobID)["state"] != "Succeeded" {
		if time.Now().After(deadline) {
			t.Fatalf("the redriven welcome reads %v; want Succeeded", job(welcome.JobID))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if st := job(reset.JobID)["state"]; st != "Failed" {
		t.Errorf("the dropped reset's job reads %v; want Failed", st)
	}
	var toBad []devstack.Mail
	for _, m := range s.local.Mails().Recent(1000) {
		if slices.Contains(m.To, "bad@example.com") {
			toBad = append(toBad, m)
		}
	}
	if len(toBad) != 1 || toBad[0].JobID != welcome.JobID || toBad[0].Subject != "Welcome" {
		t.Fatalf("mails to bad@example.com %+v; want one welcome, of job %s", toBad, welcome.JobID)
	}
}

// demoSignup: the tour's `jobctl demo signup USER EMAIL` (a user and its
// verification job's outbox item in one transaction) ends as the tour
// says: "make run prints the mail a moment later". One mail reaches the
// address, sent by a job of the relay's caller for the demo's producer,
// which reads Succeeded.
func (s *readmeStack) demoSignup(t *testing.T, steps []step) {
	var args []string
	for _, st := range steps {
		for _, cmd := range st.cmds {
			if w := words(cmd); len(w) == 5 && w[0] == "bin/jobctl" && strings.Join(w[1:3], " ") == "demo signup" {
				args = w[3:]
			}
		}
	}
	if args == nil {
		t.Fatal("the walk-through shows no `jobctl demo signup USER EMAIL`")
	}
	user, address := args[0], args[1]
	mailsTo := func() (to []devstack.Mail) {
		for _, m := range s.local.Mails().Recent(1000) {
			if slices.Contains(m.To, address) {
				to = append(to, m)
			}
		}
		return to
	}
	var to []devstack.Mail
	for deadline := time.Now().Add(60 * time.Second); len(to) == 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no mail to %s (the demo signup of %s) within 60 s", address, user)
		}
		to = mailsTo()
	}
	// The mail goes before the claim: the job reads Succeeded a moment later.
	var job map[string]any
	for deadline := time.Now().Add(30 * time.Second); job["state"] != "Succeeded"; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job %s of the mail to %s reads %v; want Succeeded", to[0].JobID, address, job)
		}
		res, err := s.run("bin/jobctl jobs get " + to[0].JobID + " --json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(res.stdout), &job); err != nil {
			t.Fatalf("jobctl jobs get %s --json: %v\n%s", to[0].JobID, err, res.stdout)
		}
	}
	if job["caller"] != "outbox:signup" || job["type"] != "email.partner-verification.v1" {
		t.Errorf("the job of the mail to %s: %v; want the partner verification of caller outbox:signup", address, job)
	}
	if to = mailsTo(); len(to) != 1 {
		t.Errorf("%d mails to %s: %+v; want one", len(to), address, to)
	}
}

// restart: after Ctrl-C and a new start from the same state directory, the
// README's first request makes the same job id again as a new job, and
// functions.log marks the two runs apart.
func (s *readmeStack) restart(t *testing.T, steps []step) {
	first := steps[slices.IndexFunc(steps, func(st step) bool { return st.lang == "http" })]
	before, err := s.run(first.cmds[0])
	if err != nil {
		t.Fatal(err)
	}
	firstRun := s.local.RunID
	s.local.Stop()
	s.start()
	after, err := s.run(first.cmds[0])
	if err != nil {
		t.Fatal(err)
	}
	var was, is map[string]any
	_ = json.Unmarshal([]byte(before.stdout), &was)
	_ = json.Unmarshal([]byte(after.stdout), &is)
	if is["jobId"] != was["jobId"] || is["deduplicated"] != false || after.header.Get("Idempotent-Replayed") != "" || after.status != "HTTP/1.1 202 Accepted" {
		t.Fatalf("after a restart the first curl answered %s %v %v; want a new job under the same id %v", after.status, after.header, is, was["jobId"])
	}
	log, err := os.ReadFile(filepath.Join(s.dir, ".devstack", devstack.FunctionsLog))
	if err != nil {
		t.Fatal(err)
	}
	var marks []string
	for _, line := range bytes.Split(log, []byte("\n")) {
		var m struct{ Msg, RunID string }
		if json.Unmarshal(line, &m) == nil && (m.Msg == devstack.RunStartedMsg || m.Msg == devstack.RunStoppedMsg) {
			marks = append(marks, m.Msg+" "+m.RunID)
		}
	}
	want := []string{devstack.RunStartedMsg + " " + firstRun, devstack.RunStoppedMsg + " " + firstRun, devstack.RunStartedMsg + " " + s.local.RunID}
	if firstRun == s.local.RunID || !slices.Equal(marks, want) {
		t.Fatalf("functions.log marks %q; want %q", marks, want)
	}
}
