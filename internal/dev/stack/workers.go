package stack

import (
	"fmt"
	"slices"
	"strings"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

// WorkQueueIDs returns the logical id of each work queue of the template,
// by the contract queue it is: the queue named "${AWS::StackName}-<queue>".
func (t *Template) WorkQueueIDs() map[message.Queue]string {
	out := map[message.Queue]string{}
	for _, id := range t.IDs(TypeQueue) {
		name, ok := strings.CutPrefix(subString(t.Resources[id].Properties["QueueName"]), "${AWS::StackName}-")
		if q := message.Queue(name); ok && slices.Contains(contract.Queues, q) {
			out[q] = id
		}
	}
	return out
}

// ConsumedQueues returns the work queues that the function whose CodeUri is
// dir has an SQS event source on, in contract.Queues order.
func (t *Template) ConsumedQueues(dir string) ([]message.Queue, error) {
	fn, ok := t.FunctionByCodeURI(dir)
	if !ok {
		return nil, fmt.Errorf("stack: no function with CodeUri %s", dir)
	}
	props, err := t.FunctionProperties(fn)
	if err != nil {
		return nil, err
	}
	sources := map[string]bool{}
	for _, e := range asMap(props["Events"]) {
		if ev := asMap(e); str(ev["Type"]) == "SQS" {
			sources[getAttID(asMap(ev["Properties"])["Queue"], "Arn")] = true
		}
	}
	var out []message.Queue
	for q, id := range t.WorkQueueIDs() {
		if sources[id] {
			out = append(out, q)
		}
	}
	slices.SortFunc(out, func(a, b message.Queue) int {
		return slices.Index(contract.Queues, a) - slices.Index(contract.Queues, b)
	})
	return out, nil
}

// WorkerProblems checks a worker function (CodeUri dir) that says it
// consumes the queues consumes and handles the types handles reports:
// its event sources in the template are exactly those queues, and it
// handles exactly the registered types sent to them. So a type can only be
// registered with a worker that runs it, and on a queue that worker reads.
func (t *Template) WorkerProblems(dir string, consumes []message.Queue, types []message.JobType, handles func(string) bool) []string {
	got, err := t.ConsumedQueues(dir)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	want := slices.Clone(consumes)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("%s consumes %v, but its event sources in template.yaml are the queues %v", dir, consumes, got))
	}
	for _, jt := range types {
		switch on := slices.Contains(consumes, jt.Queue); {
		case on && !handles(jt.Name):
			problems = append(problems, fmt.Sprintf("%s is sent to %s, which %s consumes, but %s has no handler for it (see docs/job-types.md)", jt.Name, jt.Queue, dir, dir))
		case !on && handles(jt.Name):
			problems = append(problems, fmt.Sprintf("%s has a handler in %s, but its queue %s is not one %s consumes", jt.Name, dir, jt.Queue, dir))
		}
	}
	return problems
}

// getAttID returns X of {"Fn::GetAtt": [X, attr]}.
func getAttID(v any, attr string) string {
	ga, _ := asMap(v)["Fn::GetAtt"].([]any)
	if len(ga) == 2 && str(ga[1]) == attr {
		return str(ga[0])
	}
	return ""
}

// subString returns the template string of v when v is a plain string or a
// !Sub without variables ("" otherwise).
func subString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	s, _ := asMap(v)["Fn::Sub"].(string)
	return s
}
