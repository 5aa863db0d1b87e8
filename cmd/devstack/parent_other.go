//go:build !linux

package main

// stopWithParent is a no-op where the kernel offers no parent-death signal.
func stopWithParent() {}
