package enqueue

import (
	"net/http"
	"slices"
	"strings"

	"github.com/runstwice/runstwice/internal/apigw"
)

// jobsPrefix is the path every route shares.
const jobsPrefix = "/v1/jobs/"

// routesList names the routes in problem details.
const routesList = "POST /v1/jobs/{type}, GET /v1/jobs, GET /v1/jobs/{jobId}, DELETE /v1/jobs/{jobId}, " +
	"POST /v1/batches and GET /v1/batches/{batchId}"

// The API's routes, as Go's ServeMux patterns and as template.yaml's
// RouteKeys.
const (
	routePostJob   = "POST /v1/jobs/{type}"
	routeList      = "GET /v1/jobs"
	routeGetJob    = "GET /v1/jobs/{jobId}"
	routeCancelJob = "DELETE /v1/jobs/{jobId}"
	routePostBatch = "POST /v1/batches"
	routeGetBatch  = "GET /v1/batches/{batchId}"
)

// Routes are the routes the API serves (template.yaml declares the same
// RouteKeys, and the local gateway routes them).
func Routes() []string {
	return []string{routePostJob, routeList, routeGetJob, routeCancelJob, routePostBatch, routeGetBatch}
}

// apiMux routes every request of every Handler (the request's call names
// its Handler).
var apiMux = newMux()

// newMux is the API's ServeMux: its routes, and for every other method on
// their paths a 405 naming the methods the path takes (a GET route's path
// refuses HEAD too), and a 404 for any other path.
func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(routePostJob, endpoint((*Handler).post))
	mux.Handle(routePostBatch, endpoint((*Handler).postBatch))
	mux.Handle(routeList, endpoint(func(h *Handler, w http.ResponseWriter, r *http.Request, c *call) *Problem {
		h.list(r.Context(), c.log, c.caller, queryParams(r), c.corr).write(w)
		return nil
	}))
	mux.Handle(routeGetJob, endpoint(func(h *Handler, w http.ResponseWriter, r *http.Request, c *call) *Problem {
		h.get(r.Context(), c.log, c.caller, apigw.PathValue(r, "jobId"), c.corr).write(w)
		return nil
	}))
	mux.Handle(routeCancelJob, endpoint(func(h *Handler, w http.ResponseWriter, r *http.Request, c *call) *Problem {
		h.cancel(r.Context(), c.log, c.caller, apigw.PathValue(r, "jobId"), c.corr).write(w)
		return nil
	}))
	mux.Handle(routeGetBatch, endpoint(func(h *Handler, w http.ResponseWriter, r *http.Request, c *call) *Problem {
		h.getBatch(r.Context(), c.log, c.caller, apigw.PathValue(r, "batchId"), c.corr).write(w)
		return nil
	}))
	for path, allow := range map[string]string{
		"/v1/jobs/{jobId}": "DELETE, GET, POST", "/v1/jobs": "GET", "/v1/batches": "POST", "/v1/batches/{batchId}": "GET",
	} {
		mux.Handle(path, methodNotAllowed(allow))
		if strings.Contains(allow, http.MethodGet) {
			mux.Handle(http.MethodHead+" "+path, methodNotAllowed(allow))
		}
	}
	mux.Handle("/", http.HandlerFunc(notFound))
	return mux
}

// queryParams are r's query parameters as API Gateway passes them on: a
// parameter given more than once is one value, joined with commas.
func queryParams(r *http.Request) map[string]string {
	q := r.URL.Query()
	params := make(map[string]string, len(q))
	for k, vs := range q {
		params[k] = strings.Join(vs, ",")
	}
	return params
}

// notFound answers a path the API does not have.
func notFound(w http.ResponseWriter, r *http.Request) {
	newProblem(http.StatusNotFound, ProblemNotFound, "no such route; the API has "+routesList).response(callOf(r.Context()).corr).write(w)
}

// methodNotAllowed answers a path the API has with a method it does not
// take there.
func methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := newProblem(http.StatusMethodNotAllowed, ProblemMethod, "this path takes "+allow+"; the API has "+routesList)
		p.headers = map[string]string{"Allow": allow}
		p.response(callOf(r.Context()).corr).write(w)
	})
}

// route returns the request to route (r, or r with its dot segments
// escaped), its handler and its route (a pattern of Routes, "" for none).
// A path is routed as it is: one with an empty segment ("//"), an escaped
// "/" in a segment, or (from API Gateway) an escape that does not decode
// names no route, and a "." or ".." segment is a segment like any other,
// never a redirect to the cleaned path (ServeMux's own answer to them).
func route(r *http.Request) (*http.Request, http.Handler, string) {
	esc := r.URL.EscapedPath()
	if apigw.BadPath(r) || strings.Contains(esc, "//") || strings.Count(esc, "/") != strings.Count(r.URL.Path, "/") {
		return r, http.HandlerFunc(notFound), ""
	}
	segs := strings.Split(esc, "/")
	dots := false
	for i, s := range segs {
		if s == "." || s == ".." {
			segs[i], dots = strings.ReplaceAll(s, ".", "%2E"), true
		}
	}
	if dots {
		u := *r.URL
		u.RawPath = strings.Join(segs, "/")
		r = r.Clone(r.Context())
		r.URL = &u
	}
	if _, pattern := apiMux.Handler(r); slices.Contains(Routes(), pattern) {
		return r, apiMux, pattern
	}
	return r, apiMux, ""
}

// httpRoute is the route template of a route, as http.route names it ("" for
// none).
func httpRoute(route string) string {
	_, path, _ := strings.Cut(route, " ")
	return path
}
