package stack

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// rulesTemplate declares the parameters resolveTemplate declares: each test
// file's template stands alone.
const rulesTemplate = `
Parameters:
  Stage: {Type: String, Default: dev}
  Mail: {Type: String, Default: a@example.com}
  Aud: {Type: CommaDelimitedList, Default: ""}
Rules:
  RealMail:
    RuleCondition: !Not [!Contains [[dev, local], !Ref Stage]]
    Assertions:
      - Assert: !Not [!Contains [[a@example.com], !Ref Mail]]
        AssertDescription: Mail is a placeholder.
  Audience:
    RuleCondition: !Equals [!Ref Stage, prod]
    Assertions:
      - Assert: !Not [!EachMemberEquals [!Ref Aud, ""]]
        AssertDescription: Aud is empty.
      - Assert: !EachMemberIn [!Ref Aud, [x, y, ""]]
        AssertDescription: Aud names an unknown audience.
Resources: {}
`

// TestCheckRules evaluates Rules the way CloudFormation does: a rule whose
// condition holds needs every assertion true, and the refusal names each
// failed assertion.
func TestCheckRules(t *testing.T) {
	tmpl, err := Parse([]byte(rulesTemplate))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		params map[string]string
		want   []string
	}{
		{"condition false: not checked", map[string]string{"Stage": "dev"}, nil},
		{"placeholder outside dev", map[string]string{"Stage": "staging"}, []string{"Mail is a placeholder."}},
		{"every failure is named", map[string]string{"Stage": "prod"}, []string{"Aud is empty.", "Mail is a placeholder."}},
		{"unknown member", map[string]string{"Stage": "prod", "Mail": "b@real.dev", "Aud": "x,z"}, []string{"Aud names an unknown audience."}},
		{"all set", map[string]string{"Stage": "prod", "Mail": "b@real.dev", "Aud": "x,y"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tmpl, Options{Params: tc.params})
			var re *RulesError
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.As(err, &re) {
				t.Fatalf("got %v, want a *RulesError", err)
			}
			var got []string
			for _, f := range re.Failures {
				got = append(got, f.Description)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("failures %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCheckRulesRefusesWhatCloudFormationRefuses: Rules accept only Ref and
// the rule functions, so a substring test through Fn::Split is an error,
// not a silently passing rule.
func TestCheckRulesRefusesWhatCloudFormationRefuses(t *testing.T) {
	bad := strings.Replace(rulesTemplate, "!Not [!Contains [[a@example.com], !Ref Mail]]",
		`!Not [!Equals [!Select [1, !Split ["@", !Ref Mail]], example.com]]`, 1)
	tmpl, err := Parse([]byte(bad))
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(tmpl, Options{Params: map[string]string{"Stage": "prod"}})
	var re *RulesError
	if err == nil || errors.As(err, &re) || !strings.Contains(err.Error(), "Fn::Select is not allowed in Rules") {
		t.Fatalf("got %v, want an error naming Fn::Select", err)
	}
}
