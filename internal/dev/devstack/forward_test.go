package devstack

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/lambdarie"
	"github.com/runstwice/runstwice/internal/testkit"
)

// Output handed to the stack is sorted as its own functions' output is: the
// application's lines (with their function) to functions.log, the rest to
// the emulator's log; a function the stack does not have, or a browser page
// of another site, is refused.
func TestFunctionOutputIsSortedLikeTheStacks(t *testing.T) {
	app, emulator := &testkit.Buffer{}, &testkit.Buffer{}
	srv := httptest.NewServer(FunctionOutput(lambdarie.Sinks{App: app, Emulator: emulator}, []string{"email", "webhook"}))
	defer srv.Close()
	post := func(fn string, hdr map[string]string, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+FunctionOutputPath+"?fn="+fn, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("email", nil, "START RequestId: 1\n{\"msg\":\"job outcome\",\"jobId\":\"j-1\"}\n{\"msg\":\"last\"}"); code != http.StatusNoContent {
		t.Fatalf("POST = %d; want 204", code)
	}
	if got := app.String(); got != "{\"function\":\"email\",\"msg\":\"job outcome\",\"jobId\":\"j-1\"}\n{\"function\":\"email\",\"msg\":\"last\"}\n" {
		t.Errorf("functions.log got %q", got)
	}
	if got := emulator.String(); got != "START RequestId: 1\n" {
		t.Errorf("emulator.log got %q", got)
	}
	for name, tc := range map[string]struct {
		fn   string
		hdr  map[string]string
		want int
	}{
		"unknown function":    {"mailer", nil, http.StatusBadRequest},
		"another site's page": {"email", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		if code := post(tc.fn, tc.hdr, "{\"msg\":\"x\"}\n"); code != tc.want {
			t.Errorf("%s: POST = %d; want %d", name, code, tc.want)
		}
	}
	if strings.Contains(app.String(), `"msg":"x"`) {
		t.Errorf("a refused POST was logged: %q", app.String())
	}
}
