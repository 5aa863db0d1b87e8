package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A bad command line is exit 2 and says what is wrong, before any stack
// starts.
func TestRunRefusesABadCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-mutate", "no-sleep"}, "unknown mutation"},
		{[]string{"-kill-at", "after-lunch=0.5"}, "kill-at"},
		{[]string{"-faults", "dynamodb:*:explode"}, "unknown kind"},
		{[]string{"-n"}, "flag needs an argument"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out bytes.Buffer
		args := append([]string{"-state-dir", filepath.Join(t.TempDir(), "state")}, tc.args...)
		code, err := run(context.Background(), args, &out, &out)
		if code != 2 || err == nil || !strings.Contains(err.Error()+out.String(), tc.want) {
			t.Errorf("run %v = %d, %v (%s); want 2 and %q", tc.args, code, err, out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	if code, _ := run(context.Background(), []string{"-h"}, &out, &out); code != 0 || !strings.Contains(out.String(), "-mutate") {
		t.Errorf("-h = %d, %q; want 0 and the flags", code, out.String())
	}
}
