package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/lambdarie"
)

// The zero Chaos changes nothing; a set one puts its hooks first, adds its
// environment, tees the application log and wraps the polled functions.
func TestChaosWiring(t *testing.T) {
	var zero Chaos
	env := map[string]string{"A": "1"}
	zero.env(env)
	var app bytes.Buffer
	if len(env) != 1 || zero.appLog(lambdarie.Sinks{App: &app}).App != &app || len(zero.hooks()) != 0 || zero.timeout(30*time.Second) != 30*time.Second {
		t.Fatal("the zero Chaos changed the stack")
	}
	inv := invokerFunc(func(context.Context, []byte) ([]byte, error) { return []byte("fn"), nil })
	if out, _ := zero.wrap("email", inv).Invoke(context.Background(), nil); string(out) != "fn" {
		t.Fatal("the zero Chaos wrapped the function")
	}

	var order []string
	hook := func(name string) awsproxy.Hook {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { order = append(order, name); next.ServeHTTP(w, r) })
		}
	}
	var tee bytes.Buffer
	c := Chaos{ProxyHooks: []awsproxy.Hook{hook("fault")}, Env: map[string]string{"RUNSTWICE_KILL_AT": "after-effect=0.1"}, AppLog: &tee,
		WrapFunction: func(fn string, inv Invoker) Invoker {
			return invokerFunc(func(ctx context.Context, p []byte) ([]byte, error) {
				out, err := inv.Invoke(ctx, p)
				return append([]byte(fn+":"), out...), err
			})
		}}
	c.env(env)
	if (Chaos{FunctionTimeout: 10 * time.Second}).timeout(30*time.Second) != 10*time.Second {
		t.Fatal("FunctionTimeout did not replace the template's timeout")
	}
	if env["RUNSTWICE_KILL_AT"] != "after-effect=0.1" || env["A"] != "1" {
		t.Fatalf("env %v", env)
	}
	p, err := awsproxy.New("http://127.0.0.1:1", c.hooks(hook("mail"))...)
	if err != nil {
		t.Fatal(err)
	}
	p.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}")))
	if strings.Join(order, ",") != "fault,mail" {
		t.Fatalf("hooks ran %v; want the chaos hooks first", order)
	}
	sinks := c.appLog(lambdarie.Sinks{App: &app})
	_, _ = sinks.App.Write([]byte(`{"msg":"killpoint"}` + "\n"))
	if app.String() != tee.String() || tee.Len() == 0 {
		t.Fatalf("app log %q, tee %q; want both", app.String(), tee.String())
	}
	if out, _ := c.wrap("email", inv).Invoke(context.Background(), nil); string(out) != "email:fn" {
		t.Fatalf("wrapped function answered %q", out)
	}
}

type invokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

type fakeAttributes struct {
	set map[string]string
	err error
}

func (f *fakeAttributes) SetQueueAttributes(_ context.Context, in *sqs.SetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error) {
	if f.err != nil {
		return nil, f.err
	}
	f.set[aws.ToString(in.QueueUrl)] = in.Attributes["VisibilityTimeout"]
	return &sqs.SetQueueAttributesOutput{}, nil
}

func TestShortenVisibility(t *testing.T) {
	sources := []EventSource{{QueueURL: "q1"}, {QueueURL: "q2", Window: 5 * time.Second}}
	f := &fakeAttributes{set: map[string]string{}}
	if err := (Chaos{}).shortenVisibility(context.Background(), f, sources); err != nil || len(f.set) != 0 {
		t.Fatalf("zero Chaos set %v, %v; want nothing", f.set, err)
	}
	if err := (Chaos{VisibilityTimeout: 8 * time.Second}).shortenVisibility(context.Background(), f, sources); err != nil {
		t.Fatal(err)
	}
	if f.set["q1"] != "8" || f.set["q2"] != "13" {
		t.Fatalf("set %v; want 8 s, plus the batching window", f.set)
	}
	f.err = errors.New("boom")
	if err := (Chaos{VisibilityTimeout: time.Second}).shortenVisibility(context.Background(), f, sources); err == nil {
		t.Fatal("a failed SetQueueAttributes was not reported")
	}
}

// The local back-off is short, and under a chaos campaign's shortened
// visibility timeout it waits one to two timeouts.
func TestLocalBackoff(t *testing.T) {
	for _, tc := range []struct {
		visibility time.Duration
		base, cap  string
	}{
		{0, "2s", "30s"},
		{8 * time.Second, "16s", "16s"},
		{100 * time.Millisecond, "1s", "1s"}, // SQS counts whole seconds
		{1500 * time.Millisecond, "3s", "3s"},
	} {
		env := map[string]string{}
		localBackoff(env, tc.visibility)
		if env["BACKOFF_BASE"] != tc.base || env["BACKOFF_CAP"] != tc.cap {
			t.Errorf("visibility %v: base %s cap %s, want %s %s", tc.visibility, env["BACKOFF_BASE"], env["BACKOFF_CAP"], tc.base, tc.cap)
		}
	}
}

// procInstance is an instance whose invocation waits for its process (a
// sleep in a process group of its own) to end, or for a second.
type procInstance struct{ cmd *exec.Cmd }

func (p procInstance) Invoke(context.Context, []byte) ([]byte, error) {
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return nil, fmt.Errorf("the process ended: %w", err)
	case <-time.After(time.Second):
		return []byte("done"), nil
	}
}
func (p procInstance) Exited() bool { return p.cmd.ProcessState != nil }
func (p procInstance) Stop()        { _ = p.cmd.Process.Kill() }
func (p procInstance) Pid() int     { return p.cmd.Process.Pid }

// KillDuring kills an instance's process group in the middle of the
// invocations it names, with a kill line on the application log, and
// leaves the others alone; without it, instances are started as they are.
func TestChaosKillDuring(t *testing.T) {
	start := func(context.Context) (Instance, error) {
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		return procInstance{cmd}, nil
	}
	for _, tc := range []struct {
		name   string
		event  string
		killed bool
	}{{"named", "kill me", true}, {"other", "spare me", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var app bytes.Buffer
			c := Chaos{AppLog: &app, KillDuring: func(function string, event []byte) time.Duration {
				if function == "outbox" && string(event) == "kill me" {
					return 50 * time.Millisecond
				}
				return 0
			}}
			in, err := c.killing("outbox", start)(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			out, err := in.Invoke(context.Background(), []byte(tc.event))
			if killed := err != nil; killed != tc.killed {
				t.Fatalf("invoke = %q, %v; killed %v, want %v", out, err, killed, tc.killed)
			}
			line := app.String()
			if tc.killed != strings.Contains(line, `"msg":"killpoint","step":"mid-invocation","function":"outbox"`) {
				t.Fatalf("application log %q", line)
			}
		})
	}
	in, err := (Chaos{}).killing("outbox", start)(context.Background())
	if _, wrapped := in.(*killable); err != nil || wrapped {
		t.Fatalf("without KillDuring: %T, %v; want the instance as started", in, err)
	}
}
