package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/runstwice/runstwice/internal/dev/localapi"
	"github.com/runstwice/runstwice/internal/dev/moto"
)

// Files in the state directory (.devstack).
const (
	LockFile      = "lock"
	StackFile     = localapi.StackFile
	EnvFile       = "env"
	ResourcesFile = "resources.json"
	FunctionsLog  = "functions.log"
	MetricsLog    = "metrics.log"
	EmulatorLog   = "emulator.log"
	MotoLog       = "moto.log"
)

// Stage is the stage of the local stack.
const Stage = "local"

// writeStackFiles writes stack.json (which localapi.ReadStackInfo reads)
// and the sourceable env file.
func writeStackFiles(dir string, info localapi.StackInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, StackFile), append(b, '\n'), 0o644); err != nil {
		return err
	}
	var env strings.Builder
	env.WriteString("# The local stack's AWS settings, for jobctl and other AWS tools:\n#   . " + filepath.Join(dir, EnvFile) + "\n# (`make run` itself ignores AWS_ENDPOINT_URL unless given --endpoint.)\n")
	if info.Endpoint != "" {
		fmt.Fprintf(&env, "export AWS_ENDPOINT_URL=%s AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s\n", info.Endpoint, moto.AccessKeyID, moto.SecretAccessKey)
	}
	fmt.Fprintf(&env, "export AWS_REGION=%s AWS_DEFAULT_REGION=%s RUNSTWICE_STAGE=%s\n", info.Region, info.Region, info.Stage)
	return os.WriteFile(filepath.Join(dir, EnvFile), []byte(env.String()), 0o644)
}

func removeStackFiles(dir string) {
	_ = os.Remove(filepath.Join(dir, StackFile))
	_ = os.Remove(filepath.Join(dir, EnvFile))
}

// stateLock holds dir/lock: one local stack per state directory. The lock
// is an flock, which the kernel drops when its holder dies, so a stack that
// crashed never blocks the next one; the file names the holder's pid, and
// its holder removes it when it stops (a lock file left behind is one whose
// holder died, and holds nothing).
type stateLock struct {
	f    *os.File
	path string
}

// ErrStateDirInUse means another local stack runs from the same state
// directory.
var ErrStateDirInUse = errors.New("state directory in use")

func lockStateDir(dir string) (*stateLock, error) {
	path := filepath.Join(dir, LockFile)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("devstack: %w", err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			holder := "another process"
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					holder = "pid " + strconv.Itoa(pid)
				}
			}
			return nil, failure(ErrStateDirInUse, "another `make run` (%s) is running from %s; stop it first, or give this one its own --state-dir", holder, dir)
		}
		// The holder this one waited on may have removed the file between
		// our open and our lock: then the lock is on a file no one else
		// sees, and the next stack would lock a new one. Lock again.
		if !samePath(f, path) {
			f.Close()
			continue
		}
		if err := f.Truncate(0); err == nil {
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		}
		return &stateLock{f: f, path: path}, nil
	}
}

// samePath reports that path still names the open file f.
func samePath(f *os.File, path string) bool {
	held, err := f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(path)
	return err == nil && os.SameFile(held, named)
}

// release removes the lock file, then drops the lock (in that order, so a
// stack that opens the file meanwhile finds it gone and locks a new one).
func (l *stateLock) release() {
	if l == nil {
		return
	}
	_ = os.Remove(l.path)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}
