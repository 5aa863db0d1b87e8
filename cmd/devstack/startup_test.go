//go:build integration

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// runFailing runs devstack with args and env (added to a clean
// environment) and returns its exit code and output; it must end by itself.
func runFailing(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	root, err := moto.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, devstackBin(t), args...)
	cmd.Dir = root
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "RUNSTWICE_MOTO=" + os.Getenv("RUNSTWICE_MOTO"),
		"RUNSTWICE_RIE=" + os.Getenv("RUNSTWICE_RIE")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("devstack %v did not exit by itself:\n%s", args, out.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String()
}

// checkFailure: a non-zero exit, the cause named, and no panic.
func checkFailure(t *testing.T, code int, out string, wants ...string) {
	t.Helper()
	t.Logf("exit %d: %s", code, out)
	if code == 0 {
		t.Errorf("exit 0; want a failure:\n%s", out)
	}
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output does not say %q:\n%s", w, out)
		}
	}
	for _, bad := range []string{"panic", "goroutine ", "nil pointer"} {
		if strings.Contains(out, bad) {
			t.Errorf("output has %q:\n%s", bad, out)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := moto.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

func freePortArg(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	return port
}

// TestStartupFailures: each thing make run needs and lacks gives a clear
// message naming the cause and a non-zero exit, never a panic.
func TestStartupFailures(t *testing.T) {
	t.Run("API port in use", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		code, out := runFailing(t, nil, "--api-addr", ln.Addr().String(), "--moto-port", freePortArg(t), "--state-dir", t.TempDir())
		checkFailure(t, code, out, ln.Addr().String()+" is in use", "another `make run`")
	})
	// The webhook and OTLP receivers' ports are checked with the others,
	// before the run is marked in functions.log: the message names the
	// flag that moves the port, and the run leaves no trace.
	for _, flag := range []string{"--webhook-addr", "--otlp-addr"} {
		t.Run(flag+" port in use", func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			state := t.TempDir()
			args := []string{"--api-addr", freeAddr(t), "--webhook-addr", freeAddr(t), "--otlp-addr", freeAddr(t), "--moto-port", freePortArg(t), "--state-dir", state}
			args[slices.Index(args, flag)+1] = ln.Addr().String()
			code, out := runFailing(t, nil, args...)
			checkFailure(t, code, out, ln.Addr().String()+" is in use", flag+" moves it", `make run ARGS="`+flag+" ")
			if strings.Contains(out, "devstack: devstack:") || strings.Contains(out, "bind:") {
				t.Errorf("a raw listen error:\n%s", out)
			}
			if b, err := os.ReadFile(filepath.Join(state, devstack.FunctionsLog)); err == nil {
				t.Errorf("a refused run wrote functions.log:\n%s", b)
			}
		})
	}
	t.Run("another HTTP server on the moto port", func(t *testing.T) {
		var hits atomic.Int32
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			hits.Add(1)
			w.WriteHeader(http.StatusForbidden) // as AirPlay answers on macOS
		}))
		defer other.Close()
		_, port, _ := net.SplitHostPort(other.Listener.Addr().String())
		code, out := runFailing(t, nil, "--api-addr", freeAddr(t), "--moto-port", port, "--state-dir", t.TempDir())
		checkFailure(t, code, out, "127.0.0.1:"+port+" is in use", "--moto-port")
		if n := hits.Load(); n != 0 {
			t.Errorf("devstack sent %d requests to the other server; it must never take it for moto", n)
		}
	})
	t.Run("endpoint that does not answer", func(t *testing.T) {
		nothing := "http://" + freeAddr(t)
		code, out := runFailing(t, nil, "--api-addr", freeAddr(t), "--endpoint", nothing, "--state-dir", t.TempDir())
		checkFailure(t, code, out, nothing, "does not answer")
	})
	t.Run("endpoint that is not AWS", func(t *testing.T) {
		web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "<html>not here</html>", http.StatusNotFound)
		}))
		defer web.Close()
		code, out := runFailing(t, nil, "--api-addr", freeAddr(t), "--endpoint", web.URL, "--state-dir", t.TempDir())
		checkFailure(t, code, out, web.URL, "not as AWS")
	})
	t.Run("--aws without credentials", func(t *testing.T) {
		dir := t.TempDir()
		code, out := runFailing(t, []string{"AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=" + filepath.Join(dir, "none"),
			"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")},
			"--aws", "--api-addr", freeAddr(t), "--state-dir", t.TempDir())
		checkFailure(t, code, out, "--aws needs credentials", "AWS_ACCESS_KEY_ID")
	})
	t.Run("--aws and --endpoint", func(t *testing.T) {
		code, out := runFailing(t, nil, "--aws", "--endpoint", "http://127.0.0.1:1", "--state-dir", t.TempDir())
		checkFailure(t, code, out, "not both")
		if code != 2 {
			t.Errorf("exit %d; want 2 for a usage error", code)
		}
	})
	t.Run("state directory of a running stack", func(t *testing.T) {
		state := t.TempDir()
		lock, err := os.OpenFile(filepath.Join(state, devstack.LockFile), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		if _, err := lock.WriteString("4242\n"); err != nil {
			t.Fatal(err)
		}
		before := map[string]string{devstack.FunctionsLog: "{\"msg\":\"the running stack's log\"}\n", devstack.StackFile: `{"pid":4242}`}
		for name, content := range before {
			if err := os.WriteFile(filepath.Join(state, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		code, out := runFailing(t, nil, "--api-addr", freeAddr(t), "--moto-port", freePortArg(t), "--state-dir", state)
		checkFailure(t, code, out, "pid 4242", state)
		for name, content := range before {
			if b, _ := os.ReadFile(filepath.Join(state, name)); string(b) != content {
				t.Errorf("%s changed to %q", name, b)
			}
		}
	})
}

// secondRunsFail: a second make run, from the same state directory or on
// the same ports, refuses plainly and leaves the first one's logs and
// state as they were.
func (e *e2e) secondRunsFail(t *testing.T) {
	snapshot := func() map[string][]byte {
		m := map[string][]byte{}
		for _, name := range []string{devstack.FunctionsLog, devstack.StackFile, devstack.EnvFile, devstack.ResourcesFile} {
			b, err := os.ReadFile(filepath.Join(e.state, name))
			if err != nil {
				t.Fatal(err)
			}
			m[name] = b
		}
		return m
	}
	before := snapshot()
	mailsBefore := len(e.mails("demo1@example.com"))
	code, out := runFailing(t, nil, e.args...)
	checkFailure(t, code, out, "another `make run`", fmt.Sprintf("pid %d", e.cmd.Process.Pid))
	code, out = runFailing(t, nil, append(slices.Clone(e.args), "--state-dir", t.TempDir())...)
	checkFailure(t, code, out, "is in use")
	after := snapshot()
	for name, b := range before {
		a := after[name]
		switch name {
		case devstack.FunctionsLog: // still appended to by the first stack
			if !bytes.HasPrefix(a, b) || bytes.IndexByte(a, 0) >= 0 {
				t.Errorf("%s was rewritten by the second run", name)
			}
		default:
			if !bytes.Equal(a, b) {
				t.Errorf("%s changed: %s → %s", name, b, a)
			}
		}
	}
	var info localapi.StackInfo
	if err := json.Unmarshal(after[devstack.StackFile], &info); err != nil || info.PID != e.cmd.Process.Pid ||
		info.APIURL != e.api || info.Endpoint != e.endpoint || info.Stage != "local" || info.Region != "us-east-1" {
		t.Errorf("stack.json = %s (%v); want the first stack's", after[devstack.StackFile], err)
	}
	// stack.json names the receivers too (make invoke posts and exports
	// there), as the banner shows them.
	if info.WebhookURL == "" || info.OTLPURL == "" || !strings.Contains(e.out.String(), "webhooks   "+info.WebhookURL+" ") ||
		!strings.Contains(e.out.String(), "traces     "+info.OTLPURL+" ") {
		t.Errorf("stack.json names the webhook receiver %q and the OTLP receiver %q; want the banner's:\n%s", info.WebhookURL, info.OTLPURL, e.out.String())
	}
	if !strings.Contains(string(after[devstack.EnvFile]), "export AWS_ENDPOINT_URL="+e.endpoint+" ") {
		t.Errorf("env = %s; want the first stack's endpoint", after[devstack.EnvFile])
	}
	// The first stack still serves, and its demo data was not seeded again.
	if r := e.request("GET", "/v1/jobs/nope", "", ""); r.status != http.StatusNotFound && r.status != http.StatusBadRequest {
		t.Errorf("the first stack answers %d; want it still serving (400 or 404)", r.status)
	}
	if n := len(e.mails("demo1@example.com")); n != mailsBefore {
		t.Errorf("mails %d → %d across the second run", mailsBefore, n)
	}
}

// checkFunctionsLog: functions.log holds only application JSON lines, each
// naming the function that wrote it; EMF documents are in metrics.log.
func (e *e2e) checkFunctionsLog(t *testing.T) {
	f, err := os.Open(filepath.Join(e.state, devstack.FunctionsLog))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	n := 0
	seen := map[string]bool{}
	for sc.Scan() {
		n++
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not JSON (%v): %s", n, err, sc.Text())
		}
		// The run's first line marks it, with the run id the banner shows.
		if mark := line["msg"] == devstack.RunStartedMsg; mark != (n == 1) {
			t.Fatalf("line %d: %s; want exactly one %q line, the first", n, sc.Text(), devstack.RunStartedMsg)
		} else if mark && (line["runId"] == "" || !strings.Contains(e.out.String(), fmt.Sprintf("run        %s ", line["runId"]))) {
			t.Fatalf("the run mark names run %v, which the banner does not show:\n%s", line["runId"], e.out.String())
		}
		fn, _ := line["function"].(string)
		if fn == "" {
			t.Fatalf("line %d has no function: %s", n, sc.Text())
		}
		if _, ok := line["_aws"]; ok {
			t.Fatalf("line %d is a metric document: %s", n, sc.Text())
		}
		seen[fn] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !seen["enqueue"] || !seen["email"] {
		t.Errorf("functions.log has lines of %v; want enqueue and email at least", seen)
	}
	b, err := os.ReadFile(filepath.Join(e.state, devstack.MetricsLog))
	if err != nil || !bytes.Contains(b, []byte(`"_aws"`)) {
		t.Errorf("metrics.log holds no EMF document (%v)", err)
	}
}
