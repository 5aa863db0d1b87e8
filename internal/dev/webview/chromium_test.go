package webview

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// tools/chromium.sh finds the Chromium or Chrome on the machine before it
// would install anything: RUNSTWICE_CHROMIUM first, then the PATH, then
// the macOS app; `install` with one found installs nothing (no apt-get,
// which macOS does not have).
func TestChromiumIsFoundBeforeAnythingIsInstalled(t *testing.T) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "tools", "chromium.sh")
	executable := func(path string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\necho \"$0 $*\" >>\"$CALLS\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	bin, home, calls := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "calls")
	// Every tool the script may call, so a call to apt-get or sudo shows.
	for _, tool := range []string{"apt-get", "sudo", "dpkg-query"} {
		executable(filepath.Join(bin, tool))
	}
	for _, tool := range []string{"uname", "id", "cat", "rm"} {
		if p, err := exec.LookPath(tool); err == nil {
			_ = os.Symlink(p, filepath.Join(bin, tool))
		}
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("/bin/sh", append([]string{script}, args...)...)
		cmd.Env = append([]string{"PATH=" + bin, "HOME=" + home, "CALLS=" + calls}, env...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := run(nil, "find"); err == nil {
		t.Fatalf("find with no browser: %q; want exit 1", out)
	}
	app := executable(filepath.Join(home, "Applications", "Google Chrome.app", "Contents", "MacOS", "Google Chrome"))
	if out, err := run(nil, "find"); err != nil || out != app {
		t.Errorf("find with the macOS app: %q, %v; want %s", out, err, app)
	}
	onPath := executable(filepath.Join(bin, "google-chrome"))
	if out, err := run(nil, "find"); err != nil || out != onPath {
		t.Errorf("find with google-chrome on the PATH: %q, %v; want %s (the PATH before the app)", out, err, onPath)
	}
	given := executable(filepath.Join(t.TempDir(), "my-chromium"))
	if out, err := run([]string{"RUNSTWICE_CHROMIUM=" + given}, "find"); err != nil || out != given {
		t.Errorf("find with RUNSTWICE_CHROMIUM: %q, %v; want %s", out, err, given)
	}
	if out, err := run([]string{"RUNSTWICE_CHROMIUM=" + filepath.Join(home, "none")}, "find"); err == nil || !strings.Contains(out, "RUNSTWICE_CHROMIUM") {
		t.Errorf("find with RUNSTWICE_CHROMIUM naming nothing: %q, %v; want exit 1 naming it", out, err)
	}
	out, err := run(nil, "install")
	if err != nil || out != "==> chromium: "+onPath {
		t.Errorf("install with one on the PATH: %q, %v; want it used", out, err)
	}
	if b, _ := os.ReadFile(calls); len(b) > 0 {
		t.Errorf("install with a browser found called:\n%s", b)
	}
}
