package stack

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// TestParseLongForms: every short form reads as CloudFormation's long form,
// the ones goformation's reader knows and the ones it does not
// (!Condition, the rule functions), and numbers stay whole.
func TestParseLongForms(t *testing.T) {
	tests := []struct {
		name, in string
		want     any
	}{
		{"ref", `!Ref Stage`, map[string]any{"Ref": "Stage"}},
		{"getatt short", `!GetAtt Queue.Arn`, map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"getatt list", `!GetAtt [Queue, Arn]`, map[string]any{"Fn::GetAtt": []any{"Queue", "Arn"}}},
		{"sub in if", `!If [On, !Sub "${A}-x", 3]`, map[string]any{"Fn::If": []any{"On", map[string]any{"Fn::Sub": "${A}-x"}, 3}}},
		{"condition", `!Not [!Condition On]`, map[string]any{"Fn::Not": []any{map[string]any{"Condition": "On"}}}},
		{"contains", `!Contains [[dev, local], !Ref Stage]`,
			map[string]any{"Fn::Contains": []any{[]any{"dev", "local"}, map[string]any{"Ref": "Stage"}}}},
		{"each member equals", `!EachMemberEquals [!Ref Aud, ""]`, map[string]any{"Fn::EachMemberEquals": []any{map[string]any{"Ref": "Aud"}, ""}}},
		{"each member in", `!EachMemberIn [!Ref Aud, [x]]`, map[string]any{"Fn::EachMemberIn": []any{map[string]any{"Ref": "Aud"}, []any{"x"}}}},
		{"unknown function", `!Nope x`, map[string]any{"Fn::Nope": "x"}},
		{"numbers", `{a: 5, b: 2.5, c: "5"}`, map[string]any{"a": 5, "b": 2.5, "c": "5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Parse([]byte("Outputs: {V: " + tc.in + "}"))
			if err != nil {
				t.Fatal(err)
			}
			if got := doc.Outputs["V"]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	// Keys are strings, as CloudFormation reads them (goformation's JSON
	// cannot hold any other).
	doc, err := Parse([]byte("Outputs: {V: {123456789012: prod, true: dev}}"))
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.Outputs["V"]; !reflect.DeepEqual(got, map[string]any{"123456789012": "prod", "true": "dev"}) {
		t.Errorf("got %#v, want the keys as strings", got)
	}
	if _, err := Parse([]byte("Outputs: {V: !GetAtt Queue}")); err == nil || !strings.Contains(err.Error(), "has no attribute") {
		t.Errorf("!GetAtt without attribute: %v", err)
	}
}

// TestParseConcurrently: goformation's reader writes a package-level map on
// every call, so Parse serializes it; two at once must not race (go test
// -race) or crash.
func TestParseConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 5 {
				// Each template differs, so none is read from the memo.
				doc, err := Parse(fmt.Appendf(nil, "Outputs: {V: !Sub \"%d-%d-${AWS::Region}\"}", i, j))
				if err != nil {
					t.Error(err)
					return
				}
				if got := asMap(doc.Outputs["V"])["Fn::Sub"]; got != fmt.Sprintf("%d-%d-${AWS::Region}", i, j) {
					t.Errorf("got %v", got)
				}
			}
		})
	}
	wg.Wait()
}

// TestParseGivesEachCallerItsOwnValues: the memo of read templates never
// hands two callers the same maps.
func TestParseGivesEachCallerItsOwnValues(t *testing.T) {
	const src = "Outputs: {V: {A: 1}}"
	a, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	asMap(a.Outputs["V"])["A"] = 2
	b, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := asMap(b.Outputs["V"])["A"]; got != 1 {
		t.Fatalf("second Parse sees the first caller's change: %v", got)
	}
}
