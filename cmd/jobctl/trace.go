package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runstwice/runstwice/internal/dev/otlp"
)

// tracesPath is the local stack's traces API (devstack.TracesPath).
const tracesPath = "/_local/api/traces/"

// barWidth is the width of the time line in characters.
const barWidth = 32

// jobsTrace prints a job's trace as the local stack's receiver holds it
// (GET /_local/api/traces/{jobId}): every span, nested under its parent,
// with its service, kind, start, duration, a bar on the trace's time line
// and the spans it links to. A deployed stack keeps no spans of its own:
// they are in the collector its OtlpEndpoint names.
func (a *app) jobsTrace(ctx context.Context, args []string) error {
	p, err := parseN(args, map[string]bool{"api": true}, 1, "jobs trace", "one job ID")
	if err != nil {
		return err
	}
	id, api := p.pos[0], p.vals["api"]
	if api == "" {
		if a.stage != "local" {
			return usagef("jobs trace: stage %s keeps no spans of its own: read them in the collector its OtlpEndpoint names (or give --api URL of a stack that serves %s)", a.stage, tracesPath)
		}
		if a.stateDir == "" {
			a.stateDir = findStateDir()
		}
		info, ok, err := localStack(a.stateDir)
		if err != nil || !ok || info.APIURL == "" {
			return errors.New("jobs trace: no local stack is running (start one with `make run`); its OTLP receiver keeps the spans")
		}
		api = info.APIURL
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(api, "/")+tracesPath+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("jobs trace: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("jobs trace: %w", err)
	}
	var out struct {
		JobID   string      `json:"jobId"`
		TraceID string      `json:"traceId"`
		Spans   []otlp.Span `json:"spans"`
		Error   string      `json:"error"`
	}
	_ = json.Unmarshal(body, &out)
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return &notFoundError{fmt.Sprintf("no span names job %s (yet): spans reach the stack when each invocation ends", id)}
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("jobs trace: %s answered %s: %s", api, resp.Status, cmp.Or(out.Error, string(body)))
	}
	if a.json {
		_, err := a.stdout.Write(body)
		return err
	}
	rows, total := otlp.Waterfall(out.Spans)
	fmt.Fprintf(a.stdout, "job %s: trace %s, %d spans, %s\n", id, out.TraceID, len(rows), total.Round(time.Microsecond))
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SPAN\tSERVICE\tKIND\tSTART\tDURATION\tTIME LINE\tLINKS TO")
	for _, r := range rows {
		name := strings.Repeat("  ", r.Depth) + r.Name
		if r.Status == "error" {
			name += " (error)"
		}
		var links []string
		for _, l := range r.Links {
			links = append(links, cmp.Or(otlp.Name(out.Spans, l.SpanID), l.SpanID+" (another trace)"))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t+%s\t%s\t%s\t%s\n", name, r.Service, r.Kind, r.Offset.Round(time.Microsecond),
			r.Duration.Round(time.Microsecond), bar(r.Offset, r.Duration, total), strings.Join(links, ", "))
	}
	return tw.Flush()
}

// bar draws a span on a time line of barWidth characters.
func bar(offset, d, total time.Duration) string {
	total = max(total, time.Microsecond)
	from := min(int(int64(barWidth)*int64(offset)/int64(total)), barWidth-1)
	n := max(int(int64(barWidth)*int64(d)/int64(total)), 1)
	n = min(n, barWidth-from)
	return "|" + strings.Repeat(" ", from) + strings.Repeat("█", n) + strings.Repeat(" ", barWidth-from-n) + "|"
}
