package devstack

import (
	"bytes"
	"encoding/json"
	"regexp"
	"testing"
	"time"
)

// The run marks are JSON lines of functions.log that name the run: two runs
// started in the same second get different ids, and a mark is no job
// outcome.
func TestRunMarks(t *testing.T) {
	now := time.Date(2026, 12, 1, 14, 45, 51, 0, time.FixedZone("CET", 3600))
	first, second := newRunID(now), newRunID(now)
	if first == second {
		t.Fatalf("two runs in one second got the same id %q", first)
	}
	if !regexp.MustCompile(`^20261201T134551Z-[0-9a-f]{8}$`).MatchString(first) {
		t.Fatalf("run id %q; want the UTC start time and 8 hex digits", first)
	}
	var buf bytes.Buffer
	log := runMarker(&buf, first)
	log.Info(RunStartedMsg, "pid", 42)
	log.Info(RunStoppedMsg)
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines; want 2:\n%s", len(lines), buf.Bytes())
	}
	for i, want := range []string{RunStartedMsg, RunStoppedMsg} {
		var line map[string]any
		if err := json.Unmarshal(lines[i], &line); err != nil {
			t.Fatalf("line %d is not JSON: %v: %s", i, err, lines[i])
		}
		if line["msg"] != want || line["runId"] != first || line["function"] != RunFunction || line["time"] == nil {
			t.Errorf("line %d = %v; want msg %q, runId %q, function %q and a time", i, line, want, first, RunFunction)
		}
		if _, ok := ParseOutcome(lines[i]); ok {
			t.Errorf("line %d reads as a job outcome: %s", i, lines[i])
		}
	}
}
