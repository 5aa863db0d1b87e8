package lambdarie

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// lines is a sink that keeps each Write and checks it is one whole line.
type lines struct {
	t   *testing.T
	got []string
}

func (l *lines) Write(p []byte) (int, error) {
	if bytes.Count(p, []byte("\n")) != 1 || p[len(p)-1] != '\n' {
		l.t.Errorf("a sink got %q; want exactly one line", p)
	}
	l.got = append(l.got, string(p[:len(p)-1]))
	return len(p), nil
}

func TestSplitterSortsLines(t *testing.T) {
	app, metrics, emu := &lines{t: t}, &lines{t: t}, &lines{t: t}
	s := NewSplitter("email", Sinks{App: app, Metrics: metrics, Emulator: emu})
	out := strings.Join([]string{
		`START RequestId: 1 Version: $LATEST`,
		`{"time":"t","level":"INFO","msg":"job outcome","function":"email","jobId":"j1"}`,
		`{"level":"INFO","msg":"no function field"}`,
		`{}`,
		`{"_aws":{"Timestamp":1,"CloudWatchMetrics":[]},"JobsParked":1}`,
		`30 Nov 2026 21:26:40,004 [INFO] (rapid) INIT START(type: on-demand, phase: init)`,
		`{"broken json`,
		`[1,2]`,
		``,
		`REPORT RequestId: 1	Duration: 3.77 ms`,
	}, "\n") + "\n" + `{"msg":"partial"}`
	// Written in odd pieces, as a pipe delivers them.
	for len(out) > 0 {
		n := min(len(out), 7)
		if _, err := s.Write([]byte(out[:n])); err != nil {
			t.Fatal(err)
		}
		out = out[n:]
	}
	if len(app.got) != 3 {
		t.Fatalf("app lines %q; want 3 (the partial one not yet)", app.got)
	}
	s.Flush()
	if len(app.got) != 4 {
		t.Fatalf("app lines %q; want 4 after Flush", app.got)
	}
	for _, l := range app.got {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("app line %q: %v", l, err)
		}
		if m["function"] != "email" {
			t.Errorf("app line %q: function = %v; want email", l, m["function"])
		}
	}
	if len(metrics.got) != 1 || !strings.Contains(metrics.got[0], "JobsParked") {
		t.Errorf("metrics %q; want the EMF document", metrics.got)
	}
	wantEmu := []string{"START RequestId", "30 Nov 2026", `{"broken json`, `[1,2]`, "REPORT RequestId"}
	if len(emu.got) != len(wantEmu) {
		t.Fatalf("emulator lines %q; want %d", emu.got, len(wantEmu))
	}
	for i, w := range wantEmu {
		if !strings.HasPrefix(emu.got[i], w) {
			t.Errorf("emulator line %d = %q; want it to start with %q", i, emu.got[i], w)
		}
	}
}

func TestClassifyKeepsAnExistingFunction(t *testing.T) {
	for _, tc := range []struct {
		line string
		kind LineKind
		want string
	}{
		{`{"function":"enqueue","msg":"x"}`, LineApp, `{"function":"enqueue","msg":"x"}`},
		{`  {"msg":"x"}  `, LineApp, `{"function":"dlq","msg":"x"}`},
		{`{}`, LineApp, `{"function":"dlq"}`},
		{`{"_aws":{}}`, LineMetrics, `{"_aws":{}}`},
		{`plain text`, LineEmulator, `plain text`},
		{`{`, LineEmulator, `{`},
	} {
		kind, got := Classify("dlq", []byte(tc.line))
		if kind != tc.kind || string(got) != tc.want {
			t.Errorf("Classify(%q) = %v %q; want %v %q", tc.line, kind, got, tc.kind, tc.want)
		}
	}
}

func TestSplitterCutsAnEndlessLine(t *testing.T) {
	emu := &lines{t: t}
	s := NewSplitter("f", Sinks{Emulator: emu})
	if _, err := s.Write(bytes.Repeat([]byte("x"), maxLine+10)); err != nil {
		t.Fatal(err)
	}
	if len(emu.got) != 1 || len(emu.got[0]) != maxLine+10 {
		t.Fatalf("got %d lines; want the long one cut out once", len(emu.got))
	}
}
