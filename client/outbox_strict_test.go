package client_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/client"
)

// Args that say two things (a name twice, or two names that differ only
// in case) are refused by OutboxPut: encoded and read back as a map they
// would keep one of the values without a word.
func TestOutboxPutRefusesArgsThatSayTwoThings(t *testing.T) {
	now := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		args any
		want string
	}{
		{"userId twice", json.RawMessage(`{"userId":"u-1","userId":"u-2"}`), "args.userId: appears twice"},
		{"userId and UserId", json.RawMessage(`{"userId":"u-1","UserId":"u-2"}`), "args.UserId: differs from userId only in case"},
		{"UserId alone", map[string]string{"UserId": "u-1"}, "args.UserId: differs from userId only in case"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := client.OutboxPut("app-outbox", client.OutboxJob{Producer: "signup", IdempotencyKey: "signup-u-1",
				Type: client.TypeWelcome, Args: c.args}, now)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v; want it to say %q", err, c.want)
			}
		})
	}
}
