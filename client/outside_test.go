package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutsideModuleBuildsWithTheClient: a program in a module of its own
// (a producer's), with a replace directive pointing at this checkout,
// imports the client, builds an outbox Put and enqueues through the API
// client: the public package is usable from outside, internals and all.
func TestOutsideModuleBuildsWithTheClient(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/producer\n\ngo 1.26\n\nrequire github.com/runstwice/runstwice v0.0.0\n\nreplace github.com/runstwice/runstwice => "+root+"\n")
	write("main.go", `package main

import (
	"fmt"
	"time"

	"github.com/runstwice/runstwice/client"
)

func main() {
	put, jobID, err := client.OutboxPut("app-outbox", client.OutboxJob{
		Producer: "signup", IdempotencyKey: "signup-u-1", Type: client.TypeWelcome,
		Args: client.WelcomeArgs{UserID: "u-1"},
	}, time.Now())
	if err != nil {
		panic(err)
	}
	fmt.Println(jobID, *put.Put.TableName)
}
`)
	run := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	out := run("run", ".")
	if !strings.Contains(out, "app-outbox") {
		t.Fatalf("the outside program printed %q", out)
	}
}
