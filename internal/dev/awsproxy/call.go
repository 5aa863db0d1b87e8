package awsproxy

import (
	"net/http"
	"net/url"
	"strings"
)

// Call is one AWS API call passing through the proxy.
type Call struct {
	// Service is the SigV4 signing name: "sqs", "dynamodb", "ssm", "ses"
	// (SES v1 and v2), … ("" for an unsigned request).
	Service string
	// Operation is the API operation, e.g. "SendMessage", "PutItem",
	// "SendEmail" ("" when the proxy cannot tell).
	Operation string
	// Body is the request body. Hooks read it here: the request's own Body
	// is what is forwarded.
	Body []byte
	// Path is the request's URL path (a REST call names its resource there:
	// DELETE /schedules/{Name}).
	Path string
}

// restOperations names the REST-JSON operations the proxy recognizes by
// method and path (JSON-RPC, query and RPCv2 protocols name themselves).
var restOperations = map[string]string{
	"POST /v2/email/outbound-emails": "SendEmail",
	"POST /v2/email/identities":      "CreateEmailIdentity",
}

// Identify names the call r (with its body) makes: the service from the
// SigV4 credential scope, the operation from X-Amz-Target (JSON-RPC), the
// Action parameter (query protocol), the path of an RPCv2 request or the
// REST operations the proxy knows.
func Identify(r *http.Request, body []byte) *Call {
	c := &Call{Service: signingName(r), Body: body, Path: r.URL.Path}
	switch {
	case r.Header.Get("X-Amz-Target") != "":
		t := r.Header.Get("X-Amz-Target")
		c.Operation = t[strings.LastIndexByte(t, '.')+1:]
	case strings.Contains(r.URL.Path, "/operation/"):
		c.Operation = r.URL.Path[strings.LastIndex(r.URL.Path, "/operation/")+len("/operation/"):]
	case strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
		if v, err := url.ParseQuery(string(body)); err == nil {
			c.Operation = v.Get("Action")
		}
	case c.Service == "scheduler":
		c.Operation = schedulerOperation(r.Method, strings.TrimSuffix(r.URL.Path, "/"))
	default:
		c.Operation = restOperations[r.Method+" "+strings.TrimSuffix(r.URL.Path, "/")]
	}
	if c.Operation == "" {
		c.Operation = r.URL.Query().Get("Action")
	}
	return c
}

// schedulerOperation names an EventBridge Scheduler REST-JSON call by its
// method and path: /schedules/{Name} and /schedule-groups/{Name}, or the
// lists at /schedules and /schedule-groups ("" for any other).
func schedulerOperation(method, path string) string {
	for _, res := range []struct{ prefix, one, group string }{{"/schedules", "Schedule", "Schedules"}, {"/schedule-groups", "ScheduleGroup", "ScheduleGroups"}} {
		rest, ok := strings.CutPrefix(path, res.prefix)
		switch {
		case !ok:
			continue
		case rest == "" && method == http.MethodGet:
			return "List" + res.group
		case !strings.HasPrefix(rest, "/") || strings.Contains(rest[1:], "/"):
			return ""
		}
		switch method {
		case http.MethodPost:
			return "Create" + res.one
		case http.MethodPut:
			return "Update" + res.one
		case http.MethodDelete:
			return "Delete" + res.one
		case http.MethodGet:
			return "Get" + res.one
		}
		return ""
	}
	return ""
}

// signingName reads the service from the credential scope of a SigV4
// Authorization header (or a presigned URL):
// Credential=AKID/20260101/us-east-1/sqs/aws4_request.
func signingName(r *http.Request) string {
	cred := r.URL.Query().Get("X-Amz-Credential")
	if auth := r.Header.Get("Authorization"); auth != "" {
		_, after, ok := strings.Cut(auth, "Credential=")
		if !ok {
			return ""
		}
		cred, _, _ = strings.Cut(after, ",")
	}
	parts := strings.Split(strings.TrimSpace(cred), "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return ""
	}
	return parts[3]
}
