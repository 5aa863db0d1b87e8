package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/memstore"
)

// A lease keeps a twin out while the effect runs; the claim settles the
// marker, and a second claim reports that the job is done already.
func ExampleNew() {
	ctx := context.Background()
	s := memstore.New()
	k := engine.Key{Type: "billing.invoice-ready", JobID: "job-1"}
	_, err := s.Lease(ctx, k, engine.Mark{Owner: "worker-a", Until: time.Now().Add(time.Minute)})
	fmt.Println("a leases:", err)
	_, err = s.Lease(ctx, k, engine.Mark{Owner: "worker-b", Until: time.Now().Add(time.Minute)})
	fmt.Println("b leases:", err)
	won, err := s.Claim(ctx, k, engine.Mark{Owner: "worker-a"})
	fmt.Println("a claims:", won, err)
	won, err = s.Claim(ctx, k, engine.Mark{})
	fmt.Println("claim again:", won, err)
	// Output:
	// a leases: <nil>
	// b leases: marker: lease held by another worker
	// a claims: true <nil>
	// claim again: false <nil>
}
