package message

import (
	"fmt"
	"strings"
	"time"
)

// Fixture job types for the contract's own tests, shaped like the shipped
// e-mail types (internal/contract declares those and tests them).
const (
	typeVerify  = "test.verify.v1"
	typeReset   = "test.reset.v1"
	typeWelcome = "test.welcome.v1"
	typeDigest  = "test.digest.v1"
)

func testTypes() []JobType {
	userID := ArgSpec{Name: "userId", Format: FormatID, Required: true}
	country := ArgSpec{Name: "countryCode", Format: testFormatCountry, Required: true}
	return []JobType{
		{Name: typeVerify, Args: []ArgSpec{userID, {Name: "roleCode", Format: FormatID, Required: true, MaxLen: 32}, country},
			Queue: "critical", EnabledByDefault: true, Lease: true, KeyPrefix: "verify", KeyArgs: []string{"userId"}},
		{Name: typeReset, Args: []ArgSpec{userID, country},
			Queue: "critical", EnabledByDefault: true, Lease: true, KeyPrefix: "reset", KeyArgs: []string{"userId"}},
		{Name: typeWelcome, Args: []ArgSpec{userID},
			Queue: "default", EnabledByDefault: true, Lease: true, KeyPrefix: "welcome", KeyArgs: []string{"userId"}},
		{Name: typeDigest, Args: []ArgSpec{userID, {Name: "digestId", Format: testFormatWeek, Required: true, MaxLen: 8}},
			Queue: "bulk", KeyPrefix: "digest", KeyArgs: []string{"userId", "digestId"}},
	}
}

func testRegistry() *Registry {
	r, err := NewRegistry(testTypes()...)
	if err != nil {
		panic(err)
	}
	return r
}

// The formats the tests declare beyond FormatID, as an application does
// with NewFormat.
var (
	testFormatCountry = NewFormat("country code", "BD", func(s string) bool {
		return len(s) == 2 && isUpper(s[0]) && isUpper(s[1])
	})
	testFormatWeek = NewFormat("ISO week", "2026-W48", func(s string) bool {
		return len(s) == 8 && s[4:6] == "-W" && strings.Trim(s[:4]+s[6:], "0123456789") == "" && s[6:] >= "01" && s[6:] <= "53"
	})
)

// testISOWeek is t's ISO week, as a weekly tick type labels its job.
func testISOWeek(t time.Time) string {
	y, w := t.UTC().ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}
