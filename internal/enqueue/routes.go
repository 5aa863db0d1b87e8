package enqueue

import (
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// jobsPrefix is the path every route shares.
const jobsPrefix = "/v1/jobs/"

// routesList names the routes in problem details.
const routesList = "POST /v1/jobs/{type}, GET /v1/jobs, GET /v1/jobs/{jobId}, DELETE /v1/jobs/{jobId}, " +
	"POST /v1/batches and GET /v1/batches/{batchId}"

// The route.method of the routes that are not one method of /v1/jobs/….
const (
	// methodList is GET /v1/jobs, the caller's list.
	methodList = "LIST"
	// methodBatchPost is POST /v1/batches, methodBatchGet GET
	// /v1/batches/{batchId}.
	methodBatchPost = "BATCH"
	methodBatchGet  = "BATCHGET"
)

// route is a matched request route.
type route struct {
	// method is POST, GET or DELETE; "" for the right path with another
	// method, whose allowed methods are in allow.
	method string
	allow  string
	param  string // {type} or {jobId}
}

// matchRoute matches the request against POST /v1/jobs/{type}, GET
// /v1/jobs (route.method methodList), GET /v1/jobs/{jobId} and DELETE
// /v1/jobs/{jobId}. ok is false for any other
// path; route.method is "" for the right path with another method.
func matchRoute(req events.APIGatewayV2HTTPRequest) (route, bool) {
	method := strings.ToUpper(req.RequestContext.HTTP.Method)
	path := req.RawPath
	if path == "" {
		path = req.RequestContext.HTTP.Path
	}
	if method == "" { // a hand-written event may carry only the route key
		method, _, _ = strings.Cut(req.RouteKey, " ")
	}
	if rt, ok := matchBatchRoute(req, method, path); ok {
		return rt, true
	}
	if list := strings.TrimSuffix(jobsPrefix, "/"); path == list || path == "/"+req.RequestContext.Stage+list {
		if method != "GET" {
			return route{allow: "GET"}, true
		}
		return route{method: methodList}, true
	}
	i := strings.Index(path, jobsPrefix)
	if i < 0 || (i > 0 && path[:i] != "/"+req.RequestContext.Stage) {
		return route{}, false
	}
	seg, err := url.PathUnescape(path[i+len(jobsPrefix):])
	if err != nil || seg == "" || strings.Contains(seg, "/") {
		return route{}, false
	}
	param := "jobId"
	switch method {
	case "POST":
		param = "type"
	case "GET", "DELETE":
	default:
		return route{allow: "DELETE, GET, POST"}, true
	}
	if p := req.PathParameters[param]; p != "" {
		seg = p
	}
	return route{method: method, param: seg}, true
}

// matchBatchRoute matches POST /v1/batches and GET /v1/batches/{batchId}.
func matchBatchRoute(req events.APIGatewayV2HTTPRequest, method, path string) (route, bool) {
	if stage := "/" + req.RequestContext.Stage; strings.HasPrefix(path, stage+batchesPath) {
		path = strings.TrimPrefix(path, stage)
	}
	if path == batchesPath {
		if method != "POST" {
			return route{allow: "POST"}, true
		}
		return route{method: methodBatchPost}, true
	}
	rest, ok := strings.CutPrefix(path, batchesPath+"/")
	if !ok {
		return route{}, false
	}
	seg, err := url.PathUnescape(rest)
	if err != nil || seg == "" || strings.Contains(seg, "/") {
		return route{}, false
	}
	if method != "GET" {
		return route{allow: "GET"}, true
	}
	if p := req.PathParameters["batchId"]; p != "" {
		seg = p
	}
	return route{method: methodBatchGet, param: seg}, true
}
