package devstack

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// ErrPortInUse means an address the stack needs is taken (or given twice).
var ErrPortInUse = errors.New("port in use")

// Port is one address the stack listens on, and the flag that moves it.
type Port struct {
	// What listens there, e.g. "the API".
	What string
	// Flag moves it, e.g. "--api-addr".
	Flag string
	// Addr is host:port ("127.0.0.1:0" is any free port, never taken).
	Addr string
}

// arg is the flag with a value at port, as `make run ARGS=…` takes it.
func (p Port) arg(port int) string {
	host, _, _ := net.SplitHostPort(p.Addr)
	if p.Flag == MotoPortFlag {
		return fmt.Sprintf("%s %d", p.Flag, port)
	}
	return fmt.Sprintf("%s %s", p.Flag, net.JoinHostPort(host, strconv.Itoa(port)))
}

// The flags of cmd/devstack that move the stack's ports.
const (
	APIAddrFlag     = "--api-addr"
	WebhookAddrFlag = "--webhook-addr"
	OTLPAddrFlag    = "--otlp-addr"
	MotoPortFlag    = "--moto-port"
)

// Ports lists every address the stack opens with opts: the API (and the
// web view), the webhook receiver, the OTLP receiver (unless "off") and
// moto (unless the stack runs against an endpoint or AWS).
func (opts Options) Ports() []Port {
	ports := []Port{
		{What: "the API and the web view", Flag: APIAddrFlag, Addr: opts.APIAddr},
		{What: "the webhook receiver", Flag: WebhookAddrFlag, Addr: anyPort(opts.WebhookAddr)},
	}
	if opts.OTLPAddr != "off" {
		ports = append(ports, Port{What: "the OTLP receiver of the functions' spans", Flag: OTLPAddrFlag, Addr: anyPort(opts.OTLPAddr)})
	}
	if !opts.AWS && opts.Endpoint == "" {
		ports = append(ports, Port{What: "moto, the local AWS", Flag: MotoPortFlag, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(opts.MotoPort))})
	}
	return ports
}

func anyPort(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}

// CheckPorts makes sure every one of ports can be listened on, before the
// stack starts anything: none given twice, none taken. Its error names
// every address in the way with the flag that moves it, and the ARGS of a
// `make run` whose ports are free now.
func CheckPorts(ports []Port) error {
	nums := make([]int, len(ports))
	for i, p := range ports {
		_, port, err := net.SplitHostPort(p.Addr)
		if err == nil {
			nums[i], err = strconv.Atoi(port)
		}
		if err != nil || nums[i] < 0 || nums[i] > 65535 {
			return fmt.Errorf("%s %q is not a host:port address (e.g. 127.0.0.1:3000)", p.Flag, p.Addr)
		}
	}
	for i, p := range ports {
		for j := range i {
			if nums[i] != 0 && nums[i] == nums[j] && sameHost(p.Addr, ports[j].Addr) {
				return failure(ErrPortInUse, "%s and %s both name port %d: %s and %s each need a port of their own, e.g. make run ARGS=\"%s\"",
					ports[j].Flag, p.Flag, nums[i], ports[j].What, p.What, p.arg(freePort(ports, nums, i)))
			}
		}
	}
	var taken []int
	for i, p := range ports {
		if nums[i] == 0 {
			continue
		}
		ln, err := net.Listen("tcp", p.Addr)
		switch {
		case err == nil:
			ln.Close()
		case errors.Is(err, syscall.EADDRINUSE):
			taken = append(taken, i)
		default:
			return fmt.Errorf("cannot listen on %s (%s, %s): %w", p.Addr, p.What, p.Flag, err)
		}
	}
	if len(taken) == 0 {
		return nil
	}
	var b strings.Builder
	args := make([]string, 0, len(taken))
	for _, i := range taken {
		fmt.Fprintf(&b, "%s is in use: %s (%s moves it)\n", ports[i].Addr, ports[i].What, ports[i].Flag)
		port := freePort(ports, nums, i)
		nums[i] = port // the next suggestion avoids it
		args = append(args, ports[i].arg(port))
	}
	b.WriteString("Is another `make run` running (from another checkout, or with --state-dir)? Another program may hold a port ")
	b.WriteString("(a local OpenTelemetry collector listens on 4318; on macOS, the AirPlay Receiver on 5000). ")
	fmt.Fprintf(&b, "Stop it, or run on ports that are free now: make run ARGS=\"%s\"", strings.Join(args, " "))
	return failure(ErrPortInUse, "%s", b.String())
}

// freePort is a port for ports[i] that is free now and none of the
// stack's other ports: its own plus 100, 200, … (a second stack beside a
// default one gets 3100, 3101, 4418 and 5100).
func freePort(ports []Port, nums []int, i int) int {
	host, _, _ := net.SplitHostPort(ports[i].Addr)
	for step := 100; step <= 2000; step += 100 {
		p := nums[i] + step
		if p > 65535 {
			break
		}
		mine := false
		for j, n := range nums {
			mine = mine || (j != i && n == p)
		}
		if mine {
			continue
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			ln.Close()
			return p
		}
	}
	return nums[i] + 100
}

// sameHost reports whether two addresses' hosts can collide on one port:
// the same host, or either one every interface.
func sameHost(a, b string) bool {
	ha, _, _ := net.SplitHostPort(a)
	hb, _, _ := net.SplitHostPort(b)
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb) || (isLocalhost(ha) && isLocalhost(hb))
}

func isLocalhost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// listen takes addr for the API, or says plainly that it is taken (by a
// process that took it since CheckPorts).
func listen(addr, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	return nil, portError(Port{What: "the API and the web view", Flag: flag, Addr: addr}, err)
}

// portError is the error of a listen at p that failed after CheckPorts
// passed: another process took the port in between.
func portError(p Port, err error) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return failure(ErrPortInUse, "%s is in use: %s (%s moves it) — is another `make run` running?", p.Addr, p.What, p.Flag)
	}
	return fmt.Errorf("cannot listen on %s (%s, %s): %w", p.Addr, p.What, p.Flag, err)
}

// motoPortInUse is moto's failure to listen on port, which it reports
// itself (moto.ErrPortInUse).
func motoPortInUse(port int) error {
	return portError(Port{What: "moto, the local AWS", Flag: MotoPortFlag, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}, syscall.EADDRINUSE)
}
