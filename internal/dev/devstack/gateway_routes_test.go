package devstack

import (
	"fmt"
	"slices"
	"testing"

	"github.com/runstwice/runstwice/internal/dev/stack"
)

// The local gateway has the HTTP API's routes, as template.yaml declares
// them, and so does the enqueue function's ServeMux (the gateway routes
// enqueue.Routes): a route added to the template and not to the handler
// would answer 404 locally.
func TestGatewayHasTheTemplatesRoutes(t *testing.T) {
	tmpl := stack.RepoTemplate(t)
	var want []string
	for _, id := range tmpl.IDs("AWS::ApiGatewayV2::Route") {
		want = append(want, fmt.Sprint(tmpl.Resources[id].Properties["RouteKey"]))
	}
	var got []string
	for _, rt := range NewGateway(nil).routes {
		key := rt.method + " " + rt.prefix
		if rt.param != "" {
			key += "{" + rt.param + "}"
		}
		got = append(got, key)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the local gateway routes %v; template.yaml declares %v", got, want)
	}
}
