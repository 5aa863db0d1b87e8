//go:build integration

package bench

import (
	"context"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// make bench's Do rows count real calls on moto: a first call two writes,
// a replay one read, the middleware not one call more.
func TestDoRowsCountTheCalls(t *testing.T) {
	rows, err := Do(context.Background(), testenv.Moto(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.OK {
			t.Errorf("%s: %s; want %s", r.Name, r.Value, r.Target)
		}
	}
}
