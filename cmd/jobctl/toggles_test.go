package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/switchview"
)

// toggles list's table: one word for a column with nothing set ("-", never
// SSM's "N/A" beside it), and runstwice's own types after the user's,
// marked as runstwice's.
func TestTogglesTable(t *testing.T) {
	until := time.Date(2026, 12, 1, 0, 18, 27, 0, time.UTC)
	a := &app{}
	rows := []toggleRow{
		a.toggleRow(switchEntry("runstwice.batch-finish.v1", "", ""), until),
		a.toggleRow(switchEntry("email.partner-digest.v1", `{"enabled":true}`, noUser), until),
		a.toggleRow(switchEntry("email.welcome.v1", "", ""), until),
		a.toggleRow(switchEntry("email.password-reset.v1", "off", "arn:aws:iam::123456789012:user/alice"), until),
	}
	var out bytes.Buffer
	if err := writeToggles(&out, rows); err != nil {
		t.Fatal(err)
	}
	var types, who []string
	for i, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		f := strings.Fields(l)
		if i == 0 {
			continue
		}
		types = append(types, strings.Join(f[:len(f)-6], " "))
		who = append(who, f[len(f)-1])
	}
	if want := []string{"email.partner-digest.v1", "email.password-reset.v1", "email.welcome.v1", "runstwice.batch-finish.v1 (internal)"}; strings.Join(types, ",") != strings.Join(want, ",") {
		t.Errorf("TYPE column %q; want %q:\n%s", types, want, out.String())
	}
	if want := []string{"-", "arn:aws:iam::123456789012:user/alice", "-", "-"}; strings.Join(who, ",") != strings.Join(want, ",") {
		t.Errorf("WHO column %q; want %q:\n%s", who, want, out.String())
	}
	if strings.Contains(out.String(), noUser) {
		t.Errorf("the table says %s:\n%s", noUser, out.String())
	}
	if !rows[0].Internal || rows[1].Internal {
		t.Errorf("--json's internal: %v for %s, %v for %s", rows[0].Internal, rows[0].Type, rows[1].Internal, rows[1].Type)
	}
}

// switchEntry is a switch as switchview reads it: stored ("" for no
// parameter), its last modifier as SSM records it.
func switchEntry(name, stored, who string) switchview.Entry {
	return switchview.Entry{Type: name, Stored: stored, HasStored: stored != "", Readable: true, Default: true, Effective: true, LastModifiedUser: who}
}
