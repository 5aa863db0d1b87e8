// Package sesmodel is the scale model of sending within SES's rate: the
// real runner, the real e-mail handlers, the real pacing (internal/email's
// Paced, on sendrate's in-memory schedule, which the DynamoDB schedule's
// tests hold to the same rules) and the real back-off, against simulated
// SQS queues and Lambda event sources with the template's settings (batch
// size, batching window, maximum concurrency, visibility timeout, function
// timeout, maxReceiveCount) and an SES that refuses what exceeds its rate.
// It runs on the fake clock of a testing/synctest bubble, so hours of
// sending take seconds: Run must be called inside synctest.Test.
package sesmodel

import (
	"fmt"
	"strconv"
	"time"

	"github.com/runstwice/runstwice/internal/dev/stack"
)

// Settings are one event source of the e-mail function as the template
// has them.
type Settings struct {
	// Event is the event's name in the function's Events (Bulk, ...).
	Event string
	// QueueID is the queue's logical id (BulkQueue, ...).
	QueueID        string
	BatchSize      int
	BatchingWindow time.Duration
	// Concurrency is the event source's MaximumConcurrency.
	Concurrency int
	// Visibility is the queue's VisibilityTimeout.
	Visibility time.Duration
	// Timeout is the function's timeout.
	Timeout time.Duration
	// MaxReceives is the redrive policy's maxReceiveCount (the
	// MaxReceiveCount parameter's default).
	MaxReceives int
	// BatchConcurrency is how many records of a batch run at once (the
	// function's BATCH_CONCURRENCY, 10 unless the template sets it).
	BatchConcurrency int
}

// FromTemplate reads the settings of the e-mail function's event source
// event (Critical, Default, Bulk) from the template.
func FromTemplate(t *stack.Template, event string) (Settings, error) {
	s := Settings{Event: event, BatchConcurrency: 10}
	fn, err := t.FunctionProperties("EmailFunction")
	if err != nil {
		return s, err
	}
	ev, ok := asMap(asMap(fn["Events"])[event])["Properties"].(map[string]any)
	if !ok {
		return s, fmt.Errorf("sesmodel: EmailFunction has no event %s", event)
	}
	att, _ := asMap(ev["Queue"])["Fn::GetAtt"].([]any)
	if len(att) != 2 {
		return s, fmt.Errorf("sesmodel: event %s's Queue is not !GetAtt <queue>.Arn", event)
	}
	s.QueueID, _ = att[0].(string)
	q, ok := t.Resources[s.QueueID]
	if !ok {
		return s, fmt.Errorf("sesmodel: no queue %s", s.QueueID)
	}
	if v, ok := stack.EnvironmentVariables(fn)["BATCH_CONCURRENCY"]; ok {
		s.BatchConcurrency = number(v)
	}
	mrc, _ := strconv.Atoi(t.Parameters["MaxReceiveCount"].Default)
	s.BatchSize, s.Concurrency, s.MaxReceives = number(ev["BatchSize"]), number(asMap(ev["ScalingConfig"])["MaximumConcurrency"]), mrc
	s.BatchingWindow = time.Duration(number(ev["MaximumBatchingWindowInSeconds"])) * time.Second
	s.Visibility = time.Duration(number(q.Properties["VisibilityTimeout"])) * time.Second
	s.Timeout = time.Duration(number(fn["Timeout"])) * time.Second
	if s.BatchSize <= 0 || s.Concurrency <= 0 || s.MaxReceives <= 0 || s.Visibility <= 0 || s.Timeout <= 0 {
		return s, fmt.Errorf("sesmodel: incomplete settings for %s: %+v", event, s)
	}
	return s, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// number reads a YAML number (or a numeric string).
func number(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}
