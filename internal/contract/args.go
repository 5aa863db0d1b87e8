package contract

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Format is the shape an argument value must have.
type Format int

const (
	// FormatID is an opaque identifier such as "u-123" or "city-partner":
	// letters, digits, '.', '_' and '-', starting with a letter or digit.
	FormatID Format = iota
	// FormatCountry is an ISO 3166-1 alpha-2 code such as "BD".
	FormatCountry
	// FormatISOWeek is an ISO 8601 week such as "2026-W48".
	FormatISOWeek
)

func (f Format) String() string {
	switch f {
	case FormatID:
		return "id"
	case FormatCountry:
		return "ISO 3166-1 alpha-2 country code"
	case FormatISOWeek:
		return "ISO week (YYYY-Www)"
	}
	return "unknown"
}

// Example returns a value of the format, for error messages and docs.
func (f Format) Example() string {
	switch f {
	case FormatCountry:
		return "BD"
	case FormatISOWeek:
		return "2026-W48"
	}
	return "u-123"
}

// formatShapes checks a value's shape per format (shapes.go).
var formatShapes = map[Format]func(string) bool{
	FormatID:      validID,
	FormatCountry: validCountry,
	FormatISOWeek: validISOWeek,
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
	case !formatShapes[a.Format](v):
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
