package awsproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProxyForwardsUnchangedThroughHooksInOrder(t *testing.T) {
	var gotBody, gotHost, gotPath, gotTarget string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody, gotHost, gotPath, gotTarget = string(b), r.Host, r.URL.RequestURI(), r.Header.Get("X-Amz-Target")
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer upstream.Close()
	var order []string
	hook := func(name string) Hook {
		return func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				c := CallOf(r)
				order = append(order, name+":"+c.Service+"."+c.Operation+":"+string(c.Body))
				next.ServeHTTP(w, r)
			})
		}
	}
	srv, err := Start(upstream.URL, hook("outer"), hook("inner"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/q?x=1", strings.NewReader(`{"QueueUrl":"u"}`))
	req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(body) != `{"ok":true}` || resp.Header.Get("X-Upstream") != "yes" {
		t.Fatalf("response %d %s %v; want the upstream's", resp.StatusCode, body, resp.Header)
	}
	if gotBody != `{"QueueUrl":"u"}` || gotPath != "/q?x=1" || gotTarget != "AmazonSQS.SendMessage" || gotHost != strings.TrimPrefix(srv.URL, "http://") {
		t.Fatalf("upstream got body %q path %q target %q host %q; want the request unchanged", gotBody, gotPath, gotTarget, gotHost)
	}
	want := []string{`outer:sqs.SendMessage:{"QueueUrl":"u"}`, `inner:sqs.SendMessage:{"QueueUrl":"u"}`}
	if strings.Join(order, "|") != strings.Join(want, "|") {
		t.Fatalf("hooks saw %q; want %q", order, want)
	}
}

// A hook may answer a call itself (how fault injection throttles a call).
func TestHookAnswersItself(t *testing.T) {
	reached := false
	upstream := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }))
	defer upstream.Close()
	throttle := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if CallOf(r).Operation == "PutItem" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"ThrottlingException"}`)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	p, _ := New(upstream.URL, throttle)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
	p.ServeHTTP(rec, req)
	if reached || rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Throttling") {
		t.Fatalf("got %d %s, upstream reached %v; want the hook's answer only", rec.Code, rec.Body, reached)
	}
}

func TestUpstreamDownIs502(t *testing.T) {
	p, err := New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`)))
	if rec.Code != http.StatusBadGateway {
		t.Fatalf("got %d %s; want 502", rec.Code, rec.Body)
	}
}

func TestNewRefusesANonURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:5000", "::"} {
		if _, err := New(u); err == nil {
			t.Errorf("New(%q) accepted it", u)
		}
	}
}

func TestIdentify(t *testing.T) {
	sig := func(svc string) string {
		return "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/" + svc + "/aws4_request, SignedHeaders=host, Signature=x"
	}
	for _, tc := range []struct {
		name, method, path, auth, target, ctype, body string
		service, op                                   string
	}{
		{"json rpc", "POST", "/", sig("dynamodb"), "DynamoDB_20120810.PutItem", "application/x-amz-json-1.0", `{}`, "dynamodb", "PutItem"},
		{"ses v2 rest", "POST", "/v2/email/outbound-emails", sig("ses"), "", "application/json", `{}`, "ses", "SendEmail"},
		{"query", "POST", "/", sig("sts"), "", "application/x-www-form-urlencoded", "Action=GetCallerIdentity&Version=2011-06-15", "sts", "GetCallerIdentity"},
		{"rpcv2 cbor", "POST", "/service/GraniteServiceVersion20100801/operation/PutMetricData", sig("monitoring"), "", "application/cbor", "", "monitoring", "PutMetricData"},
		{"scheduler delete", "DELETE", "/schedules/job-1?groupName=g", sig("scheduler"), "", "", "", "scheduler", "DeleteSchedule"},
		{"scheduler create", "POST", "/schedules/job-1", sig("scheduler"), "", "application/json", `{}`, "scheduler", "CreateSchedule"},
		{"scheduler get", "GET", "/schedules/job-1", sig("scheduler"), "", "", "", "scheduler", "GetSchedule"},
		{"scheduler update", "PUT", "/schedules/job-1", sig("scheduler"), "", "application/json", `{}`, "scheduler", "UpdateSchedule"},
		{"scheduler list", "GET", "/schedules", sig("scheduler"), "", "", "", "scheduler", "ListSchedules"},
		{"scheduler group", "POST", "/schedule-groups/g", sig("scheduler"), "", "application/json", `{}`, "scheduler", "CreateScheduleGroup"},
		{"scheduler tags", "GET", "/tags/arn", sig("scheduler"), "", "", "", "scheduler", ""},
		{"unknown rest", "GET", "/moto-api/", "", "", "", "", "", ""},
		{"presigned", "GET", "/?Action=ListQueues&X-Amz-Credential=test%2F20260101%2Fus-east-1%2Fsqs%2Faws4_request", "", "", "", "", "sqs", "ListQueues"},
		{"bad credential", "POST", "/", "AWS4-HMAC-SHA256 Credential=garbage, Signature=x", "AmazonSSM.GetParameter", "", "", "", "GetParameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			for k, v := range map[string]string{"Authorization": tc.auth, "X-Amz-Target": tc.target, "Content-Type": tc.ctype} {
				if v != "" {
					r.Header.Set(k, v)
				}
			}
			c := Identify(r, []byte(tc.body))
			if c.Service != tc.service || c.Operation != tc.op {
				t.Fatalf("Identify = %q %q; want %q %q", c.Service, c.Operation, tc.service, tc.op)
			}
		})
	}
}
