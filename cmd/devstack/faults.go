package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
)

// faultsFlagHelp is the --faults usage line.
const faultsFlagHelp = "inject faults into the functions' AWS calls, e.g. " +
	"'dynamodb:*:throttle=0.02,dynamodb:PutItem:drop=0.02,sqs:SendMessage:500=0.02,ses:*:drop=0.01,ssm:*:down@1m-2m' " +
	"(kinds: throttle, throttle(R/s), 500, 503, reset, delay(D), drop, drop500, down)"

// faultOptions reads --faults: the stack's chaos options that inject them.
// Faults need the local proxy, so they do not go with --aws.
func faultOptions(spec string, useAWS bool, out io.Writer) (devstack.Chaos, error) {
	if strings.TrimSpace(spec) == "" {
		return devstack.Chaos{}, nil
	}
	if useAWS {
		return devstack.Chaos{}, usageError{errors.New("--faults works on the local endpoint's calls, not with --aws")}
	}
	rules, err := faults.Parse(spec)
	if err != nil {
		return devstack.Chaos{}, usageError{err}
	}
	names := make([]string, len(rules))
	for i, r := range rules {
		names[i] = r.String()
	}
	fmt.Fprintf(out, "injecting faults into the functions' AWS calls: %s\n", strings.Join(names, ", "))
	return devstack.Chaos{ProxyHooks: []awsproxy.Hook{faults.New(rules, 1).Hook}}, nil
}
