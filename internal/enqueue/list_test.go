package enqueue_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// listAnswer is the JSON of GET /v1/jobs.
type listAnswer struct {
	Jobs []struct {
		JobID string `json:"jobId"`
		Type  string `json:"type"`
		State string `json:"state"`
	} `json:"jobs"`
	Next *string `json:"next"`
}

// GET /v1/jobs lists the caller's own jobs, newest first, a page at a time;
// next is absent on the last page; another caller's jobs never appear.
func TestListTheCallersJobs(t *testing.T) {
	w := newWorld()
	h := newHandler(w)
	var alices []string
	for i, key := range []string{"a1", "a2", "a3"} {
		w.advance(1)
		resp := call(t, h, post("email.welcome.v1", key, `{"args":{"userId":"u-`+string(rune('1'+i))+`"}}`))
		alices = append([]string{decodeAccepted(t, resp).JobID}, alices...)
		call(t, h, post("email.welcome.v1", key, `{"args":{"userId":"u-1"}}`, asCaller(bob)))
	}
	var got []string
	query := "limit=2"
	for pages := 0; ; pages++ {
		req := request(http.MethodGet, "/v1/jobs", "")
		req.QueryStringParameters = queryParams(query)
		resp := call(t, h, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/jobs?%s = %d %s", query, resp.StatusCode, resp.Body)
		}
		var a listAnswer
		if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
			t.Fatal(err)
		}
		for _, j := range a.Jobs {
			got = append(got, j.JobID)
		}
		if a.Next == nil {
			if strings.Contains(resp.Body, `"next"`) {
				t.Errorf("the last page names a next: %s", resp.Body)
			}
			break
		}
		if pages > 3 {
			t.Fatal("the list never ends")
		}
		query = "limit=2&cursor=" + url.QueryEscape(*a.Next)
	}
	if !slices.Equal(got, alices) {
		t.Fatalf("alice's list %v; want her jobs newest first %v", got, alices)
	}
}

// A bad filter is a 400 naming it; the route takes GET only.
func TestListRefusesBadFilters(t *testing.T) {
	h := newHandler(newWorld())
	for query, field := range map[string]string{
		"state=Bogus":             "query state",
		"type=email.welcom.v1":    "query type",
		"limit=0":                 "query limit",
		"limit=101":               "query limit",
		"limit=ten":               "query limit",
		"color=red":               "query color",
		"cursor=bob%7C0":          "query cursor",
		"state=Succeeded&limit=0": "query limit",
	} {
		req := request(http.MethodGet, "/v1/jobs", "")
		req.QueryStringParameters = queryParams(query)
		resp := call(t, h, req)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, `"field":"`+field+`"`) {
			t.Errorf("GET /v1/jobs?%s = %d %s; want 400 naming %s", query, resp.StatusCode, resp.Body, field)
		}
	}
	resp := call(t, h, request(http.MethodGet, "/v1/jobs", ""))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(resp.Body) != `{"jobs":[]}` {
		t.Errorf("an empty list = %d %s; want 200 {\"jobs\":[]}", resp.StatusCode, resp.Body)
	}
	resp = call(t, h, request(http.MethodPost, "/v1/jobs", "{}"))
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Headers["Allow"] != "GET" {
		t.Errorf("POST /v1/jobs = %d %v; want 405 Allow: GET", resp.StatusCode, resp.Headers)
	}
}

// queryParams is what API Gateway hands the function for a query string.
func queryParams(q string) map[string]string {
	v, _ := url.ParseQuery(q)
	out := map[string]string{}
	for k, vs := range v {
		out[k] = strings.Join(vs, ",")
	}
	return out
}
