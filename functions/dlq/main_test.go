package main

import (
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/testkit"
)

func TestBuild(t *testing.T) {
	queues := testkit.WorkQueueEnv("http://q", "")
	for _, tc := range []struct {
		name    string
		env     map[string]string
		missing []string
	}{
		{"empty", map[string]string{}, []string{"STAGE", "DEAD_LETTERS_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "QUEUE_URL_CRITICAL"}},
		{"complete", testkit.With(map[string]string{
			"STAGE": "local", "DEAD_LETTERS_TABLE": "d", "JOBS_TABLE": "j", "MARKERS_TABLE": "m",
			"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		}, queues), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range append([]string{"STAGE", "DEAD_LETTERS_TABLE", "JOBS_TABLE", "MARKERS_TABLE"}, slices.Collect(maps.Keys(queues))...) {
				t.Setenv(n, tc.env[n])
			}
			for n, v := range tc.env {
				t.Setenv(n, v)
			}
			_, err := build(context.Background(), obs.NewLogger(io.Discard, "error"))
			if len(tc.missing) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			for _, want := range tc.missing {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v does not name %s", err, want)
				}
			}
		})
	}
}
