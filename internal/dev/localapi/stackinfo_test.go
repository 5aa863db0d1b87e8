package localapi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ReadStackInfo: no file is no stack and no error; a file names a stack that
// runs only while its process lives; a broken file is an error naming it.
func TestReadStackInfo(t *testing.T) {
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		file    string // "" writes none
		want    StackInfo
		running bool
		err     string
	}{
		{name: "none"},
		{name: "running", file: `{"endpoint":"http://127.0.0.1:5000","apiUrl":"http://127.0.0.1:3000","stage":"local","region":"us-east-1","pid":` + strconv.Itoa(os.Getpid()) + `}`,
			want: StackInfo{Endpoint: "http://127.0.0.1:5000", APIURL: "http://127.0.0.1:3000", Stage: "local", Region: "us-east-1", PID: os.Getpid()}, running: true},
		{name: "ended", file: `{"pid":` + strconv.Itoa(ended.Process.Pid) + `}`, want: StackInfo{PID: ended.Process.Pid}},
		{name: "no pid", file: `{"apiUrl":"http://127.0.0.1:3000"}`, want: StackInfo{APIURL: "http://127.0.0.1:3000"}},
		{name: "broken", file: `{"pid":`, err: StackFile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(filepath.Join(dir, StackFile), []byte(tc.file), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, running, err := ReadStackInfo(dir)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ReadStackInfo = %v; want an error naming %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || running != tc.running {
				t.Fatalf("ReadStackInfo = %+v, %v, %v; want %+v, %v", got, running, err, tc.want, tc.running)
			}
		})
	}
}
