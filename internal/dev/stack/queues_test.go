package stack

import (
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/jobs"
)

// sourcesOf returns, per dead-letter queue, the queues whose RedrivePolicy
// targets it.
func sourcesOf(t *Template) map[string][]string {
	out := map[string][]string{}
	for _, id := range t.IDs(TypeQueue) {
		if dl := getAttID(asMap(t.Resources[id].Properties["RedrivePolicy"])["deadLetterTargetArn"], "Arn"); dl != "" {
			out[dl] = append(out[dl], id)
		}
	}
	return out
}

// checkDeadLetterAllowList: the DLQ accepts letters only from the work
// queues. Its RedriveAllowPolicy is byQueue and names exactly the queues
// whose RedrivePolicy targets it, each ARN built with !Sub from the queue's
// fixed name (a !GetAtt would make the work queue → DLQ → work queue
// dependency circular).
func checkDeadLetterAllowList(t *Template) []string {
	var problems findings
	bad := problems.add
	for dlq, sources := range sourcesOf(t) {
		rap := asMap(t.Resources[dlq].Properties["RedriveAllowPolicy"])
		if got := str(rap["redrivePermission"]); got != "byQueue" {
			bad("%s: RedriveAllowPolicy.redrivePermission is %q, want byQueue (any queue of the account could dead-letter into it)", dlq, got)
			continue
		}
		var want, got []string
		for _, src := range sources {
			want = append(want, "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:"+subString(t.Resources[src].Properties["QueueName"]))
		}
		for _, a := range list(rap["sourceQueueArns"]) {
			got = append(got, subString(a))
		}
		sort.Strings(want)
		sort.Strings(got)
		if !slices.Equal(got, want) {
			bad("%s: RedriveAllowPolicy.sourceQueueArns %q, want exactly the work queues %q", dlq, got, want)
		}
	}
	return problems.sorted()
}

// retention returns a queue's MessageRetentionPeriod (SQS's default of 4
// days when unset).
func retention(p map[string]any) time.Duration {
	if _, ok := p["MessageRetentionPeriod"]; !ok {
		return 4 * 24 * time.Hour
	}
	return time.Duration(num(p["MessageRetentionPeriod"])) * time.Second
}

// checkDeadLetterRetention: the DLQ keeps a message longer than any of its
// source queues: for standard queues a message's expiry counts from its
// original enqueue time, so a letter moved late in its life would otherwise
// expire in the DLQ almost at once.
func checkDeadLetterRetention(t *Template) []string {
	var problems findings
	for dlq, sources := range sourcesOf(t) {
		d := retention(t.Resources[dlq].Properties)
		for _, src := range sources {
			if s := retention(t.Resources[src].Properties); d <= s {
				problems = append(problems, fmt.Sprintf("%s: MessageRetentionPeriod %v is not longer than its source %s's %v", dlq, d, src, s))
			}
		}
	}
	return problems.sorted()
}

// checkWorkQueueRetention: every work queue keeps messages exactly want,
// the retention the job states are derived with.
func checkWorkQueueRetention(t *Template, want time.Duration) []string {
	var problems findings
	for _, srcs := range sourcesOf(t) {
		for _, src := range srcs {
			if got := retention(t.Resources[src].Properties); got != want {
				problems = append(problems, fmt.Sprintf("%s: MessageRetentionPeriod %v (%d s), but jobs.QueueRetention is %v (%d s)", src, got, int(got.Seconds()), want, int(want.Seconds())))
			}
		}
	}
	return problems.sorted()
}

// TestTemplateQueueRetentionMatchesJobStates keeps the work queues'
// retention and the job-state rules (jobs.QueueRetention: a job neither
// processed nor failed that long after its run time reads Expired) from
// drifting apart.
func TestTemplateQueueRetentionMatchesJobStates(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkWorkQueueRetention(tmpl, jobs.QueueRetention))
}
