package otlp

import (
	"cmp"
	"slices"
	"time"
)

// Placed is one span of a waterfall: how deep it sits under its parents,
// when it started after the trace's first span, and how long it took.
type Placed struct {
	Span
	Depth    int
	Offset   time.Duration
	Duration time.Duration
	// ParentMissing: it names a parent the spans do not hold (a copy of
	// another trace).
	ParentMissing bool
}

// Waterfall orders spans as a tree, each under its parent and children by
// start time (a span whose parent is not among them is a root), and places
// each on the trace's time line; total is from the first start to the last
// end.
func Waterfall(spans []Span) (rows []Placed, total time.Duration) {
	if len(spans) == 0 {
		return nil, 0
	}
	byID := map[string]bool{}
	children := map[string][]Span{}
	start, end := spans[0].StartTime, spans[0].EndTime
	for _, s := range spans {
		byID[s.SpanID] = true
		if s.StartTime.Before(start) {
			start = s.StartTime
		}
		if s.EndTime.After(end) {
			end = s.EndTime
		}
	}
	var roots []Span
	for _, s := range spans {
		if byID[s.ParentSpanID] && s.ParentSpanID != s.SpanID {
			children[s.ParentSpanID] = append(children[s.ParentSpanID], s)
		} else {
			roots = append(roots, s)
		}
	}
	byStart := func(a, b Span) int { return cmp.Or(a.StartTime.Compare(b.StartTime), cmp.Compare(a.SpanID, b.SpanID)) }
	seen := map[string]bool{}
	var walk func(s Span, depth int)
	walk = func(s Span, depth int) {
		if seen[s.SpanID] {
			return
		}
		seen[s.SpanID] = true
		rows = append(rows, Placed{Span: s, Depth: depth, Offset: s.StartTime.Sub(start), Duration: s.EndTime.Sub(s.StartTime),
			ParentMissing: s.ParentSpanID != "" && !byID[s.ParentSpanID]})
		kids := children[s.SpanID]
		slices.SortFunc(kids, byStart)
		for _, k := range kids {
			walk(k, depth+1)
		}
	}
	slices.SortFunc(roots, byStart)
	for _, r := range roots {
		walk(r, 0)
	}
	return rows, end.Sub(start)
}

// Name returns the name of span id among spans ("" when it is not there).
func Name(spans []Span, id string) string {
	for _, s := range spans {
		if s.SpanID == id {
			return s.Name
		}
	}
	return ""
}
