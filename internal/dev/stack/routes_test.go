package stack

import (
	"fmt"
	"slices"
	"testing"
)

// The HTTP API routes every route the enqueue function serves, each to the
// function and each authenticated: POST /v1/jobs/{type}, GET /v1/jobs,
// GET and DELETE /v1/jobs/{jobId}, POST /v1/batches and GET
// /v1/batches/{batchId} (docs/api.md).
func TestTemplateRoutes(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkRoutes(tmpl))
}

func checkRoutes(t *Template) []string {
	want := []string{"DELETE /v1/jobs/{jobId}", "GET /v1/batches/{batchId}", "GET /v1/jobs", "GET /v1/jobs/{jobId}", "POST /v1/batches", "POST /v1/jobs/{type}"}
	var got, problems []string
	for _, id := range t.IDs("AWS::ApiGatewayV2::Route") {
		p := t.Resources[id].Properties
		key := str(p["RouteKey"])
		got = append(got, key)
		if fmt.Sprint(p["Target"]) != fmt.Sprint(map[string]any{"Fn::Sub": "integrations/${HttpApiIntegration}"}) {
			problems = append(problems, id+": does not target the enqueue integration")
		}
		if fmt.Sprint(p["AuthorizationType"]) == "NONE" || p["AuthorizationType"] == nil {
			problems = append(problems, id+": is not authenticated")
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("routes %v; want %v", got, want))
	}
	return problems
}
