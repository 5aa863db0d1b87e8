package obs

import (
	"context"
	"strings"
)

// lambdaTraceKey is where aws-lambda-go puts the invocation's X-Ray trace
// header in the context.
const lambdaTraceKey = "x-amzn-trace-id"

// TraceHeader returns the X-Ray trace header of the Lambda invocation of
// ctx ("Root=1-…;Parent=…;Sampled=1"), or "".
func TraceHeader(ctx context.Context) string {
	v, _ := ctx.Value(lambdaTraceKey).(string)
	return v
}

// TraceRoot returns the trace id of an X-Ray trace header: its Root field
// ("1-5759e988-bd862e3fe1be46a994272793"), or "" when it has none. It is
// what log lines carry as traceId.
func TraceRoot(header string) string {
	for _, part := range strings.Split(header, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && k == "Root" && validTraceID(v) {
			return v
		}
	}
	return ""
}

// validTraceID accepts the X-Ray trace id form 1-<8 hex>-<24 hex>.
func validTraceID(v string) bool {
	if len(v) != 35 || v[0] != '1' || v[1] != '-' || v[10] != '-' {
		return false
	}
	for i, c := range v {
		if i == 0 || i == 1 || i == 10 {
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
