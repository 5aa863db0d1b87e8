package contract

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/message"
)

// A body that says two things, a member twice or two names that differ
// only in case, is refused naming the member: encoding/json would keep
// the last, or read "Args" as args, while a reader that keeps the first
// sees another request.
func TestBodyThatSaysTwoThingsIsRefused(t *testing.T) {
	for _, c := range []struct {
		name, body, field, reason string
	}{
		{"args twice", `{"args":{"userId":"u-1"},"args":{"userId":"u-2"}}`, "args", "appears twice"},
		{"userId twice in args", `{"args":{"userId":"u-1","userId":"u-2"}}`, "args.userId", "appears twice"},
		{"key twice", `{"args":{"userId":"u-1"},"key":"k-1","key":"k-2"}`, "key", "appears twice"},
		{"args twice, one escaped", `{"args":{"userId":"u-1"},"\u0061rgs":{"userId":"u-2"}}`, "args", "appears twice"},
		{"args and ARGS", `{"args":{"userId":"u-1"},"ARGS":{"userId":"u-2"}}`, "ARGS", "differs from args only in case"},
		{"userId and UserID", `{"args":{"userId":"u-1","UserID":"u-2"}}`, "args.UserID", "differs from userId only in case"},
		{"Args alone", `{"Args":{"userId":"u-1"}}`, "Args", "differs from args only in case"},
		{"argſ alone (long s)", `{"argſ":{"userId":"u-1"}}`, "argſ", "differs from args only in case"},
		{"Kelvin-sign key", `{"args":{"userId":"u-1"},"` + "\u212a" + `ey":"k-1"}`, "\u212aey", "differs from key only in case"},
		{"UserId alone in args", `{"args":{"UserId":"u-1"}}`, "args.UserId", "differs from userId only in case"},
		{"duplicate deep in a value", `{"args":{"userId":{"a":[{"b":1,"b":2}]}}}`, "args.userId.a[0].b", "appears twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeBodyAt(Welcome, []byte(c.body), time.Now())
			var ve *message.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("decoded %+v, %v; want a validation error", got, err)
			}
			for _, f := range ve.Fields {
				if f.Field == c.field && strings.Contains(f.Reason, c.reason) {
					return
				}
			}
			t.Fatalf("fields %+v; want %s: …%s…", ve.Fields, c.field, c.reason)
		})
	}
}

// CheckMembers names each member by its path, array elements by index,
// below the path it is given; a body with the same name in two objects
// says one thing.
func TestCheckMembersPaths(t *testing.T) {
	for _, c := range []struct {
		data, path string
		want       []string // fields
	}{
		{`{"jobs":[{"type":"a"},{"type":"a","type":"b"}]}`, "", []string{"jobs[1].type"}},
		{`{"jobs":[{"args":{"userId":"u"}},{"args":{"userId":"u","userId":"v"}}]}`, "", []string{"jobs[1].args.userId"}},
		{`{"jobs":[],"JOBS":[]}`, "", []string{"JOBS"}},
		{`{"userId":"u","userId":"v"}`, "args", []string{"args.userId"}},
		{`[[{"a":1}],[{"a":1,"A":2}]]`, "x", []string{"x[1][0].A"}},
		{`{"a":{"b":1},"c":{"b":1},"d":[{"b":1},{"b":1}]}`, "", nil},
		{`{"a":1e999,"a":2}`, "", []string{"a"}},
	} {
		err := CheckMembers([]byte(c.data), c.path)
		var got []string
		var ve *message.ValidationError
		if errors.As(err, &ve) {
			for _, f := range ve.Fields {
				got = append(got, f.Field)
			}
		} else if err != nil {
			t.Errorf("%s: %v", c.data, err)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s: fields %v; want %v", c.data, got, c.want)
		}
	}
}

// A body of thousands of repeated names gets a short answer.
func TestCheckMembersNamesAFew(t *testing.T) {
	body := `{"args":{"userId":"u-1"}` + strings.Repeat(`,"key":"k"`, 1000) + `}`
	_, err := DecodeBodyAt(Welcome, []byte(body), time.Now())
	var ve *message.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != maxMemberErrors {
		t.Fatalf("%v; want %d fields", err, maxMemberErrors)
	}
}

// An outbox item's attribute whose name differs from one of the item's
// only in case is refused with a reason that names it, never read as the
// attribute nor dropped: the relay records the reason as the item's dead
// letter.
func TestOutboxAttributeInAnotherCaseIsRefused(t *testing.T) {
	str := func(s string) OutboxValue { return OutboxValue{S: &s} }
	good := func() map[string]OutboxValue {
		return map[string]OutboxValue{
			OutboxAttrPK: str("signup#k-1"), OutboxAttrProducer: str("signup"), OutboxAttrIdempotencyKey: str("k-1"),
			OutboxAttrType: str(Welcome.Name), OutboxAttrArgs: {M: map[string]OutboxValue{"userId": str("u-1")}},
		}
	}
	if _, err := DecodeOutboxItem(good()); err != nil {
		t.Fatalf("good item: %v", err)
	}
	for _, c := range []struct {
		name   string
		change func(map[string]OutboxValue)
		want   []string
	}{
		{"Args for args", func(av map[string]OutboxValue) { av["Args"] = av[OutboxAttrArgs]; delete(av, OutboxAttrArgs) },
			[]string{"attribute Args differs from args only in case"}},
		{"TYPE beside type", func(av map[string]OutboxValue) { av["TYPE"] = str("email.other.v1") },
			[]string{"attribute TYPE differs from type only in case"}},
		{"Key and an unknown one", func(av map[string]OutboxValue) { av["Key"] = str("k"); av["priority"] = str("high") },
			[]string{"attribute Key differs from key only in case", "unknown attributes priority"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			av := good()
			c.change(av)
			it, err := DecodeOutboxItem(av)
			if !errors.Is(err, ErrInvalidOutboxItem) {
				t.Fatalf("decoded %+v, %v; want ErrInvalidOutboxItem", it, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("reason %q; want it to say %q", err, w)
				}
			}
		})
	}
}
