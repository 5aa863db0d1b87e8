package engine

import (
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The metric names the engine and its adapters count. Job metrics have
// the dimensions stage and type.
const (
	JobsSucceeded = "JobsSucceeded"
	JobsDuplicate = "JobsDuplicate"
	JobsSkipped   = "JobsSkipped"
	JobsParked    = "JobsParked"
	// JobsFailed counts the deliveries whose work failed: retried, failed
	// on the final attempt (the job then reads Failed), or dead-lettered.
	// It counts attempts, not Failed jobs; the name is on the wire.
	JobsFailed  = "JobsFailed"
	DeadLetters = "DeadLetters"
	ClaimFailed = "ClaimFailed"
	// UnknownToggle is counted when a kill switch's toggle parameter names
	// no registered kind, and UnreadableToggle when its value cannot be
	// read; the names keep the parameters' word, toggle (on the wire).
	UnknownToggle    = "UnknownToggle"
	UnreadableToggle = "UnreadableToggle"
	// ToggleReadFailed is counted when the kill switches could not be read
	// at all (denied, throttled, unreachable); its type dimension is the
	// failure (the AWS error code, or "unreachable"), not a job type.
	ToggleReadFailed = "ToggleReadFailed"
	// ColdStart is counted once per execution environment, with the
	// dimensions stage and function.
	ColdStart = "ColdStart"
	// JobsNoop counts the jobs that succeeded without work, with the
	// dimensions stage, type and reason (CountReason): "user-not-found"
	// for most of a type's jobs means the users directory is the wrong one.
	JobsNoop = "JobsNoop"
	// JobsSnoozed counts the jobs re-sent with a delay because they must
	// wait (for a send slot of the SES rate), without spending a receive.
	JobsSnoozed = "JobsSnoozed"
)

// Metrics counts metrics during an invocation and writes them as
// CloudWatch embedded metric format (EMF) documents on Flush, under its
// Namespace. It is safe for concurrent use; a nil *Metrics discards
// everything.
type Metrics struct {
	// Stage and Function are the values of the stage and function
	// dimensions.
	Stage    string
	Function string
	// Namespace is the CloudWatch namespace the metrics are written under
	// (NewMetrics sets it).
	Namespace string

	mu     sync.Mutex
	w      io.Writer
	now    func() time.Time
	counts map[string]map[string]int // type → metric → count
	// byReason counts the metrics with a reason dimension: type → reason →
	// metric → count.
	byReason map[string]map[string]map[string]int
}

// coldStart is true until the first flush of this process.
var coldStart atomic.Bool

func init() { coldStart.Store(true) }

// NewMetrics returns metrics written to w (os.Stdout in a Lambda, where
// CloudWatch Logs turns the lines into metrics) under namespace.
func NewMetrics(w io.Writer, namespace string) *Metrics {
	return &Metrics{w: w, Namespace: namespace, now: time.Now, counts: map[string]map[string]int{}, byReason: map[string]map[string]map[string]int{}}
}

// DefaultMetrics is what a function uses: metrics on stdout (where
// CloudWatch Logs turns EMF documents into metrics) under namespace, for
// $STAGE and $AWS_LAMBDA_FUNCTION_NAME.
func DefaultMetrics(namespace string) *Metrics {
	m := NewMetrics(os.Stdout, namespace)
	m.Stage, m.Function = os.Getenv("STAGE"), os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	return m
}

// Count adds n to the metric name for a job type, to be written on Flush.
func (m *Metrics) Count(name, jobType string, n int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counts[jobType]
	if c == nil {
		c = map[string]int{}
		m.counts[jobType] = c
	}
	c[name] += n
}

// CountReason adds n to the metric name for a job type and a reason (a
// short, fixed name such as "user-not-found", never free text), written on
// Flush with the dimensions stage, type and reason.
func (m *Metrics) CountReason(name, jobType, reason string, n int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byReason[jobType] == nil {
		m.byReason[jobType] = map[string]map[string]int{}
	}
	c := m.byReason[jobType][reason]
	if c == nil {
		c = map[string]int{}
		m.byReason[jobType][reason] = c
	}
	c[name] += n
}

// emfMetric is one metric definition of an EMF document.
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

// Flush writes what was counted since the last flush, one EMF document per
// job type (and the process's first flush also writes ColdStart), and resets
// the counts. Call it once at the end of every invocation.
func (m *Metrics) Flush() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	stage := m.Stage
	if stage == "" {
		stage = "unknown"
	}
	ts := m.now().UnixMilli()
	if m.Function != "" && coldStart.CompareAndSwap(true, false) {
		m.write(ts, []string{"stage", "function"}, map[string]any{"stage": stage, "function": m.Function}, map[string]int{ColdStart: 1})
	}
	types := make([]string, 0, len(m.counts))
	for t := range m.counts {
		types = append(types, t)
	}
	slices.Sort(types)
	for _, t := range types {
		m.write(ts, []string{"stage", keyType}, map[string]any{"stage": stage, keyType: t}, m.counts[t])
	}
	for _, t := range slices.Sorted(maps.Keys(m.byReason)) {
		for _, r := range slices.Sorted(maps.Keys(m.byReason[t])) {
			m.write(ts, []string{"stage", keyType, keyReason}, map[string]any{"stage": stage, keyType: t, keyReason: r}, m.byReason[t][r])
		}
	}
	clear(m.counts)
	clear(m.byReason)
}

func (m *Metrics) write(ts int64, dims []string, doc map[string]any, counts map[string]int) {
	names := make([]string, 0, len(counts))
	for n := range counts {
		names = append(names, n)
	}
	slices.Sort(names)
	d := emfDirective{Namespace: m.Namespace, Dimensions: [][]string{dims}}
	for _, n := range names {
		d.Metrics = append(d.Metrics, emfMetric{Name: n, Unit: "Count"})
		doc[n] = counts[n]
	}
	doc["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{d}}
	b, err := json.Marshal(doc)
	if err != nil {
		return
	}
	_, _ = m.w.Write(append(b, '\n'))
}

// NewLogger returns the JSON logger the runner's records log through, at
// level ("debug", "info", "warn", "error"; info if empty).
func NewLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
