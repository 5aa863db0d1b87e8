package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// defaultRate is --rate when not given: sends a second.
const defaultRate = 10

var filterSpec = map[string]bool{"type": true, "since": true, "reason": true}

func (a *app) deadLetters() *deadletter.Store {
	db := dynamodb.NewFromConfig(a.cfg)
	s := deadletter.NewStore(db, a.res.DeadLettersTable)
	s.Markers = marker.NewStore(db, a.res.MarkersTable) // a redriven letter whose job ran reads succeeded
	return s
}

// filter reads --type, --since and --reason.
func (a *app) filter(p cmdArgs) (deadletter.Filter, error) {
	f := deadletter.Filter{Type: p.vals["type"], Reason: p.vals["reason"]}
	if f.Type != deadletter.UnknownType {
		if err := a.checkType(f.Type); err != nil {
			return f, err
		}
	}
	if p.set["since"] {
		t, err := a.parseSince(p.vals["since"])
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	if p.set["reason"] && f.Reason == "" {
		return f, usagef("--reason is empty")
	}
	return f, nil
}

func (a *app) dlqList(ctx context.Context, args []string) error {
	spec := maps.Clone(filterSpec)
	spec["status"] = true
	p, err := parseN(args, spec, 0, "dlq list", "no arguments")
	if err != nil {
		return err
	}
	f, err := a.filter(p)
	if err != nil {
		return err
	}
	switch s := p.vals["status"]; {
	case s == "":
		f.Status = deadletter.StatusDead
	case s == "all":
	case slices.Contains(deadletter.Statuses, deadletter.Status(s)):
		f.Status = deadletter.Status(s)
	default:
		return usagef("--status %q is not one of dead, redriven, succeeded, dropped, all", s)
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	recs, err := a.deadLetters().Select(ctx, f)
	if err != nil {
		return err
	}
	byType, byReason := map[string]int{}, map[string]int{}
	for _, r := range recs {
		byType[r.Type]++
		byReason[r.Reason]++
	}
	if a.json {
		if recs == nil {
			recs = []deadletter.Record{}
		}
		return a.printJSON(map[string]any{"count": len(recs), "byType": byType, "byReason": byReason, "letters": recs})
	}
	what := letters(len(recs), "dead letter")
	if f.Status != deadletter.StatusDead {
		what = letters(len(recs), "letter") + " (status " + p.vals["status"] + ")"
	}
	fmt.Fprintf(a.stdout, "%s in %s\n", what, a.res.DeadLettersTable)
	if len(recs) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, g := range []struct {
		title  string
		counts map[string]int
	}{{"BY TYPE", byType}, {"BY REASON", byReason}} {
		fmt.Fprintln(tw, g.title)
		for _, k := range sortedByCount(g.counts) {
			fmt.Fprintf(tw, "  %d\t%s\n", g.counts[k], shorten(k, 100))
		}
	}
	fmt.Fprintln(tw, "")
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tATTEMPTS\tLAST SEEN\tREASON")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.Type, r.Status, r.ReceiveCount, r.LastSeen.Format(time.RFC3339), shorten(r.Reason, 80))
	}
	return tw.Flush()
}

// checkType refuses a --type that names no registered type ("" is none).
func (a *app) checkType(name string) error {
	if _, err := a.reg.Lookup(name); name == "" || err == nil {
		return nil
	}
	if near, ok := a.reg.Nearest(name); ok {
		return usagef("--type %q is not a registered job type; did you mean %s?", name, near)
	}
	return usagef("--type %q is not a registered job type (%s)", name, strings.Join(a.reg.Names(), ", "))
}

// sortedByCount returns the keys of counts, largest count first.
func sortedByCount(counts map[string]int) []string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(x, y string) int {
		if c := counts[y] - counts[x]; c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	return keys
}

// selection is what `ID|--all [filters]` selects: one ID, or a filter.
type selection struct {
	id     string
	filter deadletter.Filter
}

// parseSelection reads `ID|--all [filters]`.
func (a *app) parseSelection(p cmdArgs) (selection, error) {
	filtered := p.set["type"] || p.set["since"] || p.set["reason"]
	switch {
	case p.set["all"] && len(p.pos) == 0:
		f, err := a.filter(p)
		f.Status = deadletter.StatusDead
		return selection{filter: f}, err
	case p.set["all"] || len(p.pos) != 1:
		return selection{}, usagef("name one dead-letter ID, or --all")
	case filtered:
		return selection{}, usagef("--type, --since and --reason select letters for --all; with an ID they have no use")
	}
	return selection{id: p.pos[0]}, nil
}

// letters returns the letters sel selects.
func (a *app) letters(ctx context.Context, sel selection, store *deadletter.Store) ([]deadletter.Record, error) {
	if sel.id == "" {
		return store.Select(ctx, sel.filter)
	}
	rec, err := store.Get(ctx, sel.id)
	if errors.Is(err, deadletter.ErrNotFound) {
		return nil, &notFoundError{fmt.Sprintf("dead letter %s not found in %s", sel.id, a.res.DeadLettersTable)}
	}
	if err != nil {
		return nil, err
	}
	return []deadletter.Record{rec}, nil
}

func (a *app) redriver(sender deadletter.Sender, store *deadletter.Store) *deadletter.Redriver {
	db := dynamodb.NewFromConfig(a.cfg)
	r := deadletter.NewRedriver(store, sender, a.reg)
	r.Jobs = jobs.NewLifecycle(db, a.res.JobsTable)
	r.Markers = marker.NewResetter(db, a.res.MarkersTable)
	return r
}

// selectLetters parses `ID|--all [filters]` and the command's own flags,
// lets check read them, then connects and reads the letters selected.
func (a *app) selectLetters(ctx context.Context, args []string, flags map[string]bool, check func(cmdArgs) error) (cmdArgs, *deadletter.Store, []deadletter.Record, error) {
	spec := maps.Clone(filterSpec)
	spec["all"] = false
	maps.Copy(spec, flags)
	p, err := parseArgs(args, spec)
	if err == nil {
		err = check(p)
	}
	var sel selection
	if err == nil {
		sel, err = a.parseSelection(p)
	}
	if err == nil {
		err = a.connect(ctx)
	}
	if err != nil {
		return p, nil, nil, err
	}
	store := a.deadLetters()
	recs, err := a.letters(ctx, sel, store)
	return p, store, recs, err
}

func (a *app) dlqRedrive(ctx context.Context, args []string) error {
	rate := float64(defaultRate)
	p, store, recs, err := a.selectLetters(ctx, args, map[string]bool{"rate": true, "dry-run": false, "force": false}, func(p cmdArgs) (err error) {
		if p.set["rate"] {
			rate, err = parseRate(p.vals["rate"])
		}
		return err
	})
	if err != nil {
		return err
	}
	opts := deadletter.Options{DryRun: p.set["dry-run"], Force: p.set["force"]}
	var sender deadletter.Sender
	if !opts.DryRun && len(recs) > 0 {
		client := sqs.NewFromConfig(a.cfg)
		if err := a.lookupQueueURLs(ctx, client); err != nil {
			return err
		}
		sender = pacedSender{next: sqsqueue.New(client, envvar.ByName(a.res.Queues), ""), limiter: newLimiter(rate, a.clock())}
	}
	r := a.redriver(sender, store)
	verb := "redriving"
	if opts.DryRun {
		verb = "checking"
	}
	results := a.batch(ctx, recs, verb, func(rec deadletter.Record) (deadletter.Redriven, error) {
		return r.RedriveRecord(ctx, rec, opts)
	})
	return a.report(results, "redrive")
}

func (a *app) dlqDrop(ctx context.Context, args []string) error {
	p, store, recs, err := a.selectLetters(ctx, args, map[string]bool{"dry-run": false, "yes": false}, func(cmdArgs) error { return nil })
	if err != nil {
		return err
	}
	opts := deadletter.Options{DryRun: p.set["dry-run"] || !p.set["yes"]}
	r := a.redriver(nil, store)
	results := a.batch(ctx, recs, "dropping", func(rec deadletter.Record) (deadletter.Redriven, error) {
		return r.Drop(ctx, rec, opts)
	})
	if err := a.report(results, "drop"); err != nil || p.set["yes"] || p.set["dry-run"] || len(recs) == 0 {
		return err
	}
	return refusedf("nothing dropped: add --yes to drop %s", letters(len(recs), "letter"))
}

// batch applies fn to every letter, with a progress line for long runs.
func (a *app) batch(ctx context.Context, recs []deadletter.Record, verb string, fn func(deadletter.Record) (deadletter.Redriven, error)) []deadletter.Redriven {
	counts := map[deadletter.Outcome]int{}
	prog := newProgress(a.stderr, a.stderrTTY, a.clock(), verb, len(recs))
	out := make([]deadletter.Redriven, 0, len(recs))
	for i, rec := range recs {
		res, err := fn(rec)
		if err != nil {
			res.Outcome, res.Err, res.Error = deadletter.Failed, err, err.Error()
		}
		if ctx.Err() != nil && res.Outcome == deadletter.Failed {
			out = append(out, res)
			break // interrupted: report what was done
		}
		counts[res.Outcome]++
		out = append(out, res)
		prog.Update(i+1, counts)
	}
	return out
}

// report prints the results and returns the error that sets the exit code:
// a failure (1, or 4 when every failure is a letter that cannot be
// redriven), else superseded letters left alone (4).
func (a *app) report(results []deadletter.Redriven, what string) error {
	counts := map[deadletter.Outcome]int{}
	var failed, refused error
	for _, res := range results {
		counts[res.Outcome]++
		switch {
		case res.Outcome == deadletter.Failed && errors.Is(res.Err, deadletter.ErrNotRedrivable):
			refused = errors.Join(refused, res.Err)
		case res.Outcome == deadletter.Failed:
			failed = errors.Join(failed, res.Err)
		}
	}
	if a.json {
		if err := a.printJSON(map[string]any{"counts": counts, "results": results}); err != nil {
			return err
		}
	} else {
		for _, res := range results {
			a.printResult(res)
		}
		fmt.Fprintf(a.stdout, "%s: %s: %s\n", what, letters(len(results), "letter"), summary(counts))
	}
	switch {
	case failed != nil:
		return fmt.Errorf("%s failed for %s: %w", what, letters(counts[deadletter.Failed], "letter"), failed)
	case refused != nil:
		return refusedf("%v", refused)
	case counts[deadletter.Superseded] > 0:
		return refusedf("%s left alone (a newer job holds the key); --force redrives them anyway", letters(counts[deadletter.Superseded], "superseded letter"))
	}
	return nil
}

func (a *app) printResult(res deadletter.Redriven) {
	job := " (no job record)"
	if res.JobState != "" {
		job = fmt.Sprintf(" (job was %s)", res.JobState)
	}
	switch res.Outcome {
	case deadletter.Redrove:
		active := "; its job is active again"
		if res.JobState == "" {
			active = "; it has no job record to reactivate"
		}
		fmt.Fprintf(a.stdout, "redriven %s (%s) to the %s queue under the same messageId%s\n", res.ID, res.Type, res.Queue, active)
	case deadletter.WouldRedrive:
		fmt.Fprintf(a.stdout, "would redrive %s (%s) to the %s queue%s\n", res.ID, res.Type, res.Queue, job)
	case deadletter.Dropped:
		kept := "its job reads Failed"
		if res.JobState == "" {
			kept = "it has no job record (its message was sent outside the API, or its job record has expired)"
		}
		fmt.Fprintf(a.stdout, "dropped %s (%s): kept with its reason; %s\n", res.ID, res.Type, kept)
	case deadletter.WouldDrop:
		fmt.Fprintf(a.stdout, "would drop %s (%s)%s\n", res.ID, res.Type, job)
	case deadletter.Superseded:
		fmt.Fprintf(a.stdout, "superseded %s (%s): job %s now holds its key; left alone (--force to redrive)\n", res.ID, res.Type, res.SupersededBy)
	case deadletter.Skipped:
		fmt.Fprintf(a.stdout, "skipped %s (%s): %s\n", res.ID, res.Type, res.Skipped)
	default:
		fmt.Fprintf(a.stdout, "FAILED %s (%s): %v\n", res.ID, res.Type, res.Err)
	}
}

// letters counts n of what, in the singular for one ("1 dead letter",
// "2 dead letters").
func letters(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// lookupQueueURLs asks SQS for the URL of every work queue the environment
// did not name, by the template's naming convention (runstwice-<stage>-<queue>).
func (a *app) lookupQueueURLs(ctx context.Context, client *sqs.Client) error {
	for q, url := range a.res.Queues {
		if url != "" {
			continue
		}
		name := "runstwice-" + a.stage + "-" + string(q)
		out, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("find queue %s (set QUEUE_URL_%s to name it): %w", name, strings.ToUpper(string(q)), err)
		}
		a.res.Queues[q] = aws.ToString(out.QueueUrl)
	}
	return nil
}
