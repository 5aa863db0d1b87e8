package stack

import (
	"strings"
	"testing"
)

// checkDigestZone: the e-mail worker labels a weekly tick's week in the
// time zone the schedule fires in, so both read the one parameter:
// EmailFunction's PARTNER_DIGEST_TIMEZONE and the weekly schedule's
// ScheduleExpressionTimezone are !Ref PartnerDigestTimezone.
func checkDigestZone(t *Template) []string {
	var problems findings
	bad := problems.add
	const param = "PartnerDigestTimezone"
	if _, ok := t.Parameters[param]; !ok {
		bad("parameter %s is missing", param)
	}
	props, err := t.FunctionProperties("EmailFunction")
	if err != nil {
		return []string{err.Error()}
	}
	if r, _ := asMap(EnvironmentVariables(props)["PARTNER_DIGEST_TIMEZONE"])["Ref"].(string); r != param {
		bad("EmailFunction: PARTNER_DIGEST_TIMEZONE must be !Ref %s", param)
	}
	sched, ok := t.Resources["PartnerDigestWeeklySchedule"]
	if !ok {
		return append(problems.sorted(), "no PartnerDigestWeeklySchedule")
	}
	if r, _ := asMap(sched.Properties["ScheduleExpressionTimezone"])["Ref"].(string); r != param {
		bad("PartnerDigestWeeklySchedule: ScheduleExpressionTimezone must be !Ref %s", param)
	}
	return problems.sorted()
}

func TestTemplateDigestZone(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkDigestZone(tmpl))

	for _, tc := range []struct {
		name   string
		mutate func(*Template)
		want   string
	}{
		{"worker zone a literal", func(tm *Template) {
			EnvironmentVariables(tm.Resources["EmailFunction"].Properties)["PARTNER_DIGEST_TIMEZONE"] = "UTC"
		}, "PARTNER_DIGEST_TIMEZONE must be !Ref"},
		{"schedule zone a literal", func(tm *Template) {
			tm.Resources["PartnerDigestWeeklySchedule"].Properties["ScheduleExpressionTimezone"] = "Australia/Sydney"
		}, "ScheduleExpressionTimezone must be !Ref"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tm, _ := loadTemplate(t)
			tc.mutate(tm)
			got := strings.Join(checkDigestZone(tm), "\n")
			if !strings.Contains(got, tc.want) {
				t.Fatalf("problems %q; want one containing %q", got, tc.want)
			}
		})
	}
}
