// Package vclock is the clock every lifetime decision of the bundle reads
// (Now): the wall clock in a release build, and in a chaos build (build tag
// `chaos`) the wall clock moved forward by an offset the chaos campaign
// writes to a file, so that it can make months pass in seconds. The
// functions are separate processes (under aws-lambda-rie), so the offset is
// a file every one of them reads, named by the environment variable EnvVar;
// the local stack's scheduler emulator and the campaign read the same file
// (Reader). A release build never reads the variable: Now is time.Now.
package vclock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvVar names the variable a chaos build reads the offset file's path from.
const EnvVar = "RUNSTWICE_V" + "CLOCK"

// refresh is how long a reader keeps the offset it read before it reads the
// file again: a jump is seen by every process within it.
const refresh = 100 * time.Millisecond

// Settle is how long after a Write every process surely sees the new offset.
const Settle = 3 * refresh

// Write stores offset (how far the virtual clock is ahead of the wall
// clock) in the file at path, atomically (a reader sees the old offset or
// the new one).
func Write(path string, offset time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(int64(offset), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("vclock: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("vclock: %w", err)
	}
	return nil
}

// Read returns the offset stored in the file at path: zero when there is
// no such file.
func Read(path string) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Clean(path))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("vclock: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("vclock: %s: %w", path, err)
	}
	return time.Duration(n), nil
}

// Reader is a virtual clock read from an offset file, re-read at most every
// 100 ms. Its zero value, or one without a Path, is the wall clock.
type Reader struct {
	// Path is the offset file ("" for none: the wall clock).
	Path string

	mu     sync.Mutex
	read   time.Time
	offset time.Duration
}

// Offset returns how far the clock is ahead of the wall clock. A file it
// cannot read keeps the offset read last.
func (r *Reader) Offset() time.Duration {
	if r == nil || r.Path == "" {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.read) >= refresh {
		if off, err := Read(r.Path); err == nil {
			r.offset = off
		}
		r.read = now
	}
	return r.offset
}

// Now returns the wall clock moved forward by Offset.
func (r *Reader) Now() time.Time { return time.Now().Add(r.Offset()) }
