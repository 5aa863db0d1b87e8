package devstack

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/runstwice/runstwice/internal/dev/stack"
)

// EventSource is one SQS event source mapping of the template.
type EventSource struct {
	Function  string // directory under functions/
	QueueARN  string
	QueueURL  string
	BatchSize int32
	Window    time.Duration
}

// EventSources reads the SQS events of every function in the provisioned
// template, so the local pollers use the template's batch sizes and windows.
func EventSources(st *stack.Stack) ([]EventSource, error) {
	return sourcesOf(st, "SQS", func(e functionEvent, byARN map[string]stack.Physical) (EventSource, error) {
		arn, err := st.ResolveString(e.p["Queue"])
		if err != nil {
			return EventSource{}, fmt.Errorf("devstack: %s event %s: %w", e.id, e.name, err)
		}
		q, ok := byARN[arn]
		if !ok {
			return EventSource{}, fmt.Errorf("devstack: %s event %s: queue %s was not provisioned", e.id, e.name, arn)
		}
		src := EventSource{Function: functionDir(e.props), QueueARN: arn, QueueURL: q.URL, BatchSize: 10}
		if n, err := strconv.Atoi(fmt.Sprint(e.p["BatchSize"])); err == nil {
			src.BatchSize = int32(n)
		}
		if n, err := strconv.Atoi(fmt.Sprint(e.p["MaximumBatchingWindowInSeconds"])); err == nil {
			src.Window = time.Duration(n) * time.Second
		}
		return src, nil
	})
}

// functionEvent is one event of a function of the template.
type functionEvent struct {
	id, name string         // the function's logical id, the event's name
	props    map[string]any // the function's properties
	p        map[string]any // the event's properties
}

// sourcesOf reads, with read, each event of type typ ("SQS", "DynamoDB")
// of every function of st's template, in the order of their ids and names;
// read resolves it against the provisioned resources, byARN.
func sourcesOf[S any](st *stack.Stack, typ string, read func(e functionEvent, byARN map[string]stack.Physical) (S, error)) ([]S, error) {
	tmpl := st.Template()
	byARN := physicalByARN(st)
	var out []S
	for _, id := range tmpl.IDs(stack.TypeFunction) {
		props, err := tmpl.FunctionProperties(id)
		if err != nil {
			return nil, err
		}
		events, _ := props["Events"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(events)) {
			e, _ := events[name].(map[string]any)
			if e["Type"] != typ {
				continue
			}
			p, _ := e["Properties"].(map[string]any)
			src, err := read(functionEvent{id: id, name: name, props: props, p: p}, byARN)
			if err != nil {
				return nil, err
			}
			out = append(out, src)
		}
	}
	return out, nil
}
