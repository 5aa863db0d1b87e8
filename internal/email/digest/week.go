package digest

import (
	"fmt"
	"time"
	_ "time/tzdata" // time zones on a machine without a zoneinfo database (the Lambda runtime)
)

// TimezoneEnv names the e-mail function's variable that carries the weekly
// schedule's time zone (template.yaml: PartnerDigestTimezone).
const TimezoneEnv = "PARTNER_DIGEST_TIMEZONE"

// Timezone loads the IANA time zone name ("" is UTC) of the weekly
// schedule, as EventBridge Scheduler reads its ScheduleExpressionTimezone.
func Timezone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("digest: %s %q is not an IANA time zone: %w", TimezoneEnv, name, err)
	}
	return loc, nil
}

// WeekOf is the digestId of a tick scheduled at at: the ISO 8601 week
// ("2026-W50") of at in the schedule's time zone loc (UTC when nil).
// Monday 09:00 in Sydney is Sunday 22:00 in UTC: in UTC it would be the
// week before.
func WeekOf(at time.Time, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	y, w := at.In(loc).ISOWeek()
	return fmt.Sprintf("%04d-W%02d", y, w)
}
