// Package obs is how runstwice is observed: JSON logs through log/slog and
// CloudWatch metrics as Embedded Metric Format (EMF) log lines, so no
// CloudWatch API is ever called from a function.
//
// Every job log line carries correlationId, messageId, type and the Lambda
// request id; every metric has the dimension type.
package obs

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Namespace is the CloudWatch namespace of every runstwice metric.
const Namespace = "runstwice"

// The metric names (DESIGN §6).
const (
	JobsSucceeded = "JobsSucceeded"
	JobsDuplicate = "JobsDuplicate"
	JobsSkipped   = "JobsSkipped"
	JobsParked    = "JobsParked"
	JobsFailed    = "JobsFailed"
	DeadLetters   = "DeadLetters"
	UnknownToggle = "UnknownToggle"
)

// Log attribute keys shared by every component.
const (
	KeyCorrelationID = "correlationId"
	KeyMessageID     = "messageId"
	KeyType          = "type"
	KeyRequestID     = "requestId"
)

// NewLogger returns a JSON logger writing to w at the level named by level
// ("debug", "info", "warn", "error"; info when empty or unknown).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// DefaultLogger is NewLogger(os.Stdout, $LOG_LEVEL): what functions use.
func DefaultLogger() *slog.Logger { return NewLogger(os.Stdout, os.Getenv("LOG_LEVEL")) }

// WithRequest returns l with the Lambda request id of ctx, when there is one.
func WithRequest(ctx context.Context, l *slog.Logger) *slog.Logger {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		return l.With(KeyRequestID, lc.AwsRequestID)
	}
	return l
}

// Metrics writes EMF metric lines. It is safe for concurrent use; a nil
// *Metrics discards everything.
type Metrics struct {
	mu  sync.Mutex
	w   io.Writer
	now func() time.Time
}

// NewMetrics returns metrics written to w (os.Stdout in a Lambda function,
// where CloudWatch Logs turns EMF lines into metrics).
func NewMetrics(w io.Writer) *Metrics { return &Metrics{w: w, now: time.Now} }

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Count records n of the metric name for a job type.
func (m *Metrics) Count(name, jobType string, n int) {
	if m == nil {
		return
	}
	line := map[string]any{
		"_aws": emfMeta{
			Timestamp:         m.now().UnixMilli(),
			CloudWatchMetrics: []emfDirective{{Namespace: Namespace, Dimensions: [][]string{{KeyType}}, Metrics: []emfMetric{{Name: name, Unit: "Count"}}}},
		},
		KeyType: jobType,
		name:    n,
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.w.Write(append(b, '\n'))
}
