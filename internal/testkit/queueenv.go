package testkit

import (
	"maps"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/message"
)

// WorkQueueEnv returns the work-queue part of a function's environment in a
// test: QUEUE_URL_<QUEUE> = urlBase/<queue> for every work queue
// (contract.Queues) and, when arnBase is not empty, QUEUE_ARN_<QUEUE> =
// arnBase:<queue>. So no test lists the queues, and a new one is in every
// test's environment at once.
func WorkQueueEnv(urlBase, arnBase string) map[string]string {
	out := make(map[string]string, 2*len(contract.Queues))
	for _, q := range contract.Queues {
		out[envvar.QueueURLEnv(q)] = urlBase + "/" + string(q)
		if arnBase != "" {
			out[envvar.QueueARNEnv(q)] = arnBase + ":" + string(q)
		}
	}
	return out
}

// With returns a copy of env with more's variables added.
func With(env map[string]string, more map[string]string) map[string]string {
	out := maps.Clone(env)
	maps.Copy(out, more)
	return out
}

// QueueURLVars returns the names of the variables that hold the URLs of
// queues (QUEUE_URL_<QUEUE>).
func QueueURLVars(queues []message.Queue) []string {
	out := make([]string, len(queues))
	for i, q := range queues {
		out[i] = envvar.QueueURLEnv(q)
	}
	return out
}
