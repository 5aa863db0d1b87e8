// Package librarytest proves the library's modules (engine, the AWS
// adapters) as a Go team that is not this bundle meets them: their public
// surface against the listings in api/, programs in modules of their own
// built on them with the go.sum and module graph they bring, and the
// adapters' rules on moto. Only its tests have code.
package librarytest
