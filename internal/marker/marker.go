// Package marker is the bundle's own operations on the markers table,
// beside the engine's store (aws/dynamostore), which reads and writes
// markers for the runner: the redrive's reset of a failed effect
// (ResetFailed). See docs/contract.md.
package marker
