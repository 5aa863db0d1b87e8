//go:build integration

package bench

import (
	"context"
	"strconv"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// make bench's batch cost measures real calls: a single enqueue writes
// about 3 times, a batched job a small fraction of that.
func TestBatchCostCountsTheWrites(t *testing.T) {
	rows, err := BatchCost(context.Background(), testenv.Moto(t).Endpoint, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("rows %+v; want single and batched", rows)
	}
	single, err1 := strconv.ParseFloat(rows[0].Value, 64)
	batched, err2 := strconv.ParseFloat(rows[1].Value, 64)
	if err1 != nil || err2 != nil || single < 2 || batched <= 0 || batched > 0.5 || !rows[1].OK {
		t.Fatalf("rows %+v; want about 3 writes a single job, a fraction of one a batched job", rows)
	}
}
