// Package stack reads the SAM template (template.yaml) and provisions the
// resources it declares against an AWS endpoint, so the local stack and the
// tests create exactly the tables, queues and parameters that deploy to AWS:
// one source of truth for names, keys, TTLs and redrive policies.
//
// Load reads the template with goformation (CloudFormation short-form tags
// such as !Ref, !Sub and !GetAtt become their long form; read.go).
// Provision creates the DynamoDB tables, SQS queues and SSM parameters on an
// endpoint (moto) and returns a Stack, which resolves !Ref, !Sub and !GetAtt
// against what it created, e.g. a function's environment variables.
package stack

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Resource types the provisioner creates.
const (
	TypeTable     = "AWS::DynamoDB::Table"
	TypeQueue     = "AWS::SQS::Queue"
	TypeParameter = "AWS::SSM::Parameter"
	TypeFunction  = "AWS::Serverless::Function"
	TypeRole      = "AWS::IAM::Role"
	TypeLogGroup  = "AWS::Logs::LogGroup"
	// TypeScheduleGroup and TypeSchedule are EventBridge Scheduler's.
	TypeScheduleGroup = "AWS::Scheduler::ScheduleGroup"
	TypeSchedule      = "AWS::Scheduler::Schedule"
)

// Template is a parsed CloudFormation (SAM) template. Values are what YAML
// decodes to (map[string]any, []any, string, int, bool, float64, nil), with
// intrinsic functions in their long form: {"Ref": "X"},
// {"Fn::GetAtt": ["X", "Arn"]}, {"Fn::Sub": "..."}, and so on.
type Template struct {
	Parameters map[string]Parameter
	Conditions map[string]any
	// Globals is the SAM Globals section, e.g. Globals["Function"].
	Globals   map[string]map[string]any
	Resources map[string]Resource
	Outputs   map[string]any
	// Rules is the Rules section: parameter checks CloudFormation runs
	// before it creates or updates anything (see CheckRules).
	Rules map[string]any
}

// Parameter is a template parameter.
type Parameter struct {
	Type string
	// Default is the default value as a string ("" when there is none).
	Default    string
	HasDefault bool
	// AllowedPattern is the regular expression a value must match ("" for
	// none).
	AllowedPattern string
}

// Resource is one entry of the Resources section.
type Resource struct {
	Type       string
	Condition  string
	Properties map[string]any
	Metadata   map[string]any
	// DeletionPolicy and UpdateReplacePolicy are the resource attributes of
	// the same names ("" when absent, which CloudFormation treats as Delete).
	DeletionPolicy      string
	UpdateReplacePolicy string
}

// Load reads and parses the template file at path.
func Load(path string) (*Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("stack: read template: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("stack: %s: %w", path, err)
	}
	return t, nil
}

// Parse parses a template from YAML (or JSON) text.
func Parse(data []byte) (*Template, error) {
	top, err := readTemplate(data)
	if err != nil {
		return nil, err
	}
	t := &Template{
		Parameters: map[string]Parameter{},
		Conditions: asMap(top["Conditions"]),
		Globals:    map[string]map[string]any{},
		Resources:  map[string]Resource{},
		Outputs:    asMap(top["Outputs"]),
		Rules:      asMap(top["Rules"]),
	}
	for name, v := range asMap(top["Parameters"]) {
		m := asMap(v)
		p := Parameter{Type: str(m["Type"]), AllowedPattern: str(m["AllowedPattern"])}
		if d, ok := m["Default"]; ok {
			p.Default, p.HasDefault = scalarString(d), true
		}
		t.Parameters[name] = p
	}
	for name, v := range asMap(top["Globals"]) {
		t.Globals[name] = asMap(v)
	}
	for id, v := range asMap(top["Resources"]) {
		m := asMap(v)
		typ := str(m["Type"])
		if typ == "" {
			return nil, fmt.Errorf("resource %s has no Type", id)
		}
		t.Resources[id] = Resource{
			Type:       typ,
			Condition:  str(m["Condition"]),
			Properties: asMap(m["Properties"]),
			Metadata:   asMap(m["Metadata"]),

			DeletionPolicy:      str(m["DeletionPolicy"]),
			UpdateReplacePolicy: str(m["UpdateReplacePolicy"]),
		}
	}
	return t, nil
}

// IDs returns the logical ids of the resources of type typ, sorted.
func (t *Template) IDs(typ string) []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// FunctionProperties returns the properties of the AWS::Serverless::Function
// id with the template's Globals.Function merged in (the function's own
// values win; Environment.Variables are merged name by name), the way SAM
// does.
func (t *Template) FunctionProperties(id string) (map[string]any, error) {
	r, ok := t.Resources[id]
	if !ok || r.Type != TypeFunction {
		return nil, fmt.Errorf("stack: %s is not a function in the template", id)
	}
	out := map[string]any{}
	for k, v := range t.Globals["Function"] {
		out[k] = v
	}
	for k, v := range r.Properties {
		out[k] = v
	}
	vars := map[string]any{}
	for k, v := range EnvironmentVariables(t.Globals["Function"]) {
		vars[k] = v
	}
	for k, v := range EnvironmentVariables(r.Properties) {
		vars[k] = v
	}
	out["Environment"] = map[string]any{"Variables": vars}
	return out, nil
}

// EnvironmentVariables returns props.Environment.Variables (unresolved).
func EnvironmentVariables(props map[string]any) map[string]any {
	return asMap(asMap(props["Environment"])["Variables"])
}

// FunctionByCodeURI returns the logical id of the function whose CodeUri is
// dir (e.g. "functions/email"; a trailing slash is ignored).
func (t *Template) FunctionByCodeURI(dir string) (string, bool) {
	want := strings.TrimSuffix(strings.TrimPrefix(dir, "./"), "/")
	for _, id := range t.IDs(TypeFunction) {
		got := strings.TrimSuffix(strings.TrimPrefix(str(t.Resources[id].Properties["CodeUri"]), "./"), "/")
		if got == want {
			return id, true
		}
	}
	return "", false
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// scalarString renders a YAML scalar the way CloudFormation sees it.
func scalarString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalarString(e)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}
