package devstack

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/localapi"
)

func TestStateDirLock(t *testing.T) {
	dir := t.TempDir()
	first, err := lockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockStateDir(dir); !errors.Is(err, ErrStateDirInUse) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("second lock = %v; want ErrStateDirInUse naming the holder", err)
	}
	first.release()
	if _, err := os.Stat(filepath.Join(dir, LockFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("lock file after release: %v; want it removed", err)
	}
	again, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.release()
	var none *stateLock
	none.release() // a stack that never locked stops cleanly
}

// A lock file left by a stack that died (its pid gone) holds nothing.
func TestStaleLockIsNoHolder(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	if err := os.WriteFile(filepath.Join(dir, LockFile), []byte(strconv.Itoa(dead)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("lock over a stale lock file: %v", err)
	}
	l.release()
}

// A start that is refused (here: the API's address is taken) leaves no
// lock file behind, and no state directory it created for nothing.
func TestRefusedStartLeavesNoLock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tc := range []struct {
		name     string
		existing bool
	}{{"a state directory that exists", true}, {"a new state directory", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			if tc.existing {
				if err := os.Mkdir(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			l, err := Start(context.Background(), Options{StateDir: dir, APIAddr: ln.Addr().String(), MotoPort: 1})
			if !errors.Is(err, ErrPortInUse) || l != nil {
				t.Fatalf("Start = %v, %v; want refused with ErrPortInUse", l, err)
			}
			if _, err := os.Stat(filepath.Join(dir, LockFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("lock file after a refused start: %v; want none", err)
			}
			if _, err := os.Stat(dir); tc.existing == errors.Is(err, fs.ErrNotExist) {
				t.Errorf("state directory after a refused start: %v; want it there only if it was before", err)
			}
		})
	}
}

func TestStackFiles(t *testing.T) {
	dir := t.TempDir()
	if _, ok, err := localapi.ReadStackInfo(dir); ok || err != nil {
		t.Fatalf("no stack.json: ok=%v err=%v; want neither", ok, err)
	}
	info := localapi.StackInfo{Endpoint: "http://127.0.0.1:5000", APIURL: "http://127.0.0.1:3000", Stage: Stage, Region: "us-east-1", PID: os.Getpid()}
	if err := writeStackFiles(dir, info); err != nil {
		t.Fatal(err)
	}
	got, ok, err := localapi.ReadStackInfo(dir)
	if err != nil || !ok || got != info {
		t.Fatalf("ReadStackInfo = %+v %v %v; want %+v running", got, ok, err, info)
	}
	env, _ := os.ReadFile(filepath.Join(dir, EnvFile))
	for _, want := range []string{"export AWS_ENDPOINT_URL=http://127.0.0.1:5000 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test\n",
		"export AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1 RUNSTWICE_STAGE=local\n"} {
		if !strings.Contains(string(env), want) {
			t.Errorf("env file lacks %q:\n%s", want, env)
		}
	}
	out, err := exec.Command("sh", "-c", ". "+filepath.Join(dir, EnvFile)+" && echo $AWS_ENDPOINT_URL $AWS_DEFAULT_REGION $RUNSTWICE_STAGE").Output()
	if err != nil || strings.TrimSpace(string(out)) != "http://127.0.0.1:5000 us-east-1 local" {
		t.Fatalf("sourcing env: %q %v", out, err)
	}
	removeStackFiles(dir)
	if _, ok, err := localapi.ReadStackInfo(dir); ok || err != nil {
		t.Fatalf("after removal: ok=%v err=%v", ok, err)
	}
}
