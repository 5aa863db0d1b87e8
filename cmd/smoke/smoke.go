package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runstwice/runstwice/client"
)

// Stack reads a deployed stack: its outputs, the names of its alarms and
// the ids of its event source mappings.
type Stack interface {
	Outputs(ctx context.Context, stack string) (map[string]string, error)
	AlarmNames(ctx context.Context, stack string) ([]string, error)
	EventSources(ctx context.Context, stack string) ([]string, error)
}

// Topics reads the subscriptions of an SNS topic.
type Topics interface {
	Subscriptions(ctx context.Context, topicARN string) ([]Subscription, error)
}

// Subscription is one subscription of a topic. SNS lists an unconfirmed one
// with the ARN "PendingConfirmation".
type Subscription struct {
	Protocol, Endpoint, ARN string
}

// pendingConfirmation is the SubscriptionArn SNS lists for a subscription
// its endpoint has not confirmed.
const pendingConfirmation = "PendingConfirmation"

// Concurrency reads Lambda: the account's unreserved concurrency, and an
// event source mapping's maximum concurrency (0 when it sets none) and
// whether it reads an SQS queue (the only kind a maximum concurrency
// applies to: a stream's mapping runs a batch per shard at a time).
type Concurrency interface {
	UnreservedConcurrency(ctx context.Context) (int, error)
	MaximumConcurrency(ctx context.Context, uuid string) (n int, queue bool, err error)
}

// Alarms reads the state of the alarms whose names start with a prefix.
type Alarms interface {
	Alarms(ctx context.Context, prefix string) ([]Alarm, error)
}

// Alarm is one CloudWatch alarm as the smoke test sees it.
type Alarm struct {
	Name    string
	State   string // OK, ALARM, INSUFFICIENT_DATA
	Actions []string
}

// Config is one smoke run.
type Config struct {
	// StackName is the deployed stack; empty skips the stack's outputs and
	// alarms (the API then comes from API).
	StackName string
	// API overrides the stack's ApiUrl output.
	API string
	// User is the test user the welcome mail is enqueued for.
	User string
	// Timeout bounds the wait for Succeeded; Poll is how often the job is read.
	Timeout, Poll time.Duration
	// Client returns the API client for a base URL.
	Client func(api string) (*client.Client, error)
	// Stack, Alarms, Topics and Lambda read AWS; all are needed when
	// StackName is set.
	Stack  Stack
	Alarms Alarms
	Topics Topics
	Lambda Concurrency
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// Status is the outcome of one check.
type Status string

// The outcomes of a check.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
}

// Report is what a smoke run found.
type Report struct {
	Stack   string            `json:"stack,omitempty"`
	API     string            `json:"api"`
	Outputs map[string]string `json:"outputs,omitempty"`
	JobID   string            `json:"jobId,omitempty"`
	Checks  []Check           `json:"checks"`
}

// OK reports whether no check failed.
func (r *Report) OK() bool {
	return !slices.ContainsFunc(r.Checks, func(c Check) bool { return c.Status == Fail })
}

func (r *Report) add(name string, s Status, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, Status: s, Detail: fmt.Sprintf(format, args...)})
}

// Print writes the report as a table.
func (r *Report) Print(w io.Writer) {
	target := r.API
	if r.Stack != "" {
		target = "stack " + r.Stack + " (" + r.API + ")"
	}
	fmt.Fprintf(w, "smoke: %s\n", target)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.Status, c.Name, c.Detail)
	}
	_ = tw.Flush()
	verdict := Pass
	if !r.OK() {
		verdict = Fail
	}
	fmt.Fprintf(w, "result: %s\n", verdict)
}

// Run enqueues a welcome mail through the API, waits for the job to
// succeed, reads it back and checks the stack's alarms. It returns the
// report; an error means the run could not be made at all.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	rep := &Report{Stack: cfg.StackName, API: cfg.API}
	if cfg.StackName != "" {
		if cfg.Stack == nil || cfg.Alarms == nil || cfg.Topics == nil || cfg.Lambda == nil {
			return nil, errors.New("smoke: a stack needs its Stack, Alarms, Topics and Lambda readers")
		}
		out, err := cfg.Stack.Outputs(ctx, cfg.StackName)
		if err != nil {
			return nil, fmt.Errorf("smoke: outputs of stack %s: %w", cfg.StackName, err)
		}
		rep.Outputs = out
		if rep.API == "" {
			rep.API = out["ApiUrl"]
		}
		if out["ApiUrl"] == "" || out["AlarmTopicArn"] == "" {
			rep.add("stack outputs", Fail, "ApiUrl %q, AlarmTopicArn %q: both are needed", out["ApiUrl"], out["AlarmTopicArn"])
		} else {
			rep.add("stack outputs", Pass, "ApiUrl %s, AlarmTopicArn %s", out["ApiUrl"], out["AlarmTopicArn"])
		}
	}
	if rep.API == "" {
		return nil, errors.New("smoke: no API URL: give a stack with an ApiUrl output or an API URL")
	}
	c, err := cfg.Client(rep.API)
	if err != nil {
		return nil, err
	}
	job(ctx, cfg, c, rep, now)
	if cfg.StackName == "" {
		rep.add("alarms", Skip, "no stack given")
	} else {
		checkAlarms(ctx, cfg, rep)
		checkSubscription(ctx, cfg, rep)
		checkConcurrency(ctx, cfg, rep)
	}
	return rep, nil
}

// job enqueues a welcome mail under a fresh key, waits for it and reads it
// back.
func job(ctx context.Context, cfg Config, c *client.Client, rep *Report, now func() time.Time) {
	key := fmt.Sprintf("smoke:%s:%d", cfg.User, now().UnixMilli())
	start := now()
	res, err := c.Welcome(ctx, client.WelcomeArgs{UserID: cfg.User}, client.EnqueueOptions{Key: key})
	if err != nil {
		rep.add("enqueue", Fail, "email.welcome.v1 for %s: %v", cfg.User, err)
		return
	}
	rep.JobID = res.JobID
	rep.add("enqueue", Pass, "email.welcome.v1 for %s: job %s, HTTP %d, %s, %d attempt(s), %s",
		cfg.User, res.JobID, res.StatusCode, res.State, res.Attempts, now().Sub(start).Round(time.Millisecond))

	waitCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	j, err := c.Wait(waitCtx, res.JobID, cfg.Poll)
	switch {
	case err != nil && j != nil:
		rep.add("succeeded", Fail, "still %s after %s", j.State, cfg.Timeout)
		return
	case err != nil:
		rep.add("succeeded", Fail, "%v", err)
		return
	case j.State != client.StateSucceeded:
		rep.add("succeeded", Fail, "the job is %s (outcome %q, reason %q, error class %q)", j.State, j.LastOutcome, j.LastReason, j.LastErrorClass)
		return
	case j.LastOutcome == "noop":
		// Succeeded without a mail proves nothing about sending.
		rep.add("succeeded", Fail, "the job succeeded without sending a mail (%s): is --user a user of the stack's users table?", j.LastReason)
		return
	}
	rep.add("succeeded", Pass, "after %s", now().Sub(start).Round(time.Millisecond))

	back, err := c.Get(ctx, res.JobID)
	switch {
	case err != nil:
		rep.add("read back", Fail, "%v", err)
	case back.JobID != res.JobID || back.Type != client.TypeWelcome || back.Key != key || back.State != client.StateSucceeded:
		rep.add("read back", Fail, "job %s type %s key %s state %s; want %s %s %s Succeeded",
			back.JobID, back.Type, back.Key, back.State, res.JobID, client.TypeWelcome, key)
	default:
		detail := fmt.Sprintf("%s key %s, attempts %d", back.Type, back.Key, back.Attempts)
		if back.LastOutcome != "" {
			detail += ", outcome " + back.LastOutcome
		}
		rep.add("read back", Pass, "%s", detail)
	}
}

// checkAlarms checks that every alarm of the stack exists, is not in ALARM
// and notifies the alarm topic.
func checkAlarms(ctx context.Context, cfg Config, rep *Report) {
	want, err := cfg.Stack.AlarmNames(ctx, cfg.StackName)
	if err != nil {
		rep.add("alarms", Fail, "listing the stack's alarms: %v", err)
		return
	}
	if len(want) == 0 {
		rep.add("alarms", Fail, "the stack declares no alarms")
		return
	}
	got, err := cfg.Alarms.Alarms(ctx, commonPrefix(want))
	if err != nil {
		rep.add("alarms", Fail, "describing the alarms: %v", err)
		return
	}
	byName := map[string]Alarm{}
	for _, a := range got {
		byName[a.Name] = a
	}
	topic := rep.Outputs["AlarmTopicArn"]
	slices.Sort(want)
	var insufficient []string
	bad := 0
	for _, name := range want {
		a, ok := byName[name]
		switch {
		case !ok:
			rep.add("alarm "+name, Fail, "declared by the stack but not found in CloudWatch")
		case a.State == "ALARM":
			rep.add("alarm "+name, Fail, "in ALARM")
		case topic != "" && !slices.Contains(a.Actions, topic):
			rep.add("alarm "+name, Fail, "does not notify the alarm topic %s", topic)
		default:
			if a.State != "OK" {
				insufficient = append(insufficient, name)
			}
			continue
		}
		bad++
	}
	detail := fmt.Sprintf("%d of %d exist, not in ALARM, notify the alarm topic", len(want)-bad, len(want))
	if len(insufficient) > 0 {
		detail += fmt.Sprintf("; %d without data yet: %s", len(insufficient), strings.Join(insufficient, ", "))
	}
	status := Pass
	if bad > 0 {
		status = Fail
	}
	rep.add("alarms", status, "%s", detail)
}

// commonPrefix is the longest prefix the names share.
func commonPrefix(names []string) string {
	p := names[0]
	for _, n := range names[1:] {
		for !strings.HasPrefix(n, p) {
			p = p[:len(p)-1]
		}
	}
	return p
}

// checkSubscription checks that the alarm topic has a confirmed
// subscription: an alarm that notifies a topic nobody confirmed pages
// nobody.
func checkSubscription(ctx context.Context, cfg Config, rep *Report) {
	const name = "alarm subscription"
	topic := rep.Outputs["AlarmTopicArn"]
	if topic == "" {
		rep.add(name, Fail, "the stack has no AlarmTopicArn output")
		return
	}
	subs, err := cfg.Topics.Subscriptions(ctx, topic)
	if err != nil {
		rep.add(name, Fail, "listing the subscriptions of %s: %v", topic, err)
		return
	}
	var confirmed, pending []string
	for _, s := range subs {
		if s.ARN == pendingConfirmation {
			pending = append(pending, s.Protocol+" "+s.Endpoint)
		} else {
			confirmed = append(confirmed, s.Protocol+" "+s.Endpoint)
		}
	}
	switch {
	case len(confirmed) > 0:
		rep.add(name, Pass, "confirmed: %s", strings.Join(confirmed, ", "))
	case len(pending) > 0:
		rep.add(name, Fail, "not confirmed yet: %s (click the link in the mail SNS sent; until then the alarms reach nobody)", strings.Join(pending, ", "))
	default:
		rep.add(name, Fail, "%s has no subscription: set AlarmEmail and deploy, or subscribe someone", topic)
	}
}

// checkConcurrency checks that the account's unreserved concurrency covers
// the maximum concurrency of the stack's event sources together: below it,
// Lambda throttles the workers before they reach their maximum, and each
// throttled batch counts a delivery towards the DLQ.
func checkConcurrency(ctx context.Context, cfg Config, rep *Report) {
	const name = "concurrency"
	ids, err := cfg.Stack.EventSources(ctx, cfg.StackName)
	if err != nil {
		rep.add(name, Fail, "listing the stack's event sources: %v", err)
		return
	}
	if len(ids) == 0 {
		rep.add(name, Fail, "the stack declares no event source mappings")
		return
	}
	sum, queues := 0, 0
	for _, id := range ids {
		n, queue, err := cfg.Lambda.MaximumConcurrency(ctx, id)
		if err != nil {
			rep.add(name, Fail, "reading event source %s: %v", id, err)
			return
		}
		if !queue {
			continue // the outbox stream's mapping: a batch per shard at a time
		}
		if n <= 0 {
			rep.add(name, Fail, "event source %s sets no maximum concurrency, so it can take up to the account's whole limit", id)
			return
		}
		sum += n
		queues++
	}
	if queues == 0 {
		rep.add(name, Fail, "the stack declares no SQS event source mappings")
		return
	}
	free, err := cfg.Lambda.UnreservedConcurrency(ctx)
	switch {
	case err != nil:
		rep.add(name, Fail, "reading the account's concurrency: %v", err)
	case free < sum:
		rep.add(name, Fail, "the account's unreserved concurrency is %d, below the %d the %d queue event sources may use together: ask AWS for a higher limit (Service Quotas, Lambda concurrent executions) or lower their MaximumConcurrency", free, sum, queues)
	default:
		rep.add(name, Pass, "unreserved %d covers the %d queue event sources' maximum of %d together (the enqueue function, the outbox stream's relay and the account's other functions share the rest)", free, queues, sum)
	}
}
