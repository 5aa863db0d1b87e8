package loadgen

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable writes r as a table, with the concurrency it ran at.
func (r Result) WriteTable(w io.Writer, concurrency int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "clients\trequests\treq/s\tp50\tp95\tp99\tmax\t5xx\tno response\tby status")
	fmt.Fprintf(tw, "%d\t%d\t%.1f\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n", concurrency, r.Requests, r.PerSecond,
		ms(r.P50), ms(r.P95), ms(r.P99), ms(r.Max), r.ServerErrors, r.Failed, r.statuses())
	if r.Cut {
		fmt.Fprintln(tw, "(cut short by the time bound)")
	}
	return tw.Flush()
}

func (r Result) statuses() string {
	codes := make([]int, 0, len(r.ByStatus))
	for c := range r.ByStatus {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d×%d", c, r.ByStatus[c])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
}
