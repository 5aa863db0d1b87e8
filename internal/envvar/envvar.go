// Package envvar reads a function's configuration from environment variables
// and collects every problem, so a misconfigured function names all of them
// at once.
package envvar

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/tracing"
	"github.com/runstwice/runstwice/message"
)

// QueueURLEnv returns the environment variable that holds a work queue's URL:
// QUEUE_URL_CRITICAL, QUEUE_URL_DEFAULT, QUEUE_URL_BULK, QUEUE_URL_WEBHOOKS
// (QUEUE_URL_ and the queue's name, upper case).
func QueueURLEnv(q message.Queue) string { return "QUEUE_URL_" + strings.ToUpper(string(q)) }

// QueueARNEnv returns the environment variable that holds a work queue's
// ARN (a schedule's target): QUEUE_ARN_ and the queue's name, upper case.
func QueueARNEnv(q message.Queue) string { return "QUEUE_ARN_" + strings.ToUpper(string(q)) }

// Env reads configuration from environment variables. It is the one place
// the functions parse their environment.
type Env struct {
	get  func(string) string
	errs []error
}

// New reads variables with getenv (os.Getenv).
func New(getenv func(string) string) *Env { return &Env{get: getenv} }

// Required returns the variable name, recording an error when it is empty.
func (e *Env) Required(name string) string {
	v := strings.TrimSpace(e.get(name))
	if v == "" {
		e.errs = append(e.errs, fmt.Errorf("%s is required", name))
	}
	return v
}

// Optional returns the variable name, or def when it is empty.
func (e *Env) Optional(name, def string) string {
	if v := strings.TrimSpace(e.get(name)); v != "" {
		return v
	}
	return def
}

// Bool returns the boolean in name ("true" or "false", as a template's
// AllowedValues give it), or def when it is empty; anything else is
// recorded as a problem and def returned.
func (e *Env) Bool(name string, def bool) bool {
	switch v := e.Optional(name, ""); v {
	case "":
		return def
	case "true":
		return true
	case "false":
		return false
	default:
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not true or false", name, v))
		return def
	}
}

// Int returns the positive integer in name, or def when it is empty.
func (e *Env) Int(name string, def int) int {
	return positive(e, name, def, strconv.Atoi, "integer")
}

// Seconds returns the whole seconds in name as a duration, or def when it is
// empty.
func (e *Env) Seconds(name string, def time.Duration) time.Duration {
	return positive(e, name, def, func(v string) (time.Duration, error) {
		n, err := strconv.Atoi(v)
		return time.Duration(n) * time.Second, err
	}, "integer")
}

// Duration returns the Go duration in name (e.g. "30s"), or def when it is
// empty.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	return positive(e, name, def, time.ParseDuration, "Go duration")
}

// positive returns the value in name as parse reads it, or def when it is
// empty; a value parse refuses or that is not positive is recorded as a
// problem (what names the kind of value expected) and def returned.
func positive[T int | time.Duration](e *Env, name string, def T, parse func(string) (T, error), what string) T {
	v := e.Optional(name, "")
	if v == "" {
		return def
	}
	n, err := parse(v)
	if err != nil || n <= 0 {
		e.errs = append(e.errs, fmt.Errorf("%s=%q is not a positive %s", name, v, what))
		return def
	}
	return n
}

// QueueURLs returns the URLs of every work queue (contract.Queues) by
// queue name, each required.
func (e *Env) QueueURLs() map[string]string { return ByName(e.perQueue(QueueURLEnv, contract.Queues)) }

// QueueURLsOf returns the URLs of the given work queues only, by queue
// name, each required: a worker's, which sends only to the queues it
// consumes.
func (e *Env) QueueURLsOf(queues ...message.Queue) map[string]string {
	return ByName(e.perQueue(QueueURLEnv, queues))
}

// ByName is m with the queues' names as its keys, as package sqsqueue
// takes them.
func ByName(m map[message.Queue]string) map[string]string {
	out := make(map[string]string, len(m))
	for q, v := range m {
		out[string(q)] = v
	}
	return out
}

// QueueARNs returns the ARNs of every work queue, each required.
func (e *Env) QueueARNs() map[message.Queue]string { return e.perQueue(QueueARNEnv, contract.Queues) }

// perQueue reads the required variable name(q) of every queue q.
func (e *Env) perQueue(name func(message.Queue) string, queues []message.Queue) map[message.Queue]string {
	out := make(map[message.Queue]string, len(queues))
	for _, q := range queues {
		out[q] = e.Required(name(q))
	}
	return out
}

// Config returns every problem found so far, or else the AWS SDK
// configuration from the standard chain (awsx.Load): the last step of every
// function's start.
func (e *Env) Config(ctx context.Context) (aws.Config, error) {
	if err := e.Err(); err != nil {
		return aws.Config{}, err
	}
	cfg, err := awsx.Load(ctx)
	if tp := tracing.FromContext(ctx); tp != nil && err == nil {
		// The function traces (function.Main): every AWS call is a
		// CLIENT span, with its job's attributes.
		cfg.APIOptions = append(cfg.APIOptions, tracing.ClientSpans(tp, engine.TracedJobAttributes))
	}
	return cfg, err
}

// Err returns every problem found so far, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("configuration: %w", errors.Join(e.errs...))
}
