package main

import "testing"

// The env file is written for a local stack on its default ports; an
// invocation against another endpoint, or beside a stack whose API is on
// another port, gets that stack's addresses, and no other value changes.
func TestEnvFileAddressesFollowTheStack(t *testing.T) {
	env := map[string]string{
		"QUEUE_URL_DEFAULT": "http://127.0.0.1:5000/123456789012/runstwice-local-default",
		"APP_BASE_URL":      "http://127.0.0.1:3000",
		"WEBHOOK_URL":       "http://127.0.0.1:3000/hooks",
		"OTHER_URL":         "http://127.0.0.1:50001/x",
		"STAGE":             "local",
	}
	atAddresses(env, "http://127.0.0.1:5001", "http://127.0.0.1:3100/")
	for k, want := range map[string]string{
		"QUEUE_URL_DEFAULT": "http://127.0.0.1:5001/123456789012/runstwice-local-default",
		"APP_BASE_URL":      "http://127.0.0.1:3100",
		"WEBHOOK_URL":       "http://127.0.0.1:3100/hooks",
		"OTHER_URL":         "http://127.0.0.1:50001/x",
		"STAGE":             "local",
	} {
		if env[k] != want {
			t.Errorf("%s = %q; want %q", k, env[k], want)
		}
	}
}
