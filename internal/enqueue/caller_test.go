package enqueue_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/runstwice/runstwice/internal/enqueue"
)

// goldenRequest reads testdata/callers/<name>.json: a POST as API Gateway
// (HTTP API, payload v2, IAM authorization) sends it for one kind of
// principal.
func goldenRequest(t *testing.T, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "callers", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// TestCallerOfEachKindOfPrincipal maps the request context API Gateway sends
// for each kind of principal to its caller, and checks who else is the same
// caller: another session of a machine's role is (its credentials rotate);
// another person signed in through the same IAM Identity Center permission
// set, or through the same Cognito identity pool, is not. Each pair goes
// through the handler: a job is seen by the same caller and is 404 to
// another one.
func TestCallerOfEachKindOfPrincipal(t *testing.T) {
	for _, tc := range []struct {
		file string
		want string
		// other is another principal of the same role or pool; same says
		// whether it must be the same caller.
		other func(*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription)
		same  bool
	}{
		{"iam-user", "arn:aws:iam::111122223333:user/alice", func(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
			iam.UserARN = "arn:aws:iam::111122223333:user/bob"
		}, false},
		{"assumed-role", "arn:aws:sts::111122223333:assumed-role/orders-task", func(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
			iam.UserARN = strings.Replace(iam.UserARN, "ecs-task-4711", "ecs-task-4712", 1)
		}, true},
		{"sso-role", "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_SupportAgents_0123456789abcdef/alice@example.com",
			func(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
				iam.UserARN = strings.Replace(iam.UserARN, "alice@", "bob@", 1)
				iam.CallerID = strings.Replace(iam.CallerID, "alice@", "bob@", 1)
			}, false},
		{"cognito-identity-pool", "cognito:us-east-1:3f291106-8703-466b-8f2b-3ecee1ca56ce", func(iam *events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription) {
			// Same pool, same role, same session name: only the identity differs.
			iam.CognitoIdentity.IdentityID = "us-east-1:9a8b7c6d-0000-4000-8000-000000000002"
		}, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			req := goldenRequest(t, tc.file)
			got, ok := enqueue.Caller(req.RequestContext)
			if !ok || got != tc.want {
				t.Fatalf("Caller = %q, %v; want %q", got, ok, tc.want)
			}
			other := goldenRequest(t, tc.file)
			tc.other(other.RequestContext.Authorizer.IAM)
			if o, _ := enqueue.Caller(other.RequestContext); (o == got) != tc.same {
				t.Fatalf("the other principal is caller %q; same as %q: %v, want %v", o, got, o == got, tc.same)
			}

			h := newHandler(newWorld())
			job := mustBody(t, call(t, h, req), http.StatusAccepted)
			read := func(r events.APIGatewayV2HTTPRequest) int {
				r.RequestContext.HTTP.Method, r.RawPath, r.Body = http.MethodGet, "/v1/jobs/"+job.JobID, ""
				return call(t, h, r).StatusCode
			}
			if s := read(goldenRequest(t, tc.file)); s != http.StatusOK {
				t.Fatalf("GET of its own job = %d; want 200", s)
			}
			want := http.StatusNotFound
			if tc.same {
				want = http.StatusOK
			}
			if s := read(other); s != want {
				t.Fatalf("GET by the other principal = %d; want %d", s, want)
			}
		})
	}
}
