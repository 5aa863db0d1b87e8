package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/runstwice/runstwice/message"
)

// maxMemberErrors caps how many members CheckMembers names: a body of
// thousands of repeated names gets a short answer, not a long one.
const maxMemberErrors = 10

// CheckMembers refuses JSON that says two things: an object that has a
// member name twice, or two member names that differ only in case, at any
// depth of data. encoding/json keeps the last of a repeated name and
// matches a struct's fields whatever their case, so a reader that keeps
// the first (a firewall, an audit log, the caller's own check) would see
// another request than the one that runs. Each member is named by its path
// from path (the name of data itself: "" for a request body), as the
// body's field errors are ("args.userId", "jobs[1].type"). data must be
// valid JSON (checked before); an error is a *message.ValidationError.
func CheckMembers(data []byte, path string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number too large for a float64 is not an error here
	verr := &message.ValidationError{}
	// stack holds one level per open object or array: its members' folded
	// names, or its next element's index.
	var stack []*level
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return invalid(orBody(path), "is not valid JSON")
		}
		top := (*level)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.seen != nil && top.wantName {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				valueDone(stack)
				continue
			}
			name, _ := tok.(string) // a name is always a string token
			if reason := top.add(name); reason != "" && len(verr.Fields) < maxMemberErrors {
				verr.Fields = append(verr.Fields, message.FieldError{Field: memberPath(path, stack, name), Reason: reason})
			}
			top.name, top.wantName = name, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &level{seen: map[string]string{}, wantName: true})
		case json.Delim('['):
			stack = append(stack, &level{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone(stack)
		default:
			valueDone(stack)
		}
	}
	if len(verr.Fields) > 0 {
		return verr
	}
	return nil
}

// level is an open object (seen is not nil) or array of CheckMembers.
type level struct {
	// seen maps each member's folded name to the name as written.
	seen     map[string]string
	wantName bool
	name     string // the member whose value is being read
	index    int    // the array element being read
}

// add records name as a member of the object and says why it is refused,
// or "".
func (l *level) add(name string) string {
	folded := foldName(name)
	prev, ok := l.seen[folded]
	switch {
	case !ok:
		l.seen[folded] = name
		return ""
	case prev == name:
		return "appears twice in one object; each member may appear once"
	default:
		return fmt.Sprintf("differs from %s only in case, in one object; names are case-sensitive and each member may appear once", Printable(prev))
	}
}

// valueDone moves past the value just read: an object now wants its next
// name, an array its next element.
func valueDone(stack []*level) {
	if len(stack) == 0 {
		return
	}
	top := stack[len(stack)-1]
	if top.seen != nil {
		top.wantName = true
	} else {
		top.index++
	}
}

// memberPath is the path of member name of the innermost object of stack,
// below path.
func memberPath(path string, stack []*level, name string) string {
	var b strings.Builder
	b.WriteString(path)
	for _, l := range stack[:len(stack)-1] {
		if l.seen == nil {
			fmt.Fprintf(&b, "[%d]", l.index)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(Printable(l.name))
	}
	if b.Len() > 0 {
		b.WriteByte('.')
	}
	b.WriteString(Printable(name))
	return b.String()
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

// foldName is name with each rune replaced by the least rune it equals
// without case (its unicode.SimpleFold orbit's): two names fold alike
// exactly when strings.EqualFold says they are equal, which is how
// encoding/json matches a name to a struct's field (so the long s, U+017F,
// folds as "S", and the Kelvin sign, U+212A, as "K").
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// CaseVariant reports the name of known that name differs from only in
// case ("Args" for args), if any: such a name is refused with
// CaseReason, never read as the known one nor as an unknown one.
func CaseVariant(name string, known []string) (string, bool) {
	for _, k := range known {
		if k != name && strings.EqualFold(k, name) {
			return k, true
		}
	}
	return "", false
}

// CaseReason is the reason a name that differs from known only in case is
// refused.
func CaseReason(known string) string {
	return "differs from " + known + " only in case; names are case-sensitive: write " + known
}
