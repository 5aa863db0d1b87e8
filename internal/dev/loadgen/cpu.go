package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockTicks is the kernel's USER_HZ, in which /proc reports CPU time (100
// on every Linux platform Go supports).
const clockTicks = 100

// TreeCPU measures the CPU the process pid and all its descendants use over
// the period, in cores (1.0 = one core busy the whole time). It reads /proc
// (Linux only); processes that end during the period count up to their end.
func TreeCPU(ctx context.Context, pid int, period time.Duration) (float64, error) {
	before, err := treeTicks(pid)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	t := time.NewTimer(period)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
	}
	after, err := treeTicks(pid)
	if err != nil {
		return 0, err
	}
	used := 0
	for p, n := range after {
		used += n - before[p] // a process new in the period counts from 0
	}
	return float64(used) / clockTicks / time.Since(start).Seconds(), nil
}

// treeTicks returns utime+stime of pid and its descendants, by pid.
func treeTicks(root int) (map[int]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil || len(stats) == 0 {
		return nil, fmt.Errorf("loadgen: no /proc to measure CPU with (Linux only)")
	}
	type proc struct{ ppid, ticks int }
	procs := map[int]proc{}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		pid, p, ok := parseStat(b)
		if ok {
			procs[pid] = proc{p.ppid, p.ticks}
		}
	}
	if _, ok := procs[root]; !ok {
		return nil, fmt.Errorf("loadgen: no process %d", root)
	}
	children := map[int][]int{}
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	out := map[int]int{}
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		out[pid] = procs[pid].ticks
		queue = append(queue, children[pid]...)
	}
	return out, nil
}

// parseStat reads pid, ppid and utime+stime from a /proc/<pid>/stat line.
// The command name (field 2) may hold spaces and parentheses: fields are
// counted after its last ')'.
func parseStat(b []byte) (pid int, p struct{ ppid, ticks int }, ok bool) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return 0, p, false
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return 0, p, false
	}
	f := bytes.Fields(b[end+1:]) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, p, false
	}
	p.ppid, _ = strconv.Atoi(string(f[1]))  // field 4
	utime, _ := strconv.Atoi(string(f[11])) // field 14
	stime, _ := strconv.Atoi(string(f[12])) // field 15
	p.ticks = utime + stime
	return pid, p, true
}
