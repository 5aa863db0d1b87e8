package contract

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestISOWeek(t *testing.T) {
	for at, want := range map[time.Time]string{
		time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC):  "2026-W50",
		time.Date(2026, 12, 28, 9, 0, 0, 0, time.UTC): "2026-W53",
		time.Date(2027, 1, 4, 9, 0, 0, 0, time.UTC):   "2027-W01",
		time.Date(2021, 1, 3, 9, 0, 0, 0, time.UTC):   "2020-W53",
	} {
		if got := ISOWeek(at); got != want {
			t.Errorf("ISOWeek(%s) = %s, want %s", at, got, want)
		}
	}
}

// The bundle's formats accept exactly what their regular expressions match.
func TestFormatsMatchTheirPatterns(t *testing.T) {
	samples := []string{"", "B", "BD", "bd", "BDX", "B1", "2026-W48", "2026-W00", "2026-W01", "2026-W53", "2026-W54",
		"2026-w48", "202-W48", "2026-W4x", "20x6-W48", "2026W48", "2026-W480"}
	for _, f := range []struct {
		name    string
		valid   func(string) bool
		pattern *regexp.Regexp
	}{
		{"FormatCountry", FormatCountry.Valid, regexp.MustCompile(`^[A-Z]{2}$`)},
		{"FormatISOWeek", FormatISOWeek.Valid, regexp.MustCompile(`^[0-9]{4}-W(0[1-9]|[1-4][0-9]|5[0-3])$`)},
	} {
		for _, s := range samples {
			if got, want := f.valid(s), f.pattern.MatchString(s); got != want {
				t.Errorf("%s.Valid(%q) = %v; its pattern %s says %v", f.name, s, got, f.pattern, want)
			}
		}
	}
}

// A body that is not JSON is refused with where it breaks, as the
// worker's reason says where an envelope breaks.
func TestBodyNotJSONSaysWhere(t *testing.T) {
	for body, want := range map[string]string{
		`{"args":{"userId":"u-1"},}`: "at byte 26",
		`  {"args": nope}`:           "at byte 13",
		`{"args":{"userId":"u-1"}`:   "ends early, at byte 24",
	} {
		_, err := DecodeBodyAt(Welcome, []byte(body), time.Now())
		if err == nil || !strings.Contains(err.Error(), "is not valid JSON") || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want not valid JSON %s", body, err, want)
		}
	}
}
