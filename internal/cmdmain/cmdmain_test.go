package cmdmain

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"testing"
)

func TestExit(t *testing.T) {
	usage := errors.New("usage")
	code := func(err error) int {
		if errors.Is(err, usage) {
			return 2
		}
		return 1
	}
	for _, tc := range []struct {
		name   string
		err    error
		code   func(error) int
		want   int
		stderr string
	}{
		{"success", nil, code, 0, ""},
		{"help", fmt.Errorf("parse: %w", flag.ErrHelp), code, 0, ""},
		{"the command's code", fmt.Errorf("bad flag: %w", usage), code, 2, "tool: bad flag: usage\n"},
		{"no code: 1", errors.New("boom"), nil, 1, "tool: boom\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := Exit(&stderr, "tool", tc.err, tc.code); got != tc.want || stderr.String() != tc.stderr {
				t.Errorf("Exit = %d, stderr %q; want %d, %q", got, stderr.String(), tc.want, tc.stderr)
			}
		})
	}
}
