package stack

import (
	"errors"
	"reflect"
	"testing"
)

const resolveTemplate = `
Parameters:
  Stage: {Type: String, Default: dev}
  Mail: {Type: String, Default: a@example.com}
  Aud: {Type: CommaDelimitedList, Default: "x,y"}
  Flag: {Type: String, Default: "on"}
Conditions:
  IsOn: !Equals [!Ref Flag, "on"]
  IsOff: !Not [!Condition IsOn]
Resources:
  Fn:
    Type: AWS::Serverless::Function
Outputs: {}
`

func TestResolve(t *testing.T) {
	tmpl, err := Parse([]byte(resolveTemplate))
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(tmpl, Options{StackName: "s1", Params: map[string]string{"Flag": "on"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
		want any
	}{
		{"ref parameter, Stage defaults to local", `!Ref Stage`, "local"},
		{"sub with pseudo parameters", `!Sub "${AWS::StackName}-q-${AWS::Region}-${!Literal}"`, "s1-q-us-east-1-${Literal}"},
		{"sub with variables", `!Sub ["id/${D}", {D: !Select [1, !Split ["@", !Ref Mail]]}]`, "id/example.com"},
		{"join", `!Join ["-", [a, !Ref Stage]]`, "a-local"},
		{"list parameter", `!Ref Aud`, []any{"x", "y"}},
		{"if true", `!If [IsOn, yes, no]`, "yes"},
		{"if false", `!If [IsOff, yes, no]`, "no"},
		{"no value dropped", `{A: !If [IsOff, x, !Ref AWS::NoValue], B: 1}`, map[string]any{"B": 1}},
		{"getatt short form", `{"k": !GetAtt Fn.Arn}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc, err := Parse([]byte("Outputs: {V: " + tc.in + "}"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := st.Resolve(doc.Outputs["V"])
			if tc.want == nil {
				if !errors.Is(err, ErrNotProvisioned) {
					t.Fatalf("got %v, %v; want ErrNotProvisioned", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
	if _, err := New(tmpl, Options{Params: map[string]string{"Nope": "1"}}); err == nil {
		t.Error("unknown parameter accepted")
	}
}
