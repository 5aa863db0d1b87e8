package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/jobs/joblist"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/operate"
	"github.com/runstwice/runstwice/internal/schedule"
)

func (a *app) lister() *joblist.Lister {
	client := dynamodb.NewFromConfig(a.cfg)
	return joblist.NewLister(client, a.res.JobsTable, marker.NewStore(client, a.res.MarkersTable))
}

// jobArg parses the one job ID `jobs <cmd>` takes, connects, and returns
// the ID and a DynamoDB client for the stores.
func (a *app) jobArg(ctx context.Context, args []string, cmd string) (string, *dynamodb.Client, error) {
	p, err := parseN(args, nil, 1, "jobs "+cmd, "one job ID")
	if err != nil {
		return "", nil, err
	}
	if err := a.connect(ctx); err != nil {
		return "", nil, err
	}
	return p.pos[0], dynamodb.NewFromConfig(a.cfg), nil
}

// jobNotFound is the error of a job ID the jobs table does not hold.
func (a *app) jobNotFound(id string) error {
	return &notFoundError{fmt.Sprintf("job %s not found in %s", id, a.res.JobsTable)}
}

func (a *app) jobsGet(ctx context.Context, args []string) error {
	id, client, err := a.jobArg(ctx, args, "get")
	if err != nil {
		return err
	}
	markers := marker.NewStore(client, a.res.MarkersTable)
	store := jobs.NewStore(client, a.res.JobsTable, markers)
	j, err := store.Get(ctx, id)
	if err == nil {
		var attrs map[string]any
		if attrs, err = joblist.NewLister(client, a.res.JobsTable, markers).Attributes(ctx, id); err == nil {
			var then chainLinks
			if then, err = continuationsOf(ctx, store, id); err == nil {
				if len(then) > 0 {
					attrs["continuations"] = then
				}
				return a.printJob(j, attrs)
			}
		}
	}
	if errors.Is(err, jobs.ErrNotFound) {
		return a.jobNotFound(id)
	}
	return err
}

// printJob prints job j as jobs.View shows it (every view of a job shows
// the same state, attempts, outcome, reason and times) and every other
// attribute of its record, new ones included; times as RFC 3339 in
// milliseconds, UTC. The state is the one GET shows, alone; another
// field the view shows otherwise than the record stores it says so:
// "attempts  1 (stored: 0)".
func (a *app) printJob(j jobs.Job, attrs map[string]any) error {
	delete(attrs, "pk")
	view := viewFields(j)
	if a.json {
		out := map[string]any{"derivedState": j.State}
		for k, v := range attrs {
			if n, ok := v.(attributevalue.Number); ok {
				if t, isTime := epochTime(k, string(n)); isTime {
					out[k] = t
					continue
				}
				if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
					out[k] = i
					continue
				}
			}
			out[k] = v
		}
		maps.Copy(out, view)
		// state is the state GET shows, as in every other view; the
		// record's own value is storedState (derivedState is kept for
		// scripts written against release 2).
		out["storedState"], out["state"] = attrs["state"], j.State
		return a.printJSON(out)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	// The state every view shows; the record's own (storedState in
	// --json) is the runner's bookkeeping, which the marker overtakes.
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	keys := maps.Clone(attrs)
	maps.Copy(keys, view)
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if k == "state" {
			continue
		}
		stored, has := attrs[k]
		v := fmt.Sprint(stored)
		if t, ok := epochTime(k, v); ok {
			v = t.Format(time.RFC3339Nano)
		}
		if shown, ok := view[k]; ok {
			s := fmt.Sprint(shown)
			if t, isTime := shown.(time.Time); isTime {
				s = t.Format(time.RFC3339Nano)
			}
			if s == "" {
				s = "-" // the view shows none (the state overtook what is stored)
			}
			if has && s != v {
				s += " (stored: " + v + ")"
			}
			v = s
		}
		fmt.Fprintf(tw, "%s\t%s\n", k, shorten(v, 300))
	}
	return tw.Flush()
}

// viewFields are the fields of j that jobs.View may show otherwise than
// the record stores them, by attribute name.
func viewFields(j jobs.Job) map[string]any {
	// lastOutcome and lastReason are the view's even when empty: the
	// state may have overtaken the outcome the record holds (it is then
	// in history).
	f := map[string]any{"attempts": j.Attempts, "createdAt": j.CreatedAt, "updatedAt": j.UpdatedAt, "runAt": j.RunAt,
		"lastOutcome": j.LastOutcome, "lastReason": j.LastReason}
	if len(j.History) > 0 {
		f["history"] = j.History
	}
	if j.FailedAt != nil {
		f["failedAt"] = *j.FailedAt
	}
	return f
}

// epochTime reads an attribute named *At holding epoch seconds (expiresAt,
// the TTL) or milliseconds (every other time of the record).
func epochTime(name, v string) (time.Time, bool) {
	if !strings.HasSuffix(name, "At") {
		return time.Time{}, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	if name == jobs.AttrExpiresAt {
		return time.Unix(n, 0).UTC(), true
	}
	return time.UnixMilli(n).UTC(), true
}

// states are the names --state takes.
var states = []jobs.State{jobs.StatePending, jobs.StateEnqueued, jobs.StateScheduled, jobs.StateProcessing,
	jobs.StateSucceeded, jobs.StateFailed, jobs.StateExpired, "Parked", "Cancelled"}

func (a *app) jobsList(ctx context.Context, args []string) error {
	p, err := parseN(args, map[string]bool{"type": true, "state": true, "since": true, "internal": false}, 0, "jobs list", "no arguments")
	if err != nil {
		return err
	}
	f := joblist.Filter{Type: p.vals["type"]}
	if err := a.checkType(f.Type); err != nil {
		return err
	}
	if s := p.vals["state"]; s != "" {
		i := slices.IndexFunc(states, func(st jobs.State) bool { return strings.EqualFold(string(st), s) })
		if i < 0 {
			return usagef("--state %q is not a job state (%s)", s, joinStates())
		}
		f.State = states[i]
	}
	if p.set["since"] {
		if f.Since, err = a.parseSince(p.vals["since"]); err != nil {
			return err
		}
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	list, err := a.lister().List(ctx, f)
	if err != nil {
		return err
	}
	// runstwice's own jobs (a tick every five minutes) are not the
	// user's: left out unless asked for.
	own := 0
	if !p.set["internal"] && !contract.Own(f.Type) {
		list = slices.DeleteFunc(list, func(s joblist.Summary) bool {
			if contract.Own(s.Type) {
				own++
				return true
			}
			return false
		})
	}
	if a.json {
		if list == nil {
			list = []joblist.Summary{}
		}
		return a.printJSON(list)
	}
	fmt.Fprintf(a.stdout, "%d job(s) in %s", len(list), a.res.JobsTable)
	if own > 0 {
		fmt.Fprintf(a.stdout, " (and %d of runstwice's own, its sweeps' ticks and batch finishers: --internal shows them)", own)
	}
	fmt.Fprintln(a.stdout)
	if len(list) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	// OUTCOME and REASON tell a no-op or a skipped job from a real
	// success ("-": none recorded).
	fmt.Fprintln(tw, "JOB ID\tTYPE\tSTATE\tOUTCOME\tKEY\tCREATED\tATTEMPTS\tLAST ERROR\tREASON")
	for _, j := range list {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", j.ID, j.Type, j.State, dash(j.LastOutcome), shorten(j.Key, 40),
			j.CreatedAt.Format(time.RFC3339), j.Attempts, dash(j.LastErrorClass), dash(shorten(j.LastReason, 60)))
	}
	return tw.Flush()
}

func joinStates() string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// parseDuration is time.ParseDuration that also takes days ("3d").
func parseDuration(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(strings.TrimSpace(s), "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil {
			return 0, err
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	return time.ParseDuration(s)
}

// parseSince reads --since: a duration back from now (2h, 3d) or an RFC 3339
// time.
func (a *app) parseSince(s string) (time.Time, error) {
	if d, err := parseDuration(s); err == nil && d > 0 {
		return a.now().Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--since %q is neither a duration back from now (30m, 2h, 3d) nor an RFC 3339 time", s)
}

// jobStore is the jobs table with its markers and the stage's one-time job
// schedules (runstwice-<stage>-jobs), which cancel and run-now delete.
func (a *app) jobStore(client *dynamodb.Client) *jobs.Store {
	s := jobs.NewStore(client, a.res.JobsTable, marker.NewStore(client, a.res.MarkersTable))
	s.Schedules = schedule.New(scheduler.NewFromConfig(a.cfg), schedule.Config{Group: schedule.GroupName(a.stage)})
	return s
}

// jobsCancel cancels a job as an operator (any caller's): its one-time
// schedule if it has one, the tombstone its workers see, then the record.
func (a *app) jobsCancel(ctx context.Context, args []string) error {
	id, client, err := a.jobArg(ctx, args, "cancel")
	if err != nil {
		return err
	}
	res, err := operate.Operator{Jobs: a.jobStore(client)}.Cancel(ctx, id)
	if err != nil {
		return a.operateErr(id, err)
	}
	j := res.Job
	if a.json {
		return a.printJSON(map[string]any{"jobId": j.ID, "state": j.State})
	}
	fmt.Fprintf(a.stdout, "job %s %s: %s\n", j.ID, j.Type, res.Said)
	return nil
}

// jobsRunNow runs a waiting job at once: its one-time schedule is deleted
// and its message sent to its queue under its id. Running it twice sends
// one job.
func (a *app) jobsRunNow(ctx context.Context, args []string) error {
	id, client, err := a.jobArg(ctx, args, "run-now")
	if err != nil {
		return err
	}
	if err := a.lookupQueueURLs(ctx, sqs.NewFromConfig(a.cfg)); err != nil {
		return err
	}
	op := operate.Operator{Jobs: a.jobStore(client), Queue: sqsqueue.New(sqs.NewFromConfig(a.cfg), envvar.ByName(a.res.Queues), "")}
	res, err := op.RunNow(ctx, id)
	if err != nil {
		return a.operateErr(id, err)
	}
	j := res.Job
	if a.json {
		return a.printJSON(map[string]any{"jobId": j.ID, "state": j.State, "outcome": res.RunNow.String()})
	}
	fmt.Fprintf(a.stdout, "job %s %s: %s\n", j.ID, j.Type, res.Said)
	return nil
}

// operateErr is the exit of an operator's action that failed: a job not
// found (3), one whose state refuses it (4), or the error.
func (a *app) operateErr(id string, err error) error {
	var no *operate.RefusedError
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return a.jobNotFound(id)
	case errors.As(err, &no):
		return refusedf("%s", no.Reason)
	}
	return err
}

// chainLink is a job of a chain with its state now.
type chainLink struct {
	JobID string     `json:"jobId"`
	State jobs.State `json:"state"`
}

// chainLinks are the jobs that wait (or waited) for a job: a list in
// JSON, "id (State), …" in text.
type chainLinks []chainLink

func (c chainLinks) String() string {
	s := make([]string, len(c))
	for i, l := range c {
		s[i] = l.JobID + " (" + string(l.State) + ")"
	}
	return strings.Join(s, ", ")
}

// continuationsOf reads the jobs that wait for job id, with their states
// as GET shows them.
func continuationsOf(ctx context.Context, store *jobs.Store, id string) (chainLinks, error) {
	ids, err := store.Continuations(ctx, id)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	keys := make([]engine.Key, len(ids))
	for i, c := range ids {
		keys[i] = engine.Key{JobID: c}
	}
	views, err := store.Views(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make(chainLinks, len(views))
	for i, v := range views {
		out[i] = chainLink{JobID: v.ID, State: v.State}
	}
	return out, nil
}
