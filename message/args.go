package message

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Format is the shape an argument value must have. The engine knows one,
// FormatID; an application declares its own with NewFormat (a country code,
// a week, an order number), so the set is open. The zero Format is FormatID.
type Format struct{ def *formatDef }

// formatDef is a format's name, example and check.
type formatDef struct {
	name, example string
	valid         func(string) bool
}

// NewFormat declares an argument format: name says what it is in error
// messages ("ISO 3166-1 alpha-2 country code"), example is a value of it
// ("BD"), and valid reports whether a value has its shape. The general
// rules of every argument (no e-mail address, URL, whitespace or empty
// value, and the size limit) are checked before valid is called. The
// registry refuses a format whose valid is nil or refuses its own example.
func NewFormat(name, example string, valid func(string) bool) Format {
	return Format{&formatDef{name: name, example: example, valid: valid}}
}

// FormatID is an opaque identifier such as "u-123" or "city-partner":
// letters, digits, '.', '_' and '-', starting with a letter or digit.
var FormatID = NewFormat("id", "u-123", validID)

// get is f's definition; the zero Format is FormatID.
func (f Format) get() *formatDef {
	if f.def == nil {
		return FormatID.def
	}
	return f.def
}

// String names the format, as error messages do.
func (f Format) String() string { return f.get().name }

// Example returns a value of the format, for error messages and docs.
func (f Format) Example() string { return f.get().example }

// Valid reports whether v has the format's shape (only the format's own
// check: ValidateArgs applies the general rules too).
func (f Format) Valid(v string) bool { return f.get().valid != nil && f.get().valid(v) }

// check explains why f cannot be declared, or returns "".
func (f Format) check() string {
	d := f.get()
	switch {
	case d.name == "":
		return "has a format with no name"
	case d.valid == nil:
		return "has a format with no check"
	case !d.valid(d.example):
		return fmt.Sprintf("has a format %q that refuses its own example %q", d.name, d.example)
	}
	return ""
}

// DefaultMaxLen is the size limit of an argument that declares none.
const DefaultMaxLen = 64

// ArgSpec declares one argument of a job type.
type ArgSpec struct {
	Name     string
	Format   Format
	Required bool
	// MaxLen is the largest accepted length in bytes; zero means DefaultMaxLen.
	MaxLen int
}

func (a ArgSpec) maxLen() int {
	if a.MaxLen > 0 {
		return a.MaxLen
	}
	return DefaultMaxLen
}

// checkValue explains why v is not an acceptable value for a, or returns "".
// The explanations name the rule a caller broke (no e-mail addresses, no URLs,
// no free text), not just the pattern.
func (a ArgSpec) checkValue(v string) string {
	switch {
	case v == "":
		return "must not be empty"
	case len(v) > a.maxLen():
		return fmt.Sprintf("longer than %d bytes", a.maxLen())
	case strings.Contains(v, "@"):
		return "looks like an e-mail address; args carry IDs only, never personal data"
	case strings.Contains(v, "://") || strings.Contains(v, "/"):
		return "looks like a URL or path; args carry IDs only"
	case strings.IndexFunc(v, unicode.IsSpace) >= 0:
		return "contains whitespace; args carry IDs only, never free text"
	case !a.Format.Valid(v):
		return "is not a valid " + a.Format.String() + " (e.g. " + a.Format.Example() + ")"
	}
	return ""
}

// ValidateArgs checks args against the declared specs: every required arg
// present, no unknown arg, every value of the declared format and size. It
// returns a *ValidationError listing every problem, with fields named
// "args.<name>".
func ValidateArgs(specs []ArgSpec, args map[string]string) error {
	var verr ValidationError
	for _, s := range specs {
		v, ok := args[s.Name]
		if !ok {
			if s.Required {
				verr.add("args."+s.Name, "is required")
			}
			continue
		}
		if reason := s.checkValue(v); reason != "" {
			verr.add("args."+s.Name, "%s", reason)
		}
	}
	var unknown []string
	for name := range args {
		if !slices.ContainsFunc(specs, func(s ArgSpec) bool { return s.Name == name }) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	if len(unknown) > 0 {
		names := make([]string, len(specs))
		for i, s := range specs {
			names[i] = s.Name
		}
		for _, name := range unknown {
			verr.add("args."+safeName(name), "is not an argument of this job type; its args are %s", strings.Join(names, ", "))
		}
	}
	return verr.orNil()
}

// safeName keeps an attacker-chosen field name printable and short in errors.
func safeName(s string) string {
	const limit = 40
	b := make([]rune, 0, len(s))
	for _, r := range s {
		if len(b) == limit {
			b = append(b, '…')
			break
		}
		if r < 0x20 || r == 0x7f || !unicode.IsPrint(r) {
			r = '?'
		}
		b = append(b, r)
	}
	return string(b)
}
