// Package marker is the bundle's own operations on the markers table,
// beside the engine's store (aws/dynamostore), which reads and writes
// markers for the runner: the redrive's reset of a failed effect
// (ResetFailed). See docs/contract.md.
package marker

import (
	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/internal/vclock"
)

// NewStore is the engine's marker store on table, on the bundle's clock
// (vclock: the chaos build's virtual clock, the real one otherwise), as
// every part of the bundle that reads or writes markers uses it.
func NewStore(client dynamostore.API, table string) *dynamostore.Store {
	s := dynamostore.New(client, table)
	s.Now = vclock.Now
	return s
}
