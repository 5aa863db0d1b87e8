//go:build integration

package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// make bench's init measure starts every function with the environment
// template.yaml gives it: a function that gains a required variable still
// starts (a hand-kept list once missed one, and make bench failed with
// HTTP 502), and every init is measured, without an OTLP endpoint and
// with one.
func TestInitStartsEveryFunction(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rows, err := Init(ctx, root, testenv.Moto(t).Endpoint, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 12 {
		t.Fatalf("%d init rows; want two per function (enqueue, email, dlq, outbox, chain, webhook): %+v", len(rows), rows)
	}
	for _, r := range rows {
		if r.Value == "" || r.Value == "0.0 ms" || strings.HasSuffix(r.Value, "(0.0 ms)") {
			t.Errorf("%s: no init time measured (%q)", r.Name, r.Value)
		}
	}
}
