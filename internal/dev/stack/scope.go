package stack

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The emulation wing's scope, frozen: what the local stack emulates of the
// template, and what it knowingly does not. docs/local.md ("What the local
// stack emulates") lists both; a test keeps that list and these maps
// equal. A template resource of a type in neither is refused (ScopeError):
// a new kind of AWS resource is a decision about the emulator, taken here
// and in the docs, never a silent gap.
var (
	// Emulated maps each emulated resource type to how.
	Emulated = map[string]string{
		TypeTable:         "created on moto: keys, indexes, stream, TTL, point-in-time recovery",
		TypeQueue:         "created on moto: attributes and redrive policy; polled as an event source mapping does",
		TypeParameter:     "created on moto (an existing value is kept)",
		TypeScheduleGroup: "created on moto",
		TypeSchedule:      "created on moto and fired by the local stack when due",
		TypeRole:          "named only: its ARN resolves (a schedule's RoleArn); nothing checks its policies locally",
		TypeFunction:      "run under aws-lambda-rie with its template environment and its SQS and stream event sources",
		"AWS::ApiGatewayV2::Api": "served by the local gateway on 127.0.0.1:3000 " +
			"(the template's routes; SigV4 checked against the test identities, X-Caller)",
	}
	// NotEmulated maps each resource type the local stack knowingly leaves
	// out to why: the template tests check them instead.
	NotEmulated = map[string]string{
		"AWS::ApiGatewayV2::Authorizer":  "the local gateway takes the caller from SigV4 or X-Caller",
		"AWS::ApiGatewayV2::Integration": "the local gateway invokes the enqueue function itself",
		"AWS::ApiGatewayV2::Route":       "the local gateway serves the enqueue function's routes",
		"AWS::ApiGatewayV2::Stage":       "one local stage",
		"AWS::CloudWatch::Alarm":         "alarms: the template tests check their metrics and topics",
		"AWS::CloudWatch::Dashboard":     "no CloudWatch locally: metrics are EMF log lines",
		"AWS::KMS::Key":                  "no encryption locally",
		"AWS::KMS::Alias":                "no encryption locally",
		"AWS::Lambda::Permission":        "the local gateway invokes the function itself",
		"AWS::Logs::LogGroup":            "the functions' logs go to .devstack/functions.log",
		"AWS::SNS::Topic":                "no alarms locally",
		"AWS::SNS::Subscription":         "no alarms locally",
	}
)

// ScopeError is a template resource of a type the local stack neither
// emulates nor knowingly leaves out.
type ScopeError struct {
	// Resources maps each such logical id to its type.
	Resources map[string]string
}

func (e *ScopeError) Error() string {
	ids := make([]string, 0, len(e.Resources))
	for id := range e.Resources {
		ids = append(ids, id+" ("+e.Resources[id]+")")
	}
	sort.Strings(ids)
	return fmt.Sprintf("stack: the local stack does not emulate %s; it emulates %s and knowingly leaves out %s: "+
		"add the type to stack.Emulated (and emulate it) or stack.NotEmulated, and to docs/local.md",
		strings.Join(ids, ", "), strings.Join(sortedKeys(Emulated), ", "), strings.Join(sortedKeys(NotEmulated), ", "))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return slices.Sorted(slices.Values(keys))
}

// CheckScope refuses a template with a resource outside the local stack's
// scope (a *ScopeError naming them all).
func CheckScope(t *Template) error {
	out := map[string]string{}
	for id, r := range t.Resources {
		if _, ok := Emulated[r.Type]; ok {
			continue
		}
		if _, ok := NotEmulated[r.Type]; ok {
			continue
		}
		out[id] = r.Type
	}
	if len(out) > 0 {
		return &ScopeError{Resources: out}
	}
	return nil
}
