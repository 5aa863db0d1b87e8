package proc

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFind(t *testing.T) {
	dir := t.TempDir()
	here := filepath.Join(dir, "tool")
	if err := os.WriteFile(here, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		paths  []string
		want   string
		wantOK bool
	}{
		{"sh", []string{"", filepath.Join(dir, "missing"), here}, here, true},
		{"sh", []string{filepath.Join(dir, "missing")}, sh, true},
		{"sh", nil, sh, true},
		{"runstwice-no-such-tool", []string{filepath.Join(dir, "missing")}, "", false},
	} {
		got, ok := Find(tc.name, tc.paths...)
		if ok != tc.wantOK || (ok && got != tc.want) {
			t.Errorf("Find(%q, %q) = %q, %v; want %q, %v", tc.name, tc.paths, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestFreePort(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d is not free: %v", port, err)
	}
	l.Close()
}

// Stop ends the whole group, the children the command started included,
// even one that ignores SIGTERM.
func TestStopEndsTheGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", `trap "" TERM; sleep 60 & echo $!; wait`)
	cmd.SysProcAttr = Group()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	child, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", buf[:n], err)
	}
	go func() { _ = cmd.Wait(); close(exited) }()
	Stop(cmd.Process.Pid, exited)
	// SIGKILL is delivered asynchronously: the child, already reparented to
	// init, may still read as running for a moment while it dies. Gone or a
	// zombie (init reaps it when it will) both mean it ended; give it 2 s.
	for range 100 {
		if !running(child) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(child) + "/stat")
	_ = syscall.Kill(child, syscall.SIGKILL)
	t.Fatalf("child %d of the group still runs 2 s after Stop: %s", child, b)
}

// running reports whether pid is a live process: it exists and is not a
// zombie waiting to be reaped.
func running(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err == nil && !strings.Contains(string(b), ") Z")
}

// A process started with Group dies when the process that started it exits,
// even when nothing stops it: an integration test binary's moto server ends
// with the binary (testenv relies on it).
func TestGroupDiesWithItsParent(t *testing.T) {
	if os.Getenv("RUNSTWICE_PROC_PARENT") == "1" {
		// The parent: start a long sleep in a group, say its pid, exit.
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = Group()
		if err := cmd.Start(); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		os.Exit(0)
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestGroupDiesWithItsParent$")
	parent.Env = append(os.Environ(), "RUNSTWICE_PROC_PARENT=1")
	out, err := parent.Output()
	if err != nil {
		t.Fatalf("parent: %v", err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("child pid %q: %v", out, err)
	}
	for range 100 {
		if !running(child) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(child, syscall.SIGKILL)
	t.Fatalf("child %d still runs 2 s after its parent exited", child)
}
