package docs

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/devstack"
)

// defaultPorts are the ports of a `make run` without ARGS, by the flag
// that moves each (cmd/devstack's defaults).
var defaultPorts = map[string]int{devstack.APIAddrFlag: 3000, devstack.WebhookAddrFlag: 3001, devstack.OTLPAddrFlag: 4318, devstack.MotoPortFlag: 5000}

// The tour's and docs/local.md's `make run ARGS=…` for a second stack
// works next to a running default one: it moves every port the stack
// opens, to ports neither the default stack nor another of its own uses
// (the README's old example gave the API the webhook receiver's 3001 and
// left the OTLP and webhook ports where the running stack holds them).
func TestTheSecondStacksPortsAreFree(t *testing.T) {
	example := regexp.MustCompile(`make run ARGS="([^"]*--api-addr[^"]*)"`)
	for _, name := range []string{filepath.Join("docs", "tour.md"), filepath.Join("docs", "local.md")} {
		b, err := os.ReadFile(filepath.Join(root(t), name))
		if err != nil {
			t.Fatal(err)
		}
		m := example.FindStringSubmatch(string(b))
		if m == nil {
			t.Errorf("%s shows no make run ARGS=\"--api-addr …\" for a second stack", name)
			continue
		}
		f := strings.Fields(m[1])
		used := map[int]string{}
		for flag, port := range defaultPorts {
			used[port] = "the default stack's " + flag
		}
		for flag := range defaultPorts {
			i := strings.Index(m[1], flag+" ")
			if i < 0 {
				t.Errorf("%s: ARGS=%q leaves %s at %d, which the running stack holds", name, m[1], flag, defaultPorts[flag])
				continue
			}
			value := strings.Fields(m[1][i+len(flag):])[0]
			if _, p, err := net.SplitHostPort(value); err == nil {
				value = p
			}
			port, err := strconv.Atoi(value)
			if err != nil {
				t.Errorf("%s: %s %q is not a port", name, flag, value)
				continue
			}
			if who, taken := used[port]; taken {
				t.Errorf("%s: ARGS=%q gives %s port %d, which is %s", name, m[1], flag, port, who)
			}
			used[port] = "this stack's " + flag
		}
		if len(f) != 2*len(defaultPorts) {
			t.Errorf("%s: ARGS=%q; want the four port flags, each with its value", name, m[1])
		}
	}
}
