package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestFaultOptions(t *testing.T) {
	var out bytes.Buffer
	c, err := faultOptions("", false, &out)
	if err != nil || len(c.ProxyHooks) != 0 || out.Len() != 0 {
		t.Fatalf("no --faults = %+v, %v, %q; want nothing", c, err, out.String())
	}
	c, err = faultOptions("dynamodb:*:throttle=0.02,ssm:*:down@1m-2m", false, &out)
	if err != nil || len(c.ProxyHooks) != 1 {
		t.Fatalf("--faults = %+v, %v; want one hook", c, err)
	}
	if !strings.Contains(out.String(), "dynamodb:*:throttle=0.02, ssm:*:down@1m0s-2m0s") {
		t.Fatalf("printed %q; want the rules", out.String())
	}
	for _, tc := range []struct {
		spec   string
		useAWS bool
	}{{"dynamodb:*:explode", false}, {"dynamodb:*:throttle", true}} {
		var usage usageError
		if _, err := faultOptions(tc.spec, tc.useAWS, &out); !errors.As(err, &usage) {
			t.Errorf("faultOptions(%q, aws=%v) = %v; want a usage error", tc.spec, tc.useAWS, err)
		}
	}
}
