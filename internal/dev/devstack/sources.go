package devstack

import (
	"fmt"
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
	tmpl := st.Template()
	byARN := physicalByARN(st)
	var out []EventSource
	for _, id := range tmpl.IDs(stack.TypeFunction) {
		props, err := tmpl.FunctionProperties(id)
		if err != nil {
			return nil, err
		}
		fn := functionDir(props)
		events, _ := props["Events"].(map[string]any)
		for name, ev := range events {
			e, _ := ev.(map[string]any)
			if e["Type"] != "SQS" {
				continue
			}
			p, _ := e["Properties"].(map[string]any)
			arn, err := st.ResolveString(p["Queue"])
			if err != nil {
				return nil, fmt.Errorf("devstack: %s event %s: %w", id, name, err)
			}
			q, ok := byARN[arn]
			if !ok {
				return nil, fmt.Errorf("devstack: %s event %s: queue %s was not provisioned", id, name, arn)
			}
			src := EventSource{Function: fn, QueueARN: arn, QueueURL: q.URL, BatchSize: 10}
			if n, err := strconv.Atoi(fmt.Sprint(p["BatchSize"])); err == nil {
				src.BatchSize = int32(n)
			}
			if n, err := strconv.Atoi(fmt.Sprint(p["MaximumBatchingWindowInSeconds"])); err == nil {
				src.Window = time.Duration(n) * time.Second
			}
			out = append(out, src)
		}
	}
	return out, nil
}
