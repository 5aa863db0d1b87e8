// Package stack reads the SAM template (template.yaml) and provisions the
// resources it declares against an AWS endpoint, so the local stack and the
// tests create exactly the tables, queues and parameters that deploy to AWS:
// one source of truth for names, keys, TTLs and redrive policies.
//
// Load parses the template (CloudFormation short-form tags such as !Ref,
// !Sub and !GetAtt become their long form). Provision creates the DynamoDB
// tables, SQS queues and SSM parameters on an endpoint (moto) and returns a
// Stack, which resolves !Ref, !Sub and !GetAtt against what it created, e.g.
// a function's environment variables.
package stack

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
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
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse yaml: %w", err)
	}
	if len(doc.Content) == 0 {
		return nil, errors.New("empty template")
	}
	raw, err := decode(doc.Content[0])
	if err != nil {
		return nil, err
	}
	top, ok := raw.(map[string]any)
	if !ok {
		return nil, errors.New("template is not a mapping")
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

// decode turns a YAML node into plain values, intrinsic short forms into
// their long form.
func decode(n *yaml.Node) (any, error) {
	if n.Kind == yaml.AliasNode {
		return decode(n.Alias)
	}
	if tag := n.Tag; strings.HasPrefix(tag, "!") && !strings.HasPrefix(tag, "!!") {
		return decodeIntrinsic(tag[1:], n)
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			v, err := decode(n.Content[i+1])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			m[k] = v
		}
		return m, nil
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := decode(c)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return decode(n.Content[0])
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

func decodeIntrinsic(name string, n *yaml.Node) (any, error) {
	plain := *n
	plain.Tag = ""
	if n.Kind == yaml.ScalarNode {
		plain.Tag = "!!str"
	}
	v, err := decode(&plain)
	if err != nil {
		return nil, err
	}
	switch name {
	case "Ref":
		return map[string]any{"Ref": v}, nil
	case "Condition":
		return map[string]any{"Condition": v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q has no attribute", n.Line, s)
			}
			return map[string]any{"Fn::GetAtt": []any{res, attr}}, nil
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
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
