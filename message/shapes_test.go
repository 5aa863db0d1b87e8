package message

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// The regular expressions the shapes are spelled from: each shape must
// accept exactly what its expression matches.
var shapePatterns = []struct {
	name    string
	shape   func(string) bool
	pattern *regexp.Regexp
	maxLen  int // 0: no limit beyond the pattern
}{
	{"CanonicalUUID", CanonicalUUID, regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`), 0},
	{"ValidKey", ValidKey, regexp.MustCompile(`^[\x21-\x3f\x41-\x7e]{1,255}$`), 0},
	{"ValidCorrelationID", ValidCorrelationID, regexp.MustCompile(`^[A-Za-z0-9._:-]{1,128}$`), 0},
	{"ValidTypeName", ValidTypeName, regexp.MustCompile(`^[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)*\.v[1-9][0-9]*$`), 128},
	{"FormatID", validID, regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`), 0},
}

// shapeSamples are the edges of every shape, each tried against all of them.
var shapeSamples = []string{
	"", "a", "A", "0", "-", ".", "@", " ", "é", "\x00", "\x7f",
	"email.welcome.v1", "email.partner-digest-fanout.v1", "a.v1", "a.b.v10", "v1", ".v1", "a..v1", "a.v0", "a.v01",
	"a.v1.", "A.v1", "a-.v1", "1a.v1", "a.v", "a.vv1", "a.b1.v2", "a.v1x", "a.v1.v2",
	"u-123", "city-partner", "u.1_2-3", "-u", "_u", "u@x", "u x", "a/b",
	"BD", "bd", "B", "BDX", "2026-W48", "2026-W00", "2026-W53", "2026-W54", "2026-w48", "202-W48", "2026-W4x",
	"6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33", "6F0C1C8E-3A4B-5D2E-9F10-2B7A1E5C4D33", "6f0c1c8e3a4b5d2e9f102b7a1e5c4d33",
	"{6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d33}", "6f0c1c8e-3a4b-5d2e-9f10-2b7a1e5c4d3g", "6f0c1c8e_3a4b-5d2e-9f10-2b7a1e5c4d33",
	"corr:1.2_3-4", "corr/1", strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat("c", 128), strings.Repeat("c", 129),
	strings.Repeat("a", 125) + ".v1", strings.Repeat("a", 126) + ".v1",
}

func checkShape(t *testing.T, name string, shape func(string) bool, pattern *regexp.Regexp, maxLen int, s string) {
	t.Helper()
	want := pattern.MatchString(s) && (maxLen == 0 || len(s) <= maxLen)
	if got := shape(s); got != want {
		t.Errorf("%s(%q) = %v; its pattern %s says %v", name, s, got, pattern, want)
	}
}

func TestShapesMatchTheirPatterns(t *testing.T) {
	for _, p := range shapePatterns {
		for _, s := range shapeSamples {
			checkShape(t, p.name, p.shape, p.pattern, p.maxLen, s)
		}
	}
	for range 200 {
		u := uuid.NewString()
		checkShape(t, "CanonicalUUID", CanonicalUUID, shapePatterns[0].pattern, 0, u)
		checkShape(t, "CanonicalUUID", CanonicalUUID, shapePatterns[0].pattern, 0, strings.ToUpper(u))
	}
}

func FuzzShapesMatchTheirPatterns(f *testing.F) {
	for _, s := range shapeSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range shapePatterns {
			checkShape(t, p.name, p.shape, p.pattern, p.maxLen, s)
		}
	})
}
