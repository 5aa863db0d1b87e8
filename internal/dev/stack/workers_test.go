package stack

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/message"
)

// Every work queue of the contract is a queue of the template, and exactly
// one function consumes it: a queue nobody reads would hold its jobs until
// they expire.
func TestEveryWorkQueueHasOneWorker(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	ids := tmpl.WorkQueueIDs()
	consumers := map[message.Queue][]string{}
	for _, fn := range tmpl.IDs(TypeFunction) {
		dir := str(tmpl.Resources[fn].Properties["CodeUri"])
		qs, err := tmpl.ConsumedQueues(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			consumers[q] = append(consumers[q], fn)
		}
	}
	for _, q := range contract.Queues {
		if ids[q] == "" {
			t.Errorf("work queue %s has no AWS::SQS::Queue named ${AWS::StackName}-%s in template.yaml", q, q)
		}
		if len(consumers[q]) != 1 {
			t.Errorf("work queue %s is consumed by %v; want exactly one function", q, consumers[q])
		}
	}
}

// WorkerProblems catches a worker whose event sources are not its queues, a
// type on its queue it does not handle, and a handler of a type it never
// receives.
func TestWorkerProblemsCatchMistakes(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	onCritical := message.JobType{Name: "a.b.v1", Queue: contract.QueueCritical}
	onWebhooks := message.JobType{Name: "c.d.v1", Queue: contract.QueueWebhooks}
	types := []message.JobType{onCritical, onWebhooks}
	only := func(name string) func(string) bool { return func(n string) bool { return n == name } }
	for _, tc := range []struct {
		name     string
		consumes []message.Queue
		handles  func(string) bool
		want     string
	}{
		{"right", []message.Queue{contract.QueueWebhooks}, only(onWebhooks.Name), ""},
		{"other queues", []message.Queue{contract.QueueCritical}, only(onCritical.Name), "event sources in template.yaml are the queues [webhooks]"},
		{"no handler", []message.Queue{contract.QueueWebhooks}, only("none"), "c.d.v1 is sent to webhooks, which functions/webhook consumes, but"},
		{"stray handler", []message.Queue{contract.QueueWebhooks}, func(string) bool { return true }, "a.b.v1 has a handler in functions/webhook, but its queue critical"},
	} {
		got := strings.Join(tmpl.WorkerProblems("functions/webhook", tc.consumes, types, tc.handles), "\n")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: problems %q; want %q", tc.name, got, tc.want)
		}
	}
}
