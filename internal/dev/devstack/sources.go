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
	evs, err := functionEvents(st, "SQS")
	if err != nil {
		return nil, err
	}
	byARN := physicalByARN(st)
	var out []EventSource
	for _, e := range evs {
		arn, err := st.ResolveString(e.p["Queue"])
		if err != nil {
			return nil, fmt.Errorf("devstack: %s event %s: %w", e.id, e.name, err)
		}
		q, ok := byARN[arn]
		if !ok {
			return nil, fmt.Errorf("devstack: %s event %s: queue %s was not provisioned", e.id, e.name, arn)
		}
		src := EventSource{Function: functionDir(e.props), QueueARN: arn, QueueURL: q.URL, BatchSize: 10}
		if n, err := strconv.Atoi(fmt.Sprint(e.p["BatchSize"])); err == nil {
			src.BatchSize = int32(n)
		}
		if n, err := strconv.Atoi(fmt.Sprint(e.p["MaximumBatchingWindowInSeconds"])); err == nil {
			src.Window = time.Duration(n) * time.Second
		}
		out = append(out, src)
	}
	return out, nil
}

// functionEvent is one event of a function of the template.
type functionEvent struct {
	id, name string         // the function's logical id, the event's name
	props    map[string]any // the function's properties
	p        map[string]any // the event's properties
}

// functionEvents returns the events of type typ ("SQS", "DynamoDB") of
// every function of st's template, in the order of their ids and names.
func functionEvents(st *stack.Stack, typ string) ([]functionEvent, error) {
	tmpl := st.Template()
	var out []functionEvent
	for _, id := range tmpl.IDs(stack.TypeFunction) {
		props, err := tmpl.FunctionProperties(id)
		if err != nil {
			return nil, err
		}
		events, _ := props["Events"].(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(events)) {
			e, _ := events[name].(map[string]any)
			if e["Type"] == typ {
				p, _ := e["Properties"].(map[string]any)
				out = append(out, functionEvent{id: id, name: name, props: props, p: p})
			}
		}
	}
	return out, nil
}
