package main

import (
	"context"
	"strings"
	"testing"
)

// TestBuildRefusesAMissingVariable: the function does not start without
// one of the variables it needs, and says which; with all of them it is
// wired.
func TestBuildRefusesAMissingVariable(t *testing.T) {
	for _, missing := range environment {
		t.Run(missing, func(t *testing.T) {
			for _, n := range environment {
				t.Setenv(n, "set")
			}
			t.Setenv(missing, "")
			_, err := build(context.Background())
			if err == nil || !strings.Contains(err.Error(), missing+" is not set") {
				t.Fatalf("build = %v; want it to name %s", err, missing)
			}
		})
	}
	for _, n := range environment {
		t.Setenv(n, "set")
	}
	// No profile or file of this machine's: the SDK's defaults alone.
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/credentials")
	if _, err := build(context.Background()); err != nil {
		t.Fatalf("build with every variable = %v", err)
	}
}
