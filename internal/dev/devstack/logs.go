package devstack

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// openLogs opens the three function logs for append (a log is never
// truncated) and returns the sinks that sort function output into them.
func (l *Local) openLogs(dir string) (lambdarie.Sinks, error) {
	var ws [3]io.Writer
	for i, name := range []string{FunctionsLog, MetricsLog, EmulatorLog} {
		w, err := l.openLog(dir, name)
		if err != nil {
			return lambdarie.Sinks{}, err
		}
		ws[i] = w
	}
	return lambdarie.Sinks{App: ws[0], Metrics: ws[1], Emulator: ws[2]}, nil
}

// The msg of the lines that mark where a run of the stack starts and ends
// in functions.log, which every run appends to: a run's lines are those
// between its "run started" line and the next one.
const (
	RunStartedMsg = "run started"
	RunStoppedMsg = "run stopped"
)

// RunFunction is the function field of the run marks, so that every line
// of functions.log names who wrote it.
const RunFunction = "devstack"

// newRunID names one run of the stack: its start time (UTC, to the second)
// and four random bytes, so two runs started in the same second differ.
func newRunID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// runMarker writes the run marks into w, in the functions' JSON format.
func runMarker(w io.Writer, runID string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil)).With("function", RunFunction, "runId", runID)
}

func (l *Local) openLog(dir, name string) (io.Writer, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("devstack: %w", err)
	}
	l.logs = append(l.logs, f)
	return &lockedWriter{w: f}, nil
}

// lockedWriter serializes writes from several processes' output. It has
// the form of testkit.Buffer on purpose, not its use: it wraps a log file,
// and a test kit is no dependency of the running stack.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// awsEnv is what the functions need to reach the same AWS as the stack.
func awsEnv(useAWS bool, endpoint string) map[string]string {
	env := map[string]string{"AWS_REGION": moto.Region, "AWS_DEFAULT_REGION": moto.Region}
	if useAWS {
		for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"} {
			if v := os.Getenv(k); v != "" {
				env[k] = v
			}
		}
		return env
	}
	env["AWS_ENDPOINT_URL"] = endpoint
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = moto.AccessKeyID, moto.SecretAccessKey
	return env
}
