package devstack

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
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
	if o.Outcome == "succeeded" && mailed {
		return
	}
	line := fmt.Sprintf("%s  %-14s %s  job=%s", r.now().Format(time.TimeOnly), o.Outcome, cmp.Or(o.Type, "-"), cmp.Or(o.JobID, "-"))
	if o.Reason != "" {
		line += fmt.Sprintf("  reason=%q", o.Reason)
	}
	fmt.Fprintln(r.out, line)
}

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
