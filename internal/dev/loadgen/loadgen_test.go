package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunCountsEveryRequestOnce(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Args map[string]string `json:"args"`
			Key  string            `json:"key"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &body); err != nil || body.Args["userId"] != "u-demo-1" || body.Key == "" ||
			r.URL.Path != "/v1/jobs/email.welcome.v1" || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		dup := keys[r.Header.Get("Idempotency-Key")]
		keys[r.Header.Get("Idempotency-Key")] = true
		n := len(keys)
		mu.Unlock()
		switch {
		case dup:
			w.WriteHeader(http.StatusConflict)
		case n%10 == 0:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	}))
	defer srv.Close()
	var progress bytes.Buffer
	res, err := Run(context.Background(), Config{URL: srv.URL, Requests: 100, Concurrency: 8, Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 100 || res.Completed != 100 || res.Failed != 0 || res.Cut {
		t.Fatalf("result %+v; want 100 requests all answered", res)
	}
	if res.ByStatus[202] != 90 || res.ByStatus[503] != 10 || res.ServerErrors != 10 || len(res.ByStatus) != 2 {
		t.Fatalf("by status %v, 5xx %d; want 90×202 and 10×503 (distinct keys, valid bodies)", res.ByStatus, res.ServerErrors)
	}
	if !(res.P50 <= res.P95 && res.P95 <= res.P99 && res.P99 <= res.Max && res.Max > 0) || res.PerSecond <= 0 {
		t.Fatalf("percentiles %v %v %v %v, rate %v", res.P50, res.P95, res.P99, res.Max, res.PerSecond)
	}
	if !strings.Contains(progress.String(), "100/100 requests") {
		t.Fatalf("progress %q; want a final 100/100 line", progress.String())
	}
	var table bytes.Buffer
	if err := res.WriteTable(&table, 8); err != nil || !strings.Contains(table.String(), "202×90 503×10") {
		t.Fatalf("table:\n%s", table.String())
	}
}

func TestRunStopsAtItsTimeBound(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	res, err := Run(context.Background(), Config{URL: srv.URL, Requests: 50, Concurrency: 2, MaxDuration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cut || res.Requests >= 50 || res.Failed != res.Requests {
		t.Fatalf("result %+v; want the run cut, the hung requests counted as failed", res)
	}
}

func TestCheckLoopback(t *testing.T) {
	for u, ok := range map[string]bool{
		"http://127.0.0.1:3000": true, "http://localhost:3000": true, "http://[::1]:3000": true, "http://127.8.0.1": true,
		"http://10.0.0.1:3000": false, "https://api.example.com": false, "http://example.com": false, "127.0.0.1:3000": false, "": false,
	} {
		if err := CheckLoopback(u); (err == nil) != ok {
			t.Errorf("CheckLoopback(%q) = %v; want ok=%v", u, err, ok)
		}
	}
	if _, err := Run(context.Background(), Config{URL: "http://10.1.2.3"}); err == nil {
		t.Fatal("Run accepted a non-loopback URL")
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	for p, want := range map[int]time.Duration{50: 50, 95: 95, 99: 99, 100: 100, 1: 1} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%d = %d; want %d", p, got, want)
		}
	}
	if percentile(nil, 50) != 0 || percentile([]time.Duration{7}, 99) != 7 {
		t.Fatal("edge cases")
	}
}

func TestParseLevels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"32", []int{32}},
		{"1,8,32", []int{1, 8, 32}},
		{" 1 , 8 ", []int{1, 8}},
		{"", nil},
		{"0", nil},
		{"-1", nil},
		{"1,,8", nil},
		{"eight", nil},
	} {
		got, err := ParseLevels(tc.in)
		if tc.want == nil {
			if err == nil || !strings.Contains(err.Error(), "positive integers") {
				t.Errorf("ParseLevels(%q) = %v, %v; want an error", tc.in, got, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParseLevels(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseStat(t *testing.T) {
	line := []byte("4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 1 1 1\n")
	pid, p, ok := parseStat(line)
	if !ok || pid != 4242 || p.ppid != 17 || p.ticks != 325 {
		t.Fatalf("parseStat = %d %+v %v; want 4242, ppid 17, 325 ticks", pid, p, ok)
	}
	if _, _, ok := parseStat([]byte("garbage")); ok {
		t.Fatal("parsed garbage")
	}
}

// TreeCPU counts a process's children.
func TestTreeTicksFollowsChildren(t *testing.T) {
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	ticks, err := treeTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ticks[child.Process.Pid]; !ok {
		t.Fatalf("the child %d is not in the tree %v", child.Process.Pid, ticks)
	}
	if _, err := TreeCPU(context.Background(), os.Getpid(), 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
