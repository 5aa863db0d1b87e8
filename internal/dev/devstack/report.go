package devstack

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
)

// Outcome is what the runner decided for one record: the one "job outcome"
// line it logs per record.
type Outcome struct {
	Level    string `json:"level"`
	Outcome  string `json:"outcome"` // succeeded, noop, duplicate, parked, cancelled, dead-lettered, retry, claim-failed, …
	Reason   string `json:"reason"`
	JobID    string `json:"jobId"`
	Type     string `json:"type"`
	Key      string `json:"key"`
	Function string `json:"function"`
}

// outcomeMsg is the msg of the runner's outcome line.
const outcomeMsg = "job outcome"

// ParseOutcome reads an application log line; ok is false for any line
// that is not a job outcome.
func ParseOutcome(line []byte) (Outcome, bool) {
	if !bytes.Contains(line, []byte(outcomeMsg)) {
		return Outcome{}, false // most lines: no JSON decoding
	}
	var o struct {
		Msg string `json:"msg"`
		Outcome
	}
	if json.Unmarshal(line, &o) != nil || o.Msg != outcomeMsg || o.Outcome.Outcome == "" {
		return Outcome{}, false
	}
	return o.Outcome, true
}

// Reporter prints one line per job outcome and per mail sent, as `make run`
// shows them. A success that sent a mail is shown by its mail line alone.
type Reporter struct {
	// ShowInternal prints every outcome of runstwice's own jobs (Own):
	// without it, only those that went wrong (dead-lettered, retried, …).
	ShowInternal bool

	out    io.Writer
	now    func() time.Time
	mu     sync.Mutex
	mailed map[string]bool // job ids with a mail line, until their outcome
}

// NewReporter returns a Reporter writing to out.
func NewReporter(out io.Writer) *Reporter {
	return &Reporter{out: out, now: time.Now, mailed: map[string]bool{}}
}

// Mail prints a mail sent.
func (r *Reporter) Mail(m Mail) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.mailed) >= 10000 {
		clear(r.mailed) // outcomes that never came
	}
	if m.JobID != "" {
		r.mailed[m.JobID] = true
	}
	fmt.Fprintf(r.out, "%s  %-14s to=%s  subject=%q  link=%s  job=%s\n",
		m.Time.Format(time.TimeOnly), "mail sent", strings.Join(m.To, ","), m.Subject, cmp.Or(m.Link, "-"), cmp.Or(m.JobID, "-"))
}

// Outcome prints a job outcome.
func (r *Reporter) Outcome(o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	mailed := r.mailed[o.JobID]
	delete(r.mailed, o.JobID)
	if o.Outcome == "succeeded" && mailed || !r.ShowInternal && contract.Own(o.Type) && routine(o) {
		return
	}
	line := fmt.Sprintf("%s  %-14s %s  job=%s", r.now().Format(time.TimeOnly), o.Outcome, cmp.Or(o.Type, "-"), cmp.Or(o.JobID, "-"))
	if o.Reason != "" {
		line += fmt.Sprintf("  reason=%q", o.Reason)
	}
	fmt.Fprintln(r.out, line)
}

// routine reports an outcome of a job that went as it should (logged at
// INFO: succeeded, a no-op, a skip, a duplicate, a twin's retry), which
// `make run` leaves out for runstwice's own jobs unless ShowInternal.
func routine(o Outcome) bool { return o.Level == "" || o.Level == slog.LevelInfo.String() }

// OutcomeWriter returns a sink for application log lines (one line per
// Write, as lambdarie.Sinks deliver them) that writes each line to w and
// reports the job outcomes among them.
func (r *Reporter) OutcomeWriter(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if o, ok := ParseOutcome(p); ok {
			r.Outcome(o)
		}
		return w.Write(p)
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Logger returns a logger whose records Reporter prints as its other lines
// are printed: the time, the message, then key=value for each attribute
// (level=WARN or ERROR when above INFO). The stack gives it to the parts
// that log beside the job lines, such as the web view.
func (r *Reporter) Logger() *slog.Logger { return slog.New(&lineHandler{r: r}) }

// lineHandler is the slog.Handler of Reporter.Logger.
type lineHandler struct {
	r      *Reporter
	attrs  []slog.Attr // with their group prefix applied
	prefix string      // the open groups, "a.b."
}

func (h *lineHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *lineHandler) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %-14s", cmp.Or(rec.Time, h.r.now()).Format(time.TimeOnly), rec.Message)
	sep := "  "
	add := func(a slog.Attr) {
		fmt.Fprintf(&b, "%s%s=%s", sep, a.Key, quoteIfNeeded(a.Value.Resolve().String()))
		sep = " "
	}
	if rec.Level > slog.LevelInfo {
		add(slog.String("level", rec.Level.String()))
	}
	for _, a := range h.attrs {
		add(a)
	}
	rec.Attrs(func(a slog.Attr) bool {
		add(slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
		return true
	})
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	_, err := fmt.Fprintln(h.r.out, b.String())
	return err
}

func (h *lineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = slices.Clone(h.attrs)
	for _, a := range attrs {
		c.attrs = append(c.attrs, slog.Attr{Key: h.prefix + a.Key, Value: a.Value})
	}
	return &c
}

func (h *lineHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix += name + "."
	return &c
}

// quoteIfNeeded quotes a value that is empty or holds a space, a quote or
// an equals sign, as slog's text handler does.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\"=") {
		return strconv.Quote(s)
	}
	return s
}
