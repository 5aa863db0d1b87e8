package sqsqueue

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/engine"
)

// A message that reaches its queue from a schedule carries the attributes
// of its body, as a sent one does.
func TestBodyAttributes(t *testing.T) {
	for _, tc := range []struct {
		name, body, typ, corr string
	}{
		{"envelope", `{"v":1,"messageId":"m","type":"email.welcome.v1","correlationId":"c-1","args":{}}`, "email.welcome.v1", "c-1"},
		{"tick", `{"v":1,"type":"tick.v1","schedule":"s","correlationId":"c-2"}`, "tick.v1", "c-2"},
		{"no correlation id", `{"type":"t"}`, "t", ""},
		{"not an object", `[1,2]`, "", ""},
		{"not JSON", `hello`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := BodyAttributes(tc.body)
			want := map[string]string{engine.AttrType: tc.typ, engine.AttrCorrelationID: tc.corr}
			for name, v := range want {
				a, ok := attrs[name]
				if v == "" {
					if ok {
						t.Errorf("%s = %v, want none", name, aws.ToString(a.StringValue))
					}
					continue
				}
				if !ok || aws.ToString(a.StringValue) != v || aws.ToString(a.DataType) != "String" {
					t.Errorf("%s = %+v, want String %q", name, a, v)
				}
			}
			if len(attrs) > 2 {
				t.Errorf("attrs %v: more than type and correlationId", attrs)
			}
		})
	}
}
