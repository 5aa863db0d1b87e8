package localapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// StackFile is the file in a running local stack's state directory
// (.devstack) that says how to reach it.
const StackFile = "stack.json"

// StackInfo is .devstack/stack.json: how to reach a running local stack.
type StackInfo struct {
	// Endpoint is the AWS endpoint (moto), "" when the stack runs on AWS.
	Endpoint string `json:"endpoint"`
	APIURL   string `json:"apiUrl"`
	// FunctionEndpoint is the AWS endpoint the stack's functions use (its
	// proxy, which sees the mail they send); "" on AWS. A function run
	// beside the stack (make invoke) uses it too, so its mail shows where
	// the stack's does.
	FunctionEndpoint string `json:"functionEndpoint,omitempty"`
	// WebhookURL is the stack's webhook receiver (its webhook function's
	// WEBHOOK_URL), and OTLPURL its OTLP/HTTP receiver of spans ("" when
	// traces are off): a function run beside the stack (make invoke) posts
	// and exports there too.
	WebhookURL string `json:"webhookUrl,omitempty"`
	OTLPURL    string `json:"otlpUrl,omitempty"`
	Stage      string `json:"stage"`
	Region     string `json:"region"`
	PID        int    `json:"pid"`
	// ToggleTTL is the stack's ToggleTtl parameter: how long its workers
	// cache a kill switch's value (a Go duration, e.g. "2s").
	ToggleTTL string `json:"toggleTtl,omitempty"`
}

// ReadStackInfo reads dir/stack.json and reports whether the stack it names
// is still running (its process is alive). A missing file is no error: ok
// is false.
func ReadStackInfo(dir string) (info StackInfo, ok bool, err error) {
	path := filepath.Join(dir, StackFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return StackInfo{}, false, nil
	}
	if err != nil {
		return StackInfo{}, false, err
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return StackInfo{}, false, fmt.Errorf("%s: %w", path, err)
	}
	return info, alive(info.PID), nil
}

// alive reports whether a process with pid exists.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
