package vclock

import (
	"path/filepath"
	"testing"
	"time"
)

func TestReaderFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	r := &Reader{Path: path}
	if got := r.Offset(); got != 0 {
		t.Fatalf("no file: offset %s; want 0", got)
	}
	if err := Write(path, 31*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(Settle)
	if got := r.Offset(); got != 31*24*time.Hour {
		t.Fatalf("offset %s; want 744h", got)
	}
	if d := time.Until(r.Now()); d < 30*24*time.Hour {
		t.Fatalf("Now is %s ahead; want about 31 days", d)
	}
	var zero Reader
	if zero.Offset() != 0 {
		t.Fatal("the zero Reader is not the wall clock")
	}
}

func TestReleaseBuildIsTheWallClock(t *testing.T) {
	t.Setenv(EnvVar, "/nonexistent")
	if d := time.Since(Now()); d < 0 || d > time.Second {
		t.Fatalf("Now is %s off the wall clock", d)
	}
}
