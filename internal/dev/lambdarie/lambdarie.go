// Package lambdarie runs a Go Lambda function's bootstrap under the AWS
// Lambda Runtime Interface Emulator (aws-lambda-rie), without Docker: Build
// compiles the function for the host, Start runs one emulator process on a
// free loopback port with the function's environment, Invoke sends it an
// event and returns the response, Stop ends it.
//
// The emulator serves one invocation at a time and crashes on a concurrent
// one, so an Emulator serializes its Invoke calls and holds its slot until
// the invocation ends, whatever its caller does (as a Lambda execution
// environment does); run one Emulator per concurrency slot.
package lambdarie

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/dev/proc"
)

// InvokePath is the emulator's invocation endpoint.
const InvokePath = "/2015-03-31/functions/function/invocations"

// Binary finds aws-lambda-rie: $RUNSTWICE_RIE, <root>/bin/aws-lambda-rie
// (what `make rie` builds), or PATH.
func Binary(root string) (string, error) {
	local := ""
	if root != "" {
		local = filepath.Join(root, "bin", "aws-lambda-rie")
	}
	p, ok := proc.Find("aws-lambda-rie", os.Getenv("RUNSTWICE_RIE"), local)
	if !ok {
		return "", errors.New("lambdarie: aws-lambda-rie not found in $RUNSTWICE_RIE, ./bin or PATH (run `make rie`)")
	}
	return p, nil
}

// Build compiles the function package in root/fnDir (e.g. "functions/email")
// for the host, with the lambda.norpc tag and any extra tags (e.g. "chaos"),
// into out (a file path) and returns out.
func Build(ctx context.Context, root, fnDir, out string, tags ...string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("lambdarie: %w", err)
	}
	tagList := strings.Join(append([]string{"lambda.norpc"}, tags...), ",")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", tagList, "-o", abs, "./"+fnDir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("lambdarie: go build ./%s: %w: %s", fnDir, err, b)
	}
	return abs, nil
}

// Config describes one emulated function.
type Config struct {
	// RIE is the emulator binary (Binary("") when empty).
	RIE string
	// Bootstrap is the function's executable.
	Bootstrap string
	// FunctionName names the function in the emulator (context, logs).
	FunctionName string
	// Env is the function's environment; nothing else of this process's
	// environment is passed on except PATH, HOME and TZ. Give it the AWS
	// settings too (AWS_ENDPOINT_URL, AWS_REGION, credentials).
	Env map[string]string
	// Timeout is the function timeout (300 s when zero).
	Timeout time.Duration
	// Output receives the emulator's and the function's stdout and stderr
	// (discarded when nil).
	Output io.Writer
}

// Emulator is one running aws-lambda-rie process.
type Emulator struct {
	// URL is the emulator's base URL, e.g. http://127.0.0.1:41235.
	URL string

	slot    chan struct{} // held for the whole of an invocation
	timeout time.Duration // the function timeout
	cmd     *exec.Cmd
	exited  chan struct{}
	client  *http.Client
	stop    sync.Once
}

// ErrExited is returned by Invoke when the emulator process has ended (it
// crashed or was stopped); a fresh one must take its place.
var ErrExited = errors.New("lambdarie: the emulator has exited")

// invokeGrace is how long past the function timeout Invoke waits for the
// emulator's answer (it reports a timeout itself) before it gives the
// emulator up as hung and stops it.
const invokeGrace = 5 * time.Second

// FunctionError is a response the function produced by failing: a returned
// error or a panic (errorType, errorMessage), or the emulator's report of a
// crash or timeout.
type FunctionError struct {
	Status  int
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
	Body    []byte
}

func (e *FunctionError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("lambdarie: function error %s: %s", e.Type, e.Message)
	}
	return fmt.Sprintf("lambdarie: invocation failed (HTTP %d): %s", e.Status, e.Body)
}

// Start runs the emulator with the bootstrap on free loopback ports and
// waits until it accepts invocations. The function itself starts (init) on
// the first Invoke.
func Start(ctx context.Context, cfg Config) (*Emulator, error) {
	if cfg.RIE == "" {
		p, err := Binary("")
		if err != nil {
			return nil, err
		}
		cfg.RIE = p
	}
	if cfg.FunctionName == "" {
		cfg.FunctionName = filepath.Base(filepath.Dir(cfg.Bootstrap))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 300 * time.Second
	}
	out := cfg.Output
	if out == nil {
		out = io.Discard
	}
	var lastErr error
	for range 3 { // a port taken between picking and binding: try others
		apiPort, err1 := proc.FreePort()
		rtPort, err2 := runtimePort()
		if err := errors.Join(err1, err2); err != nil {
			if err2 == nil {
				releaseRuntimePort(rtPort)
			}
			return nil, fmt.Errorf("lambdarie: free port: %w", err)
		}
		e, err := start(ctx, cfg, out, apiPort, rtPort)
		if err == nil {
			return e, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(ctx context.Context, cfg Config, out io.Writer, apiPort, runtimePort int) (*Emulator, error) {
	addr := "127.0.0.1:" + strconv.Itoa(apiPort)
	cmd := exec.Command(cfg.RIE,
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:"+strconv.Itoa(runtimePort),
		cfg.Bootstrap)
	cmd.Dir = filepath.Dir(cfg.Bootstrap)
	env := map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        cfg.FunctionName,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(cfg.Timeout / time.Second)),
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256",
	}
	for _, k := range []string{"PATH", "HOME", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range cfg.Env {
		env[k] = v
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = proc.Group()
	if err := cmd.Start(); err != nil {
		releaseRuntimePort(runtimePort)
		return nil, fmt.Errorf("lambdarie: start %s: %w", cfg.RIE, err)
	}
	e := &Emulator{URL: "http://" + addr, cmd: cmd, exited: make(chan struct{}), client: &http.Client{},
		slot: make(chan struct{}, 1), timeout: cfg.Timeout}
	go func() { _ = cmd.Wait(); releaseRuntimePort(runtimePort); close(e.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return e, nil
		}
		select {
		case <-e.exited:
			return nil, fmt.Errorf("lambdarie: aws-lambda-rie exited at start (%v)", cmd.ProcessState)
		case <-ctx.Done():
			e.Stop()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
			// aws-lambda-rie listens within a few milliseconds; a cold
			// start waits for this loop, so it looks again soon.
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("lambdarie: aws-lambda-rie not listening on %s after 10s", addr)
		}
	}
}

// Invoke sends event to the function and returns its response payload. A
// function error (returned error, panic, crash, timeout) is a
// *FunctionError.
//
// Calls are serialized: ctx bounds only the wait for the emulator to be
// free. Once sent, an invocation runs to its end (bounded by the function
// timeout) even if ctx is cancelled, as in Lambda, because the emulator
// cannot take another one before; a caller that must not wait runs Invoke
// in a goroutine. An emulator that does not answer by the timeout plus a
// grace period is stopped (then Invoke returns an error and Exited reports
// true).
func (e *Emulator) Invoke(ctx context.Context, event []byte) ([]byte, error) {
	select {
	case e.slot <- struct{}{}:
	case <-e.exited:
		return nil, ErrExited
	case <-ctx.Done():
		return nil, fmt.Errorf("lambdarie: waiting for the emulator: %w", ctx.Err())
	}
	defer func() { <-e.slot }()
	if e.Exited() {
		return nil, ErrExited
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.timeout+invokeGrace)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.URL+InvokePath, bytes.NewReader(event))
	if err != nil {
		return nil, fmt.Errorf("lambdarie: %w", err)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		if e.Exited() {
			return nil, fmt.Errorf("lambdarie: invoke: %w (%w)", ErrExited, err)
		}
		// No answer: the emulator's state is unknown, so it takes no
		// further invocation.
		e.Stop()
		return nil, fmt.Errorf("lambdarie: invoke: no answer, emulator stopped: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("lambdarie: read response: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		fe := &FunctionError{Status: resp.StatusCode, Body: body}
		_ = json.Unmarshal(body, fe)
		return body, fe
	}
	if bytes.HasPrefix(body, []byte("Task timed out after")) {
		return body, &FunctionError{Status: resp.StatusCode, Type: "Sandbox.Timedout", Message: string(body), Body: body}
	}
	var probe struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &probe) == nil && probe.Type != "" && probe.Message != "" {
		return body, &FunctionError{Status: resp.StatusCode, Type: probe.Type, Message: probe.Message, Body: body}
	}
	return body, nil
}

// Exited reports whether the emulator process has ended.
func (e *Emulator) Exited() bool {
	select {
	case <-e.exited:
		return true
	default:
		return false
	}
}

// Pid is the emulator's process id (its function runs in the same process
// group).
func (e *Emulator) Pid() int { return e.cmd.Process.Pid }

// Stop ends the emulator and its function process. It is safe to call more
// than once and from several goroutines.
func (e *Emulator) Stop() {
	if e == nil || e.cmd == nil || e.cmd.Process == nil {
		return
	}
	e.stop.Do(func() { proc.Stop(e.cmd.Process.Pid, e.exited) })
}

// EnvFile reads a `sam local invoke --env-vars` file: a JSON object whose
// "Parameters" entry applies to every function and whose entry named by
// the function's logical id applies to that function (and wins).
func EnvFile(path, logicalID string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lambdarie: env file: %w", err)
	}
	var file map[string]map[string]any
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("lambdarie: env file %s: %w", path, err)
	}
	out := map[string]string{}
	for _, section := range []string{"Parameters", logicalID} {
		for k, v := range file[section] {
			switch x := v.(type) {
			case string:
				out[k] = x
			default:
				b, _ := json.Marshal(x)
				out[k] = string(b)
			}
		}
	}
	return out, nil
}
