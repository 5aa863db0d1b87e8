package localapi

import "testing"

func TestIsLocal(t *testing.T) {
	for u, want := range map[string]bool{
		"http://127.0.0.1:3000":                           true,
		"http://localhost:3000/":                          true,
		"http://[::1]:3000":                               true,
		"http://127.0.0.2":                                true,
		"https://abc.execute-api.us-east-1.amazonaws.com": false,
		"http://10.0.0.1:3000":                            false,
		"http://localhost.example.com":                    false,
		"://bad":                                          false,
	} {
		if got := IsLocal(u); got != want {
			t.Errorf("IsLocal(%q) = %v; want %v", u, got, want)
		}
	}
}
