package bench

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// TracingBaseline is the last commit before the runner could trace (the
// parent of the commit that gave runner.Config its TracerProvider): what
// "today" meant for the runner's cost when traces were added. Untraced
// compares the runner without a tracer (a function with no OTLP endpoint)
// against it.
const TracingBaseline = "7675cfc7c7bec9ebd908b1a9c0d478af97b047b3"

// ReleaseFour is the last commit of release 4, before the engine ran any
// payload: the runner of release 5 (the envelope as one payload type on
// the generic runner) costs no more than it did.
const ReleaseFour = "8297cd32f75da8214a494ba18d07490a67b59d5b"

// benchDir is where a tree keeps BenchmarkRunnerBatch10: with the bundle's
// runner since release 5, in the engine before.
func benchDir(src string) string {
	if _, err := os.Stat(filepath.Join(src, "internal", "runner", "bench_test.go")); err == nil {
		return "internal/runner"
	}
	return "engine"
}

// The result line of BenchmarkRunnerBatch10 in one mode, and the figures
// per job it reports (in the order the testing package sorts them).
var (
	benchLine   = regexp.MustCompile(`^BenchmarkRunnerBatch10/(seed|lease)(?:-\d+)?\s`)
	nsPerJob    = regexp.MustCompile(`\s([0-9.]+) ns/job`)
	allocPerJob = regexp.MustCompile(`\s([0-9.]+) allocs/job`)
)

// Untraced measures the runner without a tracer in this checkout (root)
// and at revision rev of its git history, with the same benchmark
// (BenchmarkRunnerBatch10, seed and lease mode), each built once and run
// runs times, alternately, so that both see the same load; it reports the
// medians' difference per job, time and allocations, against the target
// of at most 5 % more. A checkout without rev in its history (a shallow
// clone) gets a row that says so instead of a figure.
func Untraced(ctx context.Context, root, rev string, runs int) ([]Row, error) {
	return Against(ctx, root, rev, "before tracing", runs)
}

// Against is Untraced against any revision rev, named what in the rows.
func Against(ctx context.Context, root, rev, what string, runs int) ([]Row, error) {
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	old := filepath.Join(dir, "baseline")
	if err := extract(ctx, root, rev, old); err != nil {
		return []Row{{"runner", "no endpoint vs " + what + " (" + short(rev) + ")", "n/a: " + err.Error(), "", true}}, nil
	}
	bins := map[string]string{"before": filepath.Join(dir, "before.test"), "now": filepath.Join(dir, "now.test")}
	srcs := map[string]string{"before": old, "now": root}
	for which, src := range srcs {
		cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bins[which], "./"+benchDir(src))
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("bench: build the runner's benchmark (%s): %w\n%s", which, err, out)
		}
	}
	type figures struct{ ns, allocs []float64 }
	got := map[string]map[string]*figures{"before": {}, "now": {}} // which → mode → figures
	for range runs {
		for _, which := range []string{"before", "now"} {
			cmd := exec.CommandContext(ctx, bins[which], "-test.run", "^$", "-test.bench", "^BenchmarkRunnerBatch10$/^(seed|lease)$", "-test.count", "1")
			cmd.Dir = filepath.Join(srcs[which], benchDir(srcs[which]))
			out, err := cmd.CombinedOutput()
			if err != nil {
				return nil, fmt.Errorf("bench: run the runner's benchmark (%s): %w\n%s", which, err, out)
			}
			for line := range strings.Lines(string(out)) {
				m, ns, allocs := benchLine.FindStringSubmatch(line), nsPerJob.FindStringSubmatch(line), allocPerJob.FindStringSubmatch(line)
				if m == nil || ns == nil || allocs == nil {
					continue
				}
				f := got[which][m[1]]
				if f == nil {
					f = &figures{}
					got[which][m[1]] = f
				}
				nsv, _ := strconv.ParseFloat(ns[1], 64)
				allocsv, _ := strconv.ParseFloat(allocs[1], 64)
				f.ns, f.allocs = append(f.ns, nsv), append(f.allocs, allocsv)
			}
		}
	}
	var rows []Row
	for _, mode := range []string{"seed", "lease"} {
		before, now := got["before"][mode], got["now"][mode]
		if before == nil || now == nil {
			return nil, fmt.Errorf("bench: the runner's benchmark reported no %s figures", mode)
		}
		for _, m := range []struct {
			what   string
			b, n   float64
			format func(float64) string
		}{
			{"time", medianOf(before.ns), medianOf(now.ns), func(v float64) string { return fmt.Sprintf("%.1f µs", v/1000) }},
			{"allocations", medianOf(before.allocs), medianOf(now.allocs), func(v float64) string { return fmt.Sprintf("%.1f", v) }},
		} {
			diff := (m.n - m.b) / m.b * 100
			rows = append(rows, Row{"runner", fmt.Sprintf("in-process, %s mode, no endpoint: %s per job vs %s (%s)", mode, m.what, what, short(rev)),
				fmt.Sprintf("%+.1f %% (%s vs %s)", diff, m.format(m.n), m.format(m.b)), "≤ +5 %", diff <= 5})
		}
	}
	return rows, nil
}

// extract writes the tree of rev, from root's git history, into dir.
func extract(ctx context.Context, root, rev, dir string) error {
	cmd := exec.CommandContext(ctx, "git", "-C", root, "archive", "--format=tar", rev)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("git archive %s: %s", short(rev), cmp.Or(strings.TrimSpace(stderr.String()), err.Error()))
	}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			return fmt.Errorf("git archive %s: path %q leaves the tree", short(rev), h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(path, b, os.FileMode(h.Mode)&0o755|0o600); err != nil {
				return err
			}
		}
	}
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// short is rev as a row names it: its first 7 characters.
func short(rev string) string { return rev[:min(len(rev), 7)] }
