package devstack

import (
	"errors"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// take listens on a free loopback port for the test's duration.
func take(t *testing.T) (addr string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// free is a loopback port free a moment ago.
func free(t *testing.T) (addr string, port int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// Every port the stack opens is checked before it starts: each one taken
// is named with what listens there and the flag that moves it, and the
// message ends with the ARGS of a run on ports that are free.
func TestCheckPortsNamesEachTakenPortWithItsFlag(t *testing.T) {
	for _, tc := range []struct {
		flag, what string
	}{
		{APIAddrFlag, "the API"},
		{WebhookAddrFlag, "the webhook receiver"},
		{OTLPAddrFlag, "the OTLP receiver"},
		{MotoPortFlag, "moto"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			opts := Options{}
			addrs := map[string]string{}
			var motoPort int
			for _, f := range []string{APIAddrFlag, WebhookAddrFlag, OTLPAddrFlag, MotoPortFlag} {
				var addr string
				var port int
				if f == tc.flag {
					addr, port = take(t)
				} else {
					addr, port = free(t)
				}
				addrs[f] = addr
				if f == MotoPortFlag {
					motoPort = port
				}
			}
			opts.APIAddr, opts.WebhookAddr, opts.OTLPAddr, opts.MotoPort = addrs[APIAddrFlag], addrs[WebhookAddrFlag], addrs[OTLPAddrFlag], motoPort
			err := CheckPorts(opts.Ports())
			if !errors.Is(err, ErrPortInUse) {
				t.Fatalf("CheckPorts = %v; want ErrPortInUse", err)
			}
			msg := err.Error()
			for _, want := range []string{addrs[tc.flag] + " is in use", tc.what, tc.flag + " moves it", "another `make run`", `make run ARGS="` + tc.flag + " "} {
				if !strings.Contains(msg, want) {
					t.Errorf("the message does not say %q:\n%s", want, msg)
				}
			}
			if n := strings.Count(msg, " is in use"); n != 1 {
				t.Errorf("the message names %d ports in use; want the one taken:\n%s", n, msg)
			}
		})
	}
}

// A second stack beside a running default one finds all four taken: one
// message names them all, and the ARGS it suggests start a stack whose
// ports are all free and all different.
func TestCheckPortsSuggestsFreePortsForEveryTakenOne(t *testing.T) {
	api, _ := take(t)
	hook, _ := take(t)
	otlp, _ := take(t)
	_, motoPort := take(t)
	opts := Options{APIAddr: api, WebhookAddr: hook, OTLPAddr: otlp, MotoPort: motoPort}
	err := CheckPorts(opts.Ports())
	if err == nil {
		t.Fatal("CheckPorts passed with every port taken")
	}
	msg := err.Error()
	t.Log(msg)
	if n := strings.Count(msg, " is in use"); n != 4 {
		t.Fatalf("the message names %d ports in use; want 4:\n%s", n, msg)
	}
	m := regexp.MustCompile(`make run ARGS="([^"]*)"`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no ARGS suggested:\n%s", msg)
	}
	f := strings.Fields(m[1])
	got := map[string]string{}
	for i := 0; i+1 < len(f); i += 2 {
		got[f[i]] = f[i+1]
	}
	next := Options{APIAddr: got[APIAddrFlag], WebhookAddr: got[WebhookAddrFlag], OTLPAddr: got[OTLPAddrFlag]}
	next.MotoPort, _ = strconv.Atoi(got[MotoPortFlag])
	if len(got) != 4 || next.MotoPort == 0 {
		t.Fatalf("suggested %q; want all four flags", m[1])
	}
	if err := CheckPorts(next.Ports()); err != nil {
		t.Errorf("the suggested ports %q do not pass: %v", m[1], err)
	}
}

// The stack's own addresses may not share a port: the README's old
// example (--api-addr 127.0.0.1:3001) gave the API the webhook receiver's
// default port and failed half a second later with a raw bind error.
func TestCheckPortsRefusesAPortGivenTwice(t *testing.T) {
	addr, port := free(t)
	_, motoPort := free(t)
	_, otlpPort := free(t)
	opts := Options{APIAddr: addr, WebhookAddr: "127.0.0.1:" + strconv.Itoa(port), OTLPAddr: "127.0.0.1:" + strconv.Itoa(otlpPort), MotoPort: motoPort}
	err := CheckPorts(opts.Ports())
	if !errors.Is(err, ErrPortInUse) {
		t.Fatalf("CheckPorts = %v; want ErrPortInUse", err)
	}
	for _, want := range []string{APIAddrFlag + " and " + WebhookAddrFlag + " both name port " + strconv.Itoa(port), `make run ARGS="` + WebhookAddrFlag} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message does not say %q:\n%v", want, err)
		}
	}
}

// Port 0 is any free port (tests start stacks so), and a stack on another
// endpoint, or with traces off, opens no moto or OTLP port.
func TestPortsOfTheOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"default", Options{APIAddr: "127.0.0.1:3000", WebhookAddr: "127.0.0.1:3001", OTLPAddr: "127.0.0.1:4318", MotoPort: 5000},
			[]string{APIAddrFlag + "=127.0.0.1:3000", WebhookAddrFlag + "=127.0.0.1:3001", OTLPAddrFlag + "=127.0.0.1:4318", MotoPortFlag + "=127.0.0.1:5000"}},
		{"free ports", Options{APIAddr: "127.0.0.1:0", MotoPort: 5000},
			[]string{APIAddrFlag + "=127.0.0.1:0", WebhookAddrFlag + "=127.0.0.1:0", OTLPAddrFlag + "=127.0.0.1:0", MotoPortFlag + "=127.0.0.1:5000"}},
		{"endpoint, traces off", Options{APIAddr: "127.0.0.1:3000", OTLPAddr: "off", Endpoint: "http://127.0.0.1:4566"},
			[]string{APIAddrFlag + "=127.0.0.1:3000", WebhookAddrFlag + "=127.0.0.1:0"}},
	} {
		var got []string
		for _, p := range tc.opts.Ports() {
			got = append(got, p.Flag+"="+p.Addr)
		}
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s: Ports = %q; want %q", tc.name, got, tc.want)
		}
	}
	if err := CheckPorts(Options{APIAddr: "127.0.0.1:0", OTLPAddr: "off", AWS: true}.Ports()); err != nil {
		t.Errorf("free ports: %v", err)
	}
	if err := CheckPorts([]Port{{What: "the API", Flag: APIAddrFlag, Addr: "3000"}}); err == nil || !strings.Contains(err.Error(), "--api-addr \"3000\" is not a host:port") {
		t.Errorf("an address without a host: %v", err)
	}
}
