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
