// Package bench measures what runstwice costs, for `make bench`: the runner
// in-process with fakes (time and allocations per job), the worker on moto
// (DynamoDB calls per job and time per batch with a simulated effect), the
// enqueue API through the running local stack under concurrent load, and
// each function's init time under the runtime emulator. Each section returns
// rows of one table; nothing here is a test assertion — the numbers are
// printed with their targets beside them.
package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one measured figure.
type Row struct {
	// Section groups rows: "runner", "worker", "enqueue", "init".
	Section string
	// Name says what was measured.
	Name string
	// Value is the figure with its unit.
	Value string
	// Target is what it should be ("" for none).
	Target string
	// OK is false when the figure misses its target.
	OK bool
}

// Print writes rows as one aligned table.
func Print(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tMEASURE\tVALUE\tTARGET\t")
	for _, r := range rows {
		mark := ""
		if r.Target != "" && !r.OK {
			mark = "  ← misses its target"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Section, r.Name, r.Value, r.Target, mark)
	}
	return tw.Flush()
}

// Missed lists the rows that miss their targets.
func Missed(rows []Row) []Row {
	return slices.DeleteFunc(slices.Clone(rows), func(r Row) bool { return r.Target == "" || r.OK })
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func perJob(n, jobs int) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", float64(n)/float64(jobs)), "0"), ".")
}
