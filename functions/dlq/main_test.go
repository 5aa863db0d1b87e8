package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/obs"
)

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		missing []string
	}{
		{"empty", map[string]string{}, []string{"STAGE", "DEAD_LETTERS_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "QUEUE_URL_CRITICAL"}},
		{"complete", map[string]string{
			"STAGE": "local", "DEAD_LETTERS_TABLE": "d", "JOBS_TABLE": "j", "MARKERS_TABLE": "m",
			"QUEUE_URL_CRITICAL": "http://q/c", "QUEUE_URL_DEFAULT": "http://q/d", "QUEUE_URL_BULK": "http://q/b",
			"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []string{"STAGE", "DEAD_LETTERS_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "QUEUE_URL_CRITICAL", "QUEUE_URL_DEFAULT", "QUEUE_URL_BULK"} {
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
