package stack

import (
	"strings"
	"testing"
)

// TestConditions evaluates the Conditions as CloudFormation does: Fn::Equals
// compares strings (a Number parameter equals the number), conditions name
// conditions, and New refuses one it cannot evaluate.
func TestConditions(t *testing.T) {
	const src = `
Parameters:
  Count: {Type: Number, Default: 5}
  Stage: {Type: String, Default: dev}
Conditions:
  FiveByNumber: !Equals [!Ref Count, 5]
  Prod: !Equals [!Ref Stage, prod]
  NotProd: !Not [!Condition Prod]
  Both: !And [!Condition FiveByNumber, !Condition NotProd]
  Either: !Or [!Condition Prod, !Equals [!Ref "AWS::Region", eu-west-1]]
Resources: {}
`
	tmpl, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(tmpl, Options{Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"FiveByNumber": true, "Prod": false, "NotProd": true, "Both": true, "Either": true} {
		if got, err := st.condition(name); err != nil || got != want {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, tc := range []struct{ name, cond, want string }{
		{"unknown parameter", `!Equals [!Ref Nope, x]`, `"Nope"`},
		{"not a condition", `!Ref Stage`, "not a boolean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, err := Parse([]byte(strings.Replace(src, "Resources: {}", "  Bad: "+tc.cond+"\nResources: {}", 1)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := New(bad, Options{}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v; want an error containing %s", err, tc.want)
			}
		})
	}
}
