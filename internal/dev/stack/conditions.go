package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// The template's Conditions and Rules refer to parameters only, so
// goformation's intrinsic processor evaluates them: Fn::And, Fn::Or,
// Fn::Not, and Condition (one condition naming another). The stack gives it
// what it lacks: Ref (goformation's gives a parameter its default and a
// fixed region and stack name, not the stack's values), Fn::Equals
// (goformation compares typed values, CloudFormation compares the strings:
// !Equals [!Ref MaxReceiveCount, 5] holds), the rule functions, and errors:
// a handler returns a value, never an error, so each handler records what
// failed and the evaluation reports it.

// evaluator runs goformation's processor with the stack's handlers and
// collects their errors.
type evaluator struct {
	s    *Stack
	errs []error
}

func (e *evaluator) fail(err error) any {
	e.errs = append(e.errs, err)
	return nil
}

// handlers are the stack's overrides of goformation's handlers; rules adds
// the rule functions.
func (e *evaluator) handlers(rules bool) map[string]intrinsics.IntrinsicHandler {
	h := map[string]intrinsics.IntrinsicHandler{
		"Ref": func(_ string, arg, _ any) any {
			id, ok := arg.(string)
			if !ok {
				return e.fail(fmt.Errorf("stack: Ref of %v", arg))
			}
			v, err := e.s.ref(id)
			if err != nil {
				return e.fail(err)
			}
			return v
		},
		"Fn::Equals": func(_ string, arg, _ any) any {
			parts, _ := arg.([]any)
			if len(parts) != 2 {
				return e.fail(fmt.Errorf("stack: Fn::Equals of %v", arg))
			}
			return scalarString(parts[0]) == scalarString(parts[1])
		},
	}
	if rules {
		for _, name := range []string{"Fn::Contains", "Fn::EachMemberEquals", "Fn::EachMemberIn"} {
			h[name] = func(name string, arg, _ any) any {
				v, err := ruleFunction(name, arg)
				if err != nil {
					return e.fail(err)
				}
				return v
			}
		}
		for _, name := range []string{"Fn::RefAll", "Fn::ValueOf", "Fn::ValueOfAll"} {
			h[name] = func(name string, _, _ any) any {
				return e.fail(fmt.Errorf("stack: %s is not supported (it needs AWS-specific parameter types)", name))
			}
		}
	}
	return h
}

// process evaluates doc with goformation's processor and returns what it
// made of it.
func (e *evaluator) process(doc map[string]any, conditions, rules bool) (map[string]any, error) {
	in, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	out, err := intrinsics.ProcessJSON(in, &intrinsics.ProcessorOptions{
		EvaluateConditions: conditions, IntrinsicHandlerOverrides: e.handlers(rules),
	})
	if err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	if len(e.errs) > 0 {
		slices.SortFunc(e.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return nil, errors.Join(slices.CompactFunc(e.errs, func(a, b error) bool { return a.Error() == b.Error() })...)
	}
	var got map[string]any
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&got); err != nil {
		return nil, fmt.Errorf("stack: %w", err)
	}
	return got, nil
}

// evalConditions evaluates every condition of the template against the
// stack's parameters, as CloudFormation does before it creates anything.
func (s *Stack) evalConditions() (map[string]bool, error) {
	if len(s.tmpl.Conditions) == 0 {
		return map[string]bool{}, nil
	}
	e := &evaluator{s: s}
	got, err := e.process(map[string]any{"Conditions": s.tmpl.Conditions}, true, false)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(s.tmpl.Conditions))
	for name, v := range asMap(got["Conditions"]) {
		b, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("stack: condition %s is not a boolean (%v)", name, v)
		}
		out[name] = b
	}
	return out, nil
}

// ruleBool evaluates a rule's condition or assertion v, which may use Ref
// and the rule functions only.
func (s *Stack) ruleBool(v any) (bool, error) {
	if err := ruleOnly(v); err != nil {
		return false, err
	}
	e := &evaluator{s: s}
	got, err := e.process(map[string]any{"V": v}, false, true)
	if err != nil {
		return false, err
	}
	b, ok := got["V"].(bool)
	if !ok {
		return false, fmt.Errorf("%v is not a condition", v)
	}
	return b, nil
}
