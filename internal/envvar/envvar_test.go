package envvar

import (
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/contract"
)

func TestEnv(t *testing.T) {
	vars := map[string]string{
		"QUEUE_URL_CRITICAL": "http://q/c", "QUEUE_URL_DEFAULT": "http://q/d", "PARK_DELAY": "60", "TOGGLE_TTL": "5s", "BAD_INT": "x",
	}
	e := New(func(k string) string { return vars[k] })
	urls := e.QueueURLs()
	if urls[contract.QueueCritical] != "http://q/c" || urls[contract.QueueDefault] != "http://q/d" {
		t.Fatalf("urls %v", urls)
	}
	if d := e.Seconds("PARK_DELAY", 0); d != time.Minute {
		t.Fatalf("park delay %v", d)
	}
	if d := e.Duration("TOGGLE_TTL", 0); d != 5*time.Second {
		t.Fatalf("ttl %v", d)
	}
	if n := e.Int("MISSING", 5); n != 5 {
		t.Fatalf("default %d", n)
	}
	e.Int("BAD_INT", 1)
	err := e.Err()
	if err == nil || !strings.Contains(err.Error(), "QUEUE_URL_BULK") || !strings.Contains(err.Error(), "BAD_INT") {
		t.Fatalf("err %v; want every problem named", err)
	}
}
