package client

import (
	"testing"
	"time"
)

func TestBackoffGrowsWithJitterAndIsCapped(t *testing.T) {
	c := &Client{baseDelay: 100 * time.Millisecond, maxDelay: time.Second}
	for _, tc := range []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{3, 200 * time.Millisecond, 400 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},
		{40, 500 * time.Millisecond, time.Second},
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := c.backoff(tc.attempt)
			if d < tc.min || d > tc.max {
				t.Fatalf("attempt %d: wait %s outside [%s, %s]", tc.attempt, d, tc.min, tc.max)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Fatalf("attempt %d: every wait is the same: no jitter", tc.attempt)
		}
	}
}

func TestRetryAfterHeader(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"3":                             3 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Fri, 02 Jan 2026 03:04:15 GMT": 10 * time.Second,
		"Fri, 02 Jan 2026 03:04:00 GMT": 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("Retry-After %q = %s; want %s", v, got, want)
		}
	}
}

func TestRegionOf(t *testing.T) {
	for host, want := range map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com":     "eu-west-1",
		"abc123.execute-api.cn-north-1.amazonaws.com.cn": "cn-north-1",
		"api.example.com": "",
		"127.0.0.1":       "",
	} {
		if got := regionOf(host); got != want {
			t.Errorf("regionOf(%q) = %q; want %q", host, got, want)
		}
	}
}
