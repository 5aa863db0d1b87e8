package client_test

import (
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/testkit"
)

// TestOutsideModuleBuildsWithTheClient: a program in a module of its own
// (a producer's), with a replace directive pointing at this checkout,
// imports the client, builds an outbox Put and enqueues through the API
// client: the public package is usable from outside, internals and all.
func TestOutsideModuleBuildsWithTheClient(t *testing.T) {
	files := map[string]string{}
	files["main.go"] = `package main

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
`
	out := testkit.RunOutsideModule(t, "..", "example.com/producer", files)
	if !strings.Contains(out, "app-outbox") {
		t.Fatalf("the outside program printed %q", out)
	}
}
