package main

import (
	"testing"

	"github.com/runstwice/runstwice/internal/dev/localapi"
)

// The env file is written for a local stack on its default ports; an
// invocation against another endpoint, or beside a stack whose API and
// webhook receiver are on other ports (stack.json names them), gets that
// stack's addresses, and no other value changes.
func TestEnvFileAddressesFollowTheStack(t *testing.T) {
	env := map[string]string{
		"QUEUE_URL_DEFAULT": "http://127.0.0.1:5000/123456789012/runstwice-local-default",
		"APP_BASE_URL":      "http://127.0.0.1:3000",
		"RETURN_URL":        "http://127.0.0.1:3000/hooks",
		"WEBHOOK_URL":       "http://127.0.0.1:3001/events",
		"OTHER_URL":         "http://127.0.0.1:50001/x",
		"STAGE":             "local",
	}
	atAddresses(env, "http://127.0.0.1:5001", localapi.StackInfo{APIURL: "http://127.0.0.1:3100/", WebhookURL: "http://127.0.0.1:3101/events"})
	for k, want := range map[string]string{
		"QUEUE_URL_DEFAULT": "http://127.0.0.1:5001/123456789012/runstwice-local-default",
		"APP_BASE_URL":      "http://127.0.0.1:3100",
		"RETURN_URL":        "http://127.0.0.1:3100/hooks",
		"WEBHOOK_URL":       "http://127.0.0.1:3101/events",
		"OTHER_URL":         "http://127.0.0.1:50001/x",
		"STAGE":             "local",
	} {
		if env[k] != want {
			t.Errorf("%s = %q; want %q", k, env[k], want)
		}
	}
}
