package chaos

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/killpoint"
)

// ledger draws the campaign's ledger from what it read.
func (c *campaign) ledger(results []result, fan fanoutPlan, t *truth, redriven int, quiet bool, run *clockRun, after *truth) *Ledger {
	c.mu.Lock()
	timeline, problems := slices.Clone(c.timeline), slices.Clone(c.problems)
	c.mu.Unlock()
	return account(ledgerInput{cfg: c.cfg, results: results, truth: t, digestOn: c.when(digestOn), fanoutOn: c.when(fanoutOn),
		fanout: fan, outboxTx: int(c.outboxTx.Load()), redriven: redriven,
		quiet: quiet, wall: time.Since(c.start), timeline: timeline, problems: problems, clock: run, clockTruth: after})
}

// Print writes the ledger as a table: the figures, then every invariant
// with the ids that break it. One row a figure: the rows share their form,
// as a table's rows do, and nothing else.
func (l *Ledger) Print(w io.Writer) {
	f := l.Figures
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, v any) { fmt.Fprintf(tw, "  %s\t%v\n", name, v) }
	fmt.Fprintf(tw, "chaos ledger: %d jobs, seed %d, wall time %s\n", l.N, l.Seed, l.WallTime)
	if len(l.Mutations) > 0 {
		fmt.Fprintf(tw, "  MUTATED RUNNER: %s\n", strings.Join(l.Mutations, ", "))
	}
	row("enqueue requests (attempts)", f.Requests)
	row("jobs accepted", f.JobsAccepted)
	row("  delayed", f.Delayed)
	row("  poisoned (can never succeed)", f.Poisoned)
	row("twin requests (same key, at once)", f.TwinRequests)
	row("first attempts failed by the front (5xx)", f.FrontFaults)
	row("duplicates injected (straight to a queue)", f.DuplicatesInjected)
	row("deliveries", joinCounts(f.Deliveries, nil))
	row("kills by step", joinCounts(f.Kills, killpoint.Steps))
	row("invocations lost", f.LostInvocations)
	row("worker outcomes", joinCounts(f.Outcomes, nil))
	row("AWS faults by kind", joinCounts(f.Faults, faults.KindNames()))
	row("effects (mails SES holds)", f.Effects)
	row("jobs with exactly one effect", f.ExactlyOne)
	row("jobs with two", f.Two)
	row("jobs with more than two", f.MoreThanTwo)
	row("extra effects explained", joinCounts(f.Explained, nil))
	row("jobs with none", f.NoEffect)
	row("  cancelled (DELETE 202)", f.Cancelled)
	row("  dead-lettered, reading Failed", f.FailedAtEnd)
	row("cancels refused (409)", f.CancelRefused)
	row("dead-lettered during the run", f.DeadLettered)
	row("redriven", f.Redriven)
	row("states at the end (GET)", joinCounts(f.States, nil))
	row("jobs through the outbox", f.OutboxJobs)
	row("  with exactly one effect", f.OutboxExactlyOne)
	row("  written twice (MODIFY)", f.OutboxRewritten)
	row("outbox transactions (refused on purpose, no job)", fmt.Sprintf("%d (%d)", f.OutboxTransactions, f.OutboxRefused))
	row("fan-out ticks sent (scheduled times)", fmt.Sprintf("%d (%d)", f.Ticks, f.TickTimes))
	row("weekly partners, weeks ticked while on", fmt.Sprintf("%d, %d", f.WeeklyPartners, f.WeeksOn))
	row("digests owed (partner and week)", f.Digests)
	row("  with exactly one mail", f.DigestsOne)
	row("fan-out jobs at the end (ticks, pages)", joinCounts(f.FanoutStates, nil))
	c := f.Chain
	row("continuations (ran, cancelled by their parent, waiting)", fmt.Sprintf("%d (%d, %d, %d)", c.Continuations, c.Ran, c.CancelledBy, c.Waiting))
	row("batches (answered 202), their jobs", fmt.Sprintf("%d (%d), %d", c.Batches, c.BatchAccepted, c.BatchJobs))
	row("enqueue 5xx (explained by AWS faults)", fmt.Sprintf("%d (%d)", f.Enqueue5xx, f.Enqueue5xxFaults))
	row("  batch 5xx explained by a kill of the accept", c.BatchKilled)
	row("409 in flight (retried by the client)", f.InFlight409)
	row("quiet at the end", f.Quiet)
	if k := f.Clock; k != nil {
		jumps := make([]string, len(k.Jumps))
		for i, d := range k.Jumps {
			jumps[i] = jumpString(d)
		}
		row("clock jumps, days ahead at the end", fmt.Sprintf("%s; %.0f", strings.Join(jumps, " "), k.OffsetDays))
		row("clock jobs (one-time schedules)", fmt.Sprintf("%d: %s", k.Jobs, joinCounts(k.Fates, []string{FatePlain, FateCancelled, FateRanNow, "swept"})))
		row("  firings sent again (late, repeated)", k.Repeats)
		row("  expired items deleted (TTL)", k.Reaped)
		row("  mails, extra ones explained", fmt.Sprintf("%d, %s", k.Mails, joinCounts(k.Explained, nil)))
		row("  schedules left after the sweep, after the last jump", fmt.Sprintf("%d, %d", k.SweptOrphans, k.LeftoverAtEnd))
		row("clock fan-out week, switched off mid-week", fmt.Sprintf("%s, %v", k.Week, k.SwitchedOff))
		row("  partners with one digest of it", fmt.Sprintf("%d of %d", k.PartnersOne, k.Partners))
		row("  odd ids recorded with their reason", fmt.Sprintf("%d of %d", k.OddRecorded, k.OddIDs))
		row("clock relay cases (items relayed again)", k.RelayCases)
	}
	fmt.Fprintln(tw, "invariants")
	for _, i := range l.Invariants {
		mark := "ok"
		if !i.OK() {
			mark = "BROKEN"
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s", i.Name, i.Count, mark)
		if len(i.IDs) > 0 {
			ids := i.IDs[:min(len(i.IDs), shownIDs)]
			more := ""
			if i.Count > len(ids) {
				more = fmt.Sprintf(" … and %d more (the JSON ledger lists up to %d)", i.Count-len(ids), maxIDs)
			}
			fmt.Fprintf(tw, "\t%s%s", strings.Join(ids, "; "), more)
		}
		fmt.Fprintln(tw)
	}
	for _, p := range l.Problems {
		fmt.Fprintf(tw, "  campaign problem: %s\n", p)
	}
	_ = tw.Flush()
	printStories(w, l.Stories)
}

// jumpString writes a jump of the clock (in days) as days, or as hours and
// minutes when shorter than a day.
func jumpString(days float64) string {
	d := time.Duration(days * float64(day)).Round(time.Minute)
	if d >= day {
		return strconv.Itoa(int(d/day)) + "d"
	}
	s := strings.TrimSuffix(d.String(), "0s")
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// shownIDs is how many ids of a broken invariant the table shows.
const shownIDs = 5

// WriteJSON writes the ledger to path as indented JSON.
func (l *Ledger) WriteJSON(path string) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// joinCounts writes counts as "a 1, b 2", in order's order, then the rest
// sorted.
func joinCounts(m map[string]int, order []string) string {
	keys := slices.Clone(order)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
