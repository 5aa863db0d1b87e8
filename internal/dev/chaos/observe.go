package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/internal/dev/devstack"
)

// invocation is one batch a poller handed to a function.
type invocation struct {
	Function   string
	Start, End time.Time
	// JobIDs are the job ids of an SQS batch; Records counts the batch's
	// records (SQS messages or stream records).
	JobIDs  []string
	Records int
	// Lost: the invocation returned no response (its process died, or it
	// timed out), so its whole batch comes back after the visibility
	// timeout.
	Lost bool
}

// kill is one killpoint line: a function process killed at a step.
type kill struct {
	Step string    `json:"step"`
	Time time.Time `json:"time"`
}

// observer sees what the stack does: every invocation of a polled function
// (devstack.Chaos.WrapFunction) and every application log line
// (devstack.Chaos.AppLog). It is safe for concurrent use.
type observer struct {
	now      func() time.Time
	inFlight atomic.Int64
	mu       sync.Mutex
	calls    []invocation
	kills    []kill
	outcomes map[string][]outcome // by job id
	records  map[string]int       // records delivered, by function
	// refused are the users the fan-out refused with their reason, by
	// week and the start of the id's SHA-256 (digest's refusal line).
	refused map[string]string
}

func newObserver() *observer {
	return &observer{now: time.Now, outcomes: map[string][]outcome{}, records: map[string]int{}, refused: map[string]string{}}
}

// outcome is one job outcome line of the runner, with when its function
// wrote it, so that the line can be tied to the invocation it came from
// (an invocation of Line.Function, running at At, with Line.JobID in its
// batch).
type outcome struct {
	Line devstack.Outcome
	// At is the line's own time (slog's "time"): the moment the function
	// logged it. It is the time the observer read the line when the line
	// has none.
	At time.Time
}

// wrap is devstack.Chaos.WrapFunction.
func (o *observer) wrap(function string, inv devstack.Invoker) devstack.Invoker {
	return invokerFunc(func(ctx context.Context, payload []byte) ([]byte, error) {
		call := invocation{Function: function, Start: o.now(), JobIDs: batchJobIDs(payload), Records: recordCount(payload)}
		o.inFlight.Add(1)
		out, err := inv.Invoke(ctx, payload)
		o.inFlight.Add(-1)
		call.End, call.Lost = o.now(), err != nil
		o.mu.Lock()
		o.calls = append(o.calls, call)
		o.records[function] += call.Records
		o.mu.Unlock()
		return out, err
	})
}

type invokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// batchJobIDs reads the job ids (envelope messageIds) of an SQS event;
// a record whose body is no envelope is left out.
func batchJobIDs(payload []byte) []string {
	var ev events.SQSEvent
	if json.Unmarshal(payload, &ev) != nil {
		return nil
	}
	ids := make([]string, 0, len(ev.Records))
	for _, r := range ev.Records {
		var env struct {
			MessageID string `json:"messageId"`
		}
		if json.Unmarshal([]byte(r.Body), &env) == nil && env.MessageID != "" {
			ids = append(ids, env.MessageID)
		}
	}
	return ids
}

// recordCount is how many records an event holds (an SQS batch or a
// DynamoDB stream batch).
func recordCount(payload []byte) int {
	var ev struct {
		Records []json.RawMessage
	}
	_ = json.Unmarshal(payload, &ev)
	return len(ev.Records)
}

// Write is devstack.Chaos.AppLog: one application log line per call.
func (o *observer) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(`"killpoint"`)) {
		var k struct {
			Msg      string `json:"msg"`
			Step     string `json:"step"`
			Function string `json:"function"`
		}
		if json.Unmarshal(p, &k) == nil && k.Msg == devstack.KillLineMsg {
			if k.Step == devstack.StepMidInvocation {
				// A kill from outside: its function says which.
				k.Step = k.Function + " " + k.Step
			}
			o.mu.Lock()
			o.kills = append(o.kills, kill{Step: k.Step, Time: o.now()})
			o.mu.Unlock()
		}
		return len(p), nil
	}
	if bytes.Contains(p, []byte(`"userIdSha256"`)) {
		var r struct{ DigestID, UserIDSha256, Reason string }
		if json.Unmarshal(p, &r) == nil && r.Reason != "" {
			o.mu.Lock()
			o.refused[r.DigestID+"/"+r.UserIDSha256] = r.Reason
			o.mu.Unlock()
		}
		return len(p), nil
	}
	if out, ok := devstack.ParseOutcome(p); ok && out.JobID != "" {
		line := outcome{Line: out, At: loggedAt(p)}
		o.mu.Lock()
		if line.At.IsZero() {
			line.At = o.now()
		}
		o.outcomes[out.JobID] = append(o.outcomes[out.JobID], line)
		o.mu.Unlock()
	}
	return len(p), nil
}

// loggedAt reads the time of a JSON log line (slog's "time"), or the zero
// time. The line reaches the observer through the function's output pipe,
// possibly after its invocation has returned; its own time is when it was
// written, inside the invocation.
func loggedAt(line []byte) time.Time {
	var l struct {
		Time time.Time `json:"time"`
	}
	if json.Unmarshal(line, &l) != nil {
		return time.Time{}
	}
	return l.Time
}

// refusal returns the reason the fan-out gave for refusing the user whose
// id's SHA-256 starts with sha in week ("" when it gave none).
func (o *observer) refusal(week, sha string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refused[week+"/"+sha]
}

// awaitOutcome waits up to timeout until the runner logged an outcome of
// job id, and reports whether it did.
func (o *observer) awaitOutcome(ctx context.Context, id string, timeout time.Duration) bool {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline) && ctx.Err() == nil; {
		o.mu.Lock()
		n := len(o.outcomes[id])
		o.mu.Unlock()
		if n > 0 {
			return true
		}
		_ = smithytime.SleepWithContext(ctx, 100*time.Millisecond)
	}
	return false
}

// seen is a copy of what the observer saw so far.
type seen struct {
	Calls    []invocation
	Kills    []kill
	Outcomes map[string][]outcome // by job id
	Records  map[string]int
}

func (o *observer) snapshot() seen {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := seen{Calls: append([]invocation(nil), o.calls...), Kills: append([]kill(nil), o.kills...),
		Outcomes: make(map[string][]outcome, len(o.outcomes)), Records: make(map[string]int, len(o.records))}
	for k, v := range o.outcomes {
		s.Outcomes[k] = append([]outcome(nil), v...)
	}
	for k, v := range o.records {
		s.Records[k] = v
	}
	return s
}

// killCount is how many kills the observer saw.
func (o *observer) killCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.kills)
}

// killsAt is how many kills at step the observer saw.
func (o *observer) killsAt(step string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, k := range o.kills {
		if k.Step == step {
			n++
		}
	}
	return n
}
