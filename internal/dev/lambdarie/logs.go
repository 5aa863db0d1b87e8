package lambdarie

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// Sinks are where a function's output goes, sorted line by line. Each Write
// to a sink is exactly one complete line, ending in a newline. A nil sink
// discards its lines.
type Sinks struct {
	// App receives the application's JSON log lines: JSON objects that are
	// not metric documents. A line without a "function" field gets one.
	App io.Writer
	// Metrics receives Embedded Metric Format documents (JSON objects with
	// an "_aws" key).
	Metrics io.Writer
	// Emulator receives everything else: the emulator's own lines, the
	// platform's START/END/REPORT lines and any output that is not a JSON
	// object.
	Emulator io.Writer
}

// maxLine is the longest line kept whole; a longer one is cut there.
const maxLine = 1 << 20

// Splitter is an io.Writer that sorts what a function writes into Sinks.
// Give it as Config.Output.
type Splitter struct {
	function string
	sinks    Sinks
	mu       sync.Mutex
	buf      []byte
}

// NewSplitter returns a Splitter for the function named function (the name
// added to JSON lines that lack one).
func NewSplitter(function string, sinks Sinks) *Splitter {
	return &Splitter{function: function, sinks: sinks}
}

// Write implements io.Writer: it sorts every complete line and keeps a
// partial one for the next Write.
func (s *Splitter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			if len(s.buf) >= maxLine {
				s.line(s.buf)
				s.buf = s.buf[:0]
			}
			break
		}
		s.line(s.buf[:i])
		s.buf = s.buf[i+1:]
	}
	if len(s.buf) == 0 {
		s.buf = nil // release the backing array between bursts
	}
	return len(p), nil
}

// Flush sorts a last line that has no newline.
func (s *Splitter) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.buf) > 0 {
		s.line(s.buf)
		s.buf = nil
	}
}

func (s *Splitter) line(b []byte) {
	b = bytes.TrimRight(b, "\r")
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	kind, out := Classify(s.function, b)
	var w io.Writer
	switch kind {
	case LineApp:
		w = s.sinks.App
	case LineMetrics:
		w = s.sinks.Metrics
	default:
		w = s.sinks.Emulator
	}
	if w != nil {
		// A copy: out may share the buffer's backing array.
		_, _ = w.Write(append(append(make([]byte, 0, len(out)+1), out...), '\n'))
	}
}

// LineKind is what a line of function output is.
type LineKind int

// The kinds of lines.
const (
	LineEmulator LineKind = iota // emulator, platform or other non-JSON output
	LineApp                      // an application JSON log line
	LineMetrics                  // an EMF metric document
)

// Classify tells what one line (without its newline) is and returns it as
// it should be stored: an application line without a "function" field gets
// one naming function.
func Classify(function string, line []byte) (LineKind, []byte) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		return LineEmulator, line
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(trimmed, &fields) != nil {
		return LineEmulator, line
	}
	if _, ok := fields["_aws"]; ok {
		return LineMetrics, trimmed
	}
	if _, ok := fields["function"]; ok || function == "" {
		return LineApp, trimmed
	}
	name, _ := json.Marshal(function)
	out := make([]byte, 0, len(trimmed)+len(name)+13)
	out = append(out, `{"function":`...)
	out = append(out, name...)
	if len(fields) > 0 {
		out = append(out, ',')
	}
	out = append(out, trimmed[1:]...)
	return LineApp, out
}
