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
	"strconv"
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

// Count records n of the metric name for a job type.
func (m *Metrics) Count(name, jobType string, n int) {
	if m == nil {
		return
	}
	// Hand-assembled to keep the hot path cheap; the test checks it parses
	// as the EMF document CloudWatch expects.
	b := make([]byte, 0, 256)
	b = append(b, `{"_aws":{"Timestamp":`...)
	b = strconv.AppendInt(b, m.now().UnixMilli(), 10)
	b = append(b, `,"CloudWatchMetrics":[{"Namespace":"`+Namespace+`","Dimensions":[["`+KeyType+`"]],"Metrics":[{"Name":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"Unit":"Count"}]}]},"`+KeyType+`":`...)
	b = appendJSONString(b, jobType)
	b = append(b, ',')
	b = appendJSONString(b, name)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, '}', '\n')
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.w.Write(b)
}

// appendJSONString appends s as a JSON string. Plain printable ASCII (every
// type and metric name) is quoted directly; anything else goes through
// encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
