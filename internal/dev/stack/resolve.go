package stack

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// noValue is what !Ref AWS::NoValue resolves to; it is dropped from the
// enclosing map or list.
type noValueT struct{}

var noValue = noValueT{}

// ErrNotProvisioned is returned when a value refers to a resource the stack
// did not create (a function, a role, an alarm: the provisioner creates
// tables, queues and parameters only).
var ErrNotProvisioned = errors.New("stack: resource not provisioned")

// Resolve evaluates every intrinsic function in v (Ref, Fn::GetAtt, Fn::Sub,
// Fn::Join, Fn::Select, Fn::Split, Fn::If, Condition) against the stack's
// parameters, conditions and resources.
//
// goformation's processor, which evaluates the Conditions and Rules
// (conditions.go), does not resolve these the way a provisioner needs: its
// Ref gives a parameter's default and nothing for a resource, its GetAtt
// gives nothing, its Fn::Sub drops what it cannot resolve (and never calls
// the Ref or GetAtt given to it), its Fn::If evaluates both branches (a
// reference in the branch not taken would be provisioned), and no handler
// can return an error. So the stack resolves resource values itself: lazily,
// creating what a value refers to, and failing with a reason
// (ErrNotProvisioned, an unknown parameter).
func (s *Stack) Resolve(v any) (any, error) {
	out, err := s.resolve(v)
	if err != nil {
		return nil, err
	}
	if out == noValue {
		return nil, nil
	}
	return out, nil
}

// ResolveString resolves v and renders it as CloudFormation would pass it to
// a property of type String (numbers and booleans as text, lists joined by
// commas).
func (s *Stack) ResolveString(v any) (string, error) {
	out, err := s.Resolve(v)
	if err != nil {
		return "", err
	}
	return scalarString(out), nil
}

func (s *Stack) resolve(v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::") {
					return s.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := s.resolve(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if r != noValue {
				out[k] = r
			}
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			r, err := s.resolve(e)
			if err != nil {
				return nil, err
			}
			if r != noValue {
				out = append(out, r)
			}
		}
		return out, nil
	}
	return v, nil
}

func (s *Stack) resolveList(v any) ([]string, error) {
	r, err := s.Resolve(v)
	if err != nil {
		return nil, err
	}
	return listOf(r)
}

// listOf is a resolved list (or comma-delimited string) as strings.
func listOf(v any) ([]string, error) {
	switch x := v.(type) {
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = scalarString(e)
		}
		return out, nil
	case string:
		return strings.Split(x, ","), nil
	}
	return nil, fmt.Errorf("stack: %v is not a list", v)
}

// condition is the value of the named template condition (evaluated by New).
func (s *Stack) condition(name string) (bool, error) {
	b, ok := s.conds[name]
	if !ok {
		return false, fmt.Errorf("stack: condition %q is not defined", name)
	}
	return b, nil
}

// sub evaluates Fn::Sub: "${Name}", "${Res.Attr}" and "${!Literal}".
func (s *Stack) sub(arg any) (any, error) {
	var tmpl string
	vars := map[string]any{}
	switch x := arg.(type) {
	case string:
		tmpl = x
	case []any:
		if len(x) != 2 {
			return nil, fmt.Errorf("stack: Fn::Sub of %v", arg)
		}
		tmpl = str(x[0])
		for k, v := range asMap(x[1]) {
			r, err := s.ResolveString(v)
			if err != nil {
				return nil, err
			}
			vars[k] = r
		}
	default:
		return nil, fmt.Errorf("stack: Fn::Sub of %v", arg)
	}
	var b strings.Builder
	for {
		i := strings.Index(tmpl, "${")
		if i < 0 {
			b.WriteString(tmpl)
			return b.String(), nil
		}
		b.WriteString(tmpl[:i])
		j := strings.Index(tmpl[i:], "}")
		if j < 0 {
			return nil, fmt.Errorf("stack: Fn::Sub: unclosed ${ in %q", tmpl)
		}
		name := tmpl[i+2 : i+j]
		tmpl = tmpl[i+j+1:]
		if strings.HasPrefix(name, "!") {
			b.WriteString("${" + name[1:] + "}")
			continue
		}
		var val string
		var err error
		switch v, ok := vars[name]; {
		case ok:
			val = str(v)
		case strings.Contains(name, ".") && !strings.HasPrefix(name, "AWS::"):
			res, attr, _ := strings.Cut(name, ".")
			val, err = s.GetAtt(res, attr)
		default:
			var r any
			r, err = s.ref(name)
			val = scalarString(r)
		}
		if err != nil {
			return nil, err
		}
		b.WriteString(val)
	}
}

// SubNames returns the names a Fn::Sub template string refers to (without
// "${!...}" literals), e.g. ["AWS::Region", "Stage", "Queue.Arn"].
func SubNames(tmpl string) []string {
	var names []string
	for {
		i := strings.Index(tmpl, "${")
		if i < 0 {
			break
		}
		j := strings.Index(tmpl[i:], "}")
		if j < 0 {
			break
		}
		if name := tmpl[i+2 : i+j]; !strings.HasPrefix(name, "!") {
			names = append(names, name)
		}
		tmpl = tmpl[i+j+1:]
	}
	sort.Strings(names)
	return names
}

func (s *Stack) ref(id string) (any, error) {
	switch id {
	case "AWS::StackName":
		return s.opts.StackName, nil
	case "AWS::Region":
		return s.opts.Region, nil
	case "AWS::AccountId":
		return s.opts.AccountID, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::NoValue":
		return noValue, nil
	}
	if v, ok := s.params[id]; ok {
		if p := s.tmpl.Parameters[id]; p.Type == "CommaDelimitedList" || strings.HasPrefix(p.Type, "List<") {
			var out []any
			for _, e := range strings.Split(v, ",") {
				out = append(out, strings.TrimSpace(e))
			}
			return out, nil
		}
		return v, nil
	}
	if _, ok := s.tmpl.Parameters[id]; ok {
		return nil, fmt.Errorf("stack: parameter %s has no value and no default", id)
	}
	p, err := s.ensure(id)
	if err != nil {
		return nil, err
	}
	switch p.Type {
	case TypeQueue:
		return p.URL, nil
	case TypeTable, TypeParameter:
		return p.Name, nil
	}
	return p.Name, nil
}

// GetAtt returns attribute attr of resource id: Arn, QueueName, QueueUrl
// (queues), Arn, StreamArn (tables), Type, Value (parameters).
func (s *Stack) GetAtt(id, attr string) (string, error) {
	if r, ok := s.tmpl.Resources[id]; ok && r.Type == TypeRole && attr == "Arn" {
		// Roles are not emulated; a schedule names its role by ARN.
		name := str(r.Properties["RoleName"])
		if name == "" {
			name = s.defaultName(id)
		}
		return fmt.Sprintf("arn:aws:iam::%s:role/%s", s.opts.AccountID, name), nil
	}
	p, err := s.ensure(id)
	if err != nil {
		return "", err
	}
	switch {
	case attr == "Arn":
		return p.ARN, nil
	case p.Type == TypeQueue && attr == "QueueName":
		return p.Name, nil
	case p.Type == TypeQueue && attr == "QueueUrl":
		return p.URL, nil
	case p.Type == TypeTable && attr == "StreamArn":
		if p.StreamARN == "" {
			return "", fmt.Errorf("stack: GetAtt %s.StreamArn: the table has no stream", id)
		}
		return p.StreamARN, nil
	case p.Type == TypeParameter && attr == "Value":
		return p.Value, nil
	case p.Type == TypeParameter && attr == "Type":
		return "String", nil
	}
	return "", fmt.Errorf("stack: GetAtt %s.%s is not supported", id, attr)
}
