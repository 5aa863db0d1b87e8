package bench

import (
	"testing"
	"time"
)

// The percentiles are the nearest-rank ones: of 1..100 ms, the median is
// 50 ms and the 99th 99 ms; of one value, that value; of none, zero.
func TestPercentiles(t *testing.T) {
	var d []time.Duration
	for i := 100; i >= 1; i-- {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if p50, p99 := percentiles(d); p50 != 50*time.Millisecond || p99 != 99*time.Millisecond {
		t.Fatalf("p50 %s p99 %s", p50, p99)
	}
	if p50, p99 := percentiles(d[:1]); p50 != 100*time.Millisecond || p99 != 100*time.Millisecond {
		t.Fatalf("one value: %s %s", p50, p99)
	}
	if p50, p99 := percentiles(nil); p50 != 0 || p99 != 0 {
		t.Fatalf("none: %s %s", p50, p99)
	}
}
