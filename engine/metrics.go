package engine

import (
	"io"
	"log/slog"

	"github.com/runstwice/runstwice/internal/obs"
)

// Metrics counts the runner's outcomes per job type and writes them as
// CloudWatch embedded metric format (EMF) lines, one document per
// invocation (namespace runstwice). A nil *Metrics counts nothing.
type Metrics = obs.Metrics

// NewMetrics returns Metrics that write to w (os.Stdout in a Lambda, where
// CloudWatch Logs turns the lines into metrics).
func NewMetrics(w io.Writer) *Metrics { return obs.NewMetrics(w) }

// NewLogger returns the JSON logger the runner's records log through, at
// level ("debug", "info", "warn", "error"; info if empty).
func NewLogger(w io.Writer, level string) *slog.Logger { return obs.NewLogger(w, level) }

// DefaultMetrics returns Metrics that write to standard output, where a
// Lambda's CloudWatch Logs turn them into metrics.
func DefaultMetrics() *Metrics { return obs.DefaultMetrics() }
