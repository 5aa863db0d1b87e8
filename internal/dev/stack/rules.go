package stack

import (
	"fmt"
	"slices"
	"strings"
)

// RuleFailure is one assertion of the template's Rules that the stack's
// parameters fail.
type RuleFailure struct {
	// Rule is the rule's name in the Rules section.
	Rule string
	// Description is the assertion's AssertDescription: what CloudFormation
	// shows when it refuses the deploy.
	Description string
}

// RulesError reports every failed assertion of the template's Rules.
type RulesError struct {
	Failures []RuleFailure
}

func (e *RulesError) Error() string {
	parts := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		parts[i] = f.Rule + ": " + f.Description
	}
	return "stack: the parameters fail the template's rules: " + strings.Join(parts, "; ")
}

// CheckRules evaluates the template's Rules against the stack's parameters
// the way CloudFormation does before it creates or updates a stack: every
// assertion of a rule whose RuleCondition holds (or that has none) must be
// true. It returns a *RulesError naming each failed assertion, or an error
// for a rule CloudFormation would refuse (a function other than Ref and the
// rule functions) or it cannot evaluate (Fn::RefAll, Fn::ValueOf and
// Fn::ValueOfAll need AWS-specific parameter types, which the template does
// not use).
func (s *Stack) CheckRules() error {
	var failures []RuleFailure
	for _, name := range SortedIDs(s.tmpl.Rules) {
		rule := asMap(s.tmpl.Rules[name])
		if cond, ok := rule["RuleCondition"]; ok {
			holds, err := s.ruleBool(cond)
			if err != nil {
				return fmt.Errorf("stack: rule %s: RuleCondition: %w", name, err)
			}
			if !holds {
				continue
			}
		}
		assertions := list(rule["Assertions"])
		if len(assertions) == 0 {
			return fmt.Errorf("stack: rule %s has no Assertions", name)
		}
		for i, a := range assertions {
			am := asMap(a)
			ok, err := s.ruleBool(am["Assert"])
			if err != nil {
				return fmt.Errorf("stack: rule %s: assertion %d: %w", name, i, err)
			}
			if !ok {
				failures = append(failures, RuleFailure{Rule: name, Description: str(am["AssertDescription"])})
			}
		}
	}
	if len(failures) > 0 {
		return &RulesError{Failures: failures}
	}
	return nil
}

// ruleFunctions are the functions CloudFormation accepts in Rules: the
// rule-specific ones and Ref (no Fn::Sub, Fn::Split, Fn::Select...).
var ruleFunctions = map[string]bool{
	"Ref": true, "Fn::And": true, "Fn::Or": true, "Fn::Not": true, "Fn::Equals": true, "Fn::Contains": true,
	"Fn::EachMemberEquals": true, "Fn::EachMemberIn": true, "Fn::RefAll": true, "Fn::ValueOf": true, "Fn::ValueOfAll": true,
}

// ruleOnly reports the first function in v that Rules do not accept.
func ruleOnly(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if (k == "Condition" || strings.HasPrefix(k, "Fn::")) && !ruleFunctions[k] {
				return fmt.Errorf("%s is not allowed in Rules (only Ref and the rule functions)", k)
			}
			if err := ruleOnly(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := ruleOnly(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// ruleFunction evaluates the functions that exist only in Rules, which
// goformation does not know: Fn::Contains, Fn::EachMemberEquals and
// Fn::EachMemberIn, on their evaluated arguments.
func ruleFunction(name string, arg any) (any, error) {
	parts, _ := arg.([]any)
	if len(parts) != 2 {
		return nil, fmt.Errorf("stack: %s of %v", name, arg)
	}
	members, err := listOf(parts[0])
	if err != nil {
		return nil, err
	}
	want := scalarString(parts[1])
	switch name {
	case "Fn::EachMemberIn":
		allowed, err := listOf(parts[1])
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			if !slices.Contains(allowed, m) {
				return false, nil
			}
		}
		return true, nil
	case "Fn::Contains":
		return slices.Contains(members, want), nil
	}
	for _, m := range members {
		if m != want {
			return false, nil
		}
	}
	return true, nil
}
