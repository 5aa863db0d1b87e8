// Package loadgen puts a bounded load of enqueue requests on a running local
// stack's API and measures it: requests per second, latency percentiles and
// responses by status. It only talks to loopback addresses.
package loadgen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request is one enqueue request: POST /v1/jobs/{Type} with Body.
type Request struct {
	Type string
	Body []byte
}

// Config is one load run.
type Config struct {
	// URL is the API's base URL, e.g. http://127.0.0.1:3000 (loopback only).
	URL string
	// Requests is how many requests to send (1000 when zero).
	Requests int
	// Concurrency is how many clients send at once (32 when zero).
	Concurrency int
	// MaxDuration bounds the whole run (2 minutes when zero): no request
	// starts after it, and those under way are cut.
	MaxDuration time.Duration
	// RequestTimeout bounds one request (30 s when zero).
	RequestTimeout time.Duration
	// Request builds the i-th request (Welcome when nil).
	Request func(i int) Request
	// RunID makes the Idempotency-Keys of this run unique (the start time
	// when empty): request i sends "<RunID>-<i>".
	RunID string
	// Progress, when set, receives a live progress line (rewritten with \r).
	Progress io.Writer
}

// Welcome is the default request: a welcome mail for the demo user
// u-demo-1, each request a job of its own (its own key).
func Welcome(runID string) func(i int) Request {
	return func(i int) Request {
		return Request{Type: "email.welcome.v1", Body: fmt.Appendf(nil, `{"args":{"userId":"u-demo-1"},"key":"load-%s-%d"}`, runID, i)}
	}
}

// Result is what a run measured.
type Result struct {
	// Requests were sent; Completed got a response (any status).
	Requests, Completed int
	// Failed got no response (connection error or timeout).
	Failed int
	// ServerErrors are the responses with a 5xx status.
	ServerErrors int
	// ByStatus counts responses by HTTP status.
	ByStatus map[int]int
	// Duration is the wall time of the run.
	Duration time.Duration
	// PerSecond is completed requests per second of Duration.
	PerSecond float64
	// Latency percentiles and maximum over completed requests.
	P50, P95, P99, Max time.Duration
	// Cut is true when MaxDuration ended the run early.
	Cut bool
}

// ErrNotLoopback refuses a URL that is not on this machine.
var ErrNotLoopback = errors.New("loadgen: only loopback addresses")

// CheckLoopback returns an error unless rawURL is an http URL on a loopback
// address.
func CheckLoopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Hostname() == "" {
		return fmt.Errorf("%w: %q is not an http URL", ErrNotLoopback, rawURL)
	}
	if u.Hostname() == "localhost" {
		return nil
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%w: %s is not a loopback address", ErrNotLoopback, u.Hostname())
	}
	return nil
}

// ParseLevels reads concurrency levels written as a comma-separated list of
// positive integers, e.g. "1,8,32", as the -c flag of loadgen and bench
// takes them.
func ParseLevels(s string) ([]int, error) {
	var levels []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("-c %q: want positive integers separated by commas", s)
		}
		levels = append(levels, c)
	}
	return levels, nil
}

// Run sends the load and returns what it measured. Only a bad configuration
// is an error; failed requests are counted in the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := CheckLoopback(cfg.URL); err != nil {
		return Result{}, err
	}
	cfg = withDefaults(cfg)
	ctx, cancel := context.WithTimeout(ctx, cfg.MaxDuration)
	defer cancel()
	client := &http.Client{
		Timeout: cfg.RequestTimeout,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        cfg.Concurrency,
			MaxIdleConnsPerHost: cfg.Concurrency,
			IdleConnTimeout:     30 * time.Second,
		},
	}
	defer client.CloseIdleConnections()

	var (
		next      atomic.Int64
		mu        sync.Mutex
		latencies = make([]time.Duration, 0, cfg.Requests)
		res       = Result{ByStatus: map[int]int{}}
		sent      atomic.Int64
		done      atomic.Int64
		bad       atomic.Int64
	)
	stopProgress := progress(cfg, &done, &bad)
	start := time.Now()
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.Requests || ctx.Err() != nil {
					return
				}
				sent.Add(1)
				status, took, err := send(ctx, client, cfg, i)
				done.Add(1)
				mu.Lock()
				if err != nil {
					res.Failed++
					bad.Add(1)
				} else {
					res.ByStatus[status]++
					latencies = append(latencies, took)
					if status >= 500 {
						res.ServerErrors++
						bad.Add(1)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.Duration = time.Since(start)
	stopProgress()
	res.Requests = int(sent.Load())
	res.Completed = len(latencies)
	res.Cut = res.Requests < cfg.Requests || errors.Is(ctx.Err(), context.DeadlineExceeded)
	if res.Duration > 0 {
		res.PerSecond = float64(res.Completed) / res.Duration.Seconds()
	}
	slices.Sort(latencies)
	res.P50, res.P95, res.P99 = percentile(latencies, 50), percentile(latencies, 95), percentile(latencies, 99)
	if len(latencies) > 0 {
		res.Max = latencies[len(latencies)-1]
	}
	return res, nil
}

func withDefaults(cfg Config) Config {
	if cfg.Requests <= 0 {
		cfg.Requests = 1000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	cfg.Concurrency = min(cfg.Concurrency, cfg.Requests)
	if cfg.MaxDuration <= 0 {
		cfg.MaxDuration = 2 * time.Minute
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.RunID == "" {
		cfg.RunID = time.Now().UTC().Format("20060102T150405.000")
	}
	if cfg.Request == nil {
		cfg.Request = Welcome(cfg.RunID)
	}
	return cfg
}

func send(ctx context.Context, client *http.Client, cfg Config, i int) (int, time.Duration, error) {
	r := cfg.Request(i)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL+"/v1/jobs/"+url.PathEscape(r.Type), bytes.NewReader(r.Body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", cfg.RunID, i))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 · n)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// progress rewrites one line on cfg.Progress until the returned func is
// called.
func progress(cfg Config, done, bad *atomic.Int64) (stop func()) {
	if cfg.Progress == nil {
		return func() {}
	}
	start := time.Now()
	line := func() {
		n := done.Load()
		fmt.Fprintf(cfg.Progress, "\r  %d/%d requests  %.0f req/s  failed or 5xx: %d ", n, cfg.Requests,
			float64(n)/max(time.Since(start).Seconds(), 0.001), bad.Load())
	}
	end := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-end:
				line()
				fmt.Fprintln(cfg.Progress)
				return
			case <-t.C:
				line()
			}
		}
	}()
	return func() { close(end); <-finished }
}
