// Package schedule evaluates EventBridge Scheduler schedule expressions —
// cron(...), rate(...) and at(...) — in a time zone, as the service does:
// when a schedule fires next. The local stack's scheduler emulator fires on
// it and `jobctl schedules list` shows it.
//
// cron takes EventBridge's six fields, minutes hours day-of-month month
// day-of-week year, with *, ?, ranges (a-b), lists (a,b), increments (a/n,
// */n, a-b/n), month names (JAN-DEC), day names (SUN-SAT, 1 = SUN), and in
// the day fields L (last day of the month; in day-of-week nL, the last
// weekday n of the month), W (nW, the weekday nearest day n; LW, the last
// weekday of the month) and # (n#k, the k-th weekday n of the month). One of
// the day fields must be ?. Daylight saving time is the service's: a time
// that does not exist in the zone (spring forward) is skipped, a time that
// exists twice (fall back) fires once, at the first.
//
// No maintained Go library for the EventBridge dialect (year field, 1 = SUN,
// L W #) is served by the Go module proxy, so this is one, kept to the
// service's documented syntax.
package schedule

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // time zones on a machine without a zoneinfo database
)

// Kind is a schedule expression's kind.
type Kind string

// The kinds of schedule expression.
const (
	KindCron Kind = "cron"
	KindRate Kind = "rate"
	KindAt   Kind = "at"
)

// Expr is a parsed schedule expression in its time zone.
type Expr struct {
	Kind Kind
	// Text is the expression as given, e.g. "cron(0 9 ? * MON *)".
	Text string
	loc  *time.Location
	cron *cron
	rate time.Duration
	at   time.Time
}

// ErrSyntax is matched (errors.Is) by every parse error.
var ErrSyntax = errors.New("schedule: invalid expression")

func syntaxf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, args...))
}

// Parse parses expression in the IANA time zone tz ("" is UTC).
func Parse(expression, tz string) (*Expr, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("%w: time zone %q: %w", ErrSyntax, tz, err)
	}
	e := &Expr{Text: expression, loc: loc}
	kind, body, ok := strings.Cut(strings.TrimSpace(expression), "(")
	if !ok || !strings.HasSuffix(body, ")") {
		return nil, syntaxf("%q is not cron(...), rate(...) or at(...)", expression)
	}
	body = strings.TrimSuffix(body, ")")
	switch e.Kind = Kind(kind); e.Kind {
	case KindCron:
		e.cron, err = parseCron(body)
	case KindRate:
		e.rate, err = parseRate(body)
	case KindAt:
		e.at, err = time.ParseInLocation("2006-01-02T15:04:05", body, loc)
		if err != nil {
			err = syntaxf("at(%s): want at(yyyy-mm-ddThh:mm:ss)", body)
		}
	default:
		return nil, syntaxf("%q is not cron(...), rate(...) or at(...)", expression)
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

// Location is the expression's time zone.
func (e *Expr) Location() *time.Location { return e.loc }

// Next returns the first time the schedule fires strictly after after, and
// false when it never fires again. A rate counts from anchor (the
// schedule's start date, or when it was created); cron and at ignore it.
func (e *Expr) Next(after, anchor time.Time) (time.Time, bool) {
	switch e.Kind {
	case KindAt:
		return e.at, e.at.After(after)
	case KindRate:
		if after.Before(anchor) {
			return anchor, true
		}
		n := after.Sub(anchor)/e.rate + 1
		return anchor.Add(n * e.rate), true
	}
	return e.cron.next(after.In(e.loc))
}

func parseRate(body string) (time.Duration, error) {
	f := strings.Fields(body)
	if len(f) != 2 {
		return 0, syntaxf("rate(%s): want rate(value unit)", body)
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 1 {
		return 0, syntaxf("rate(%s): the value must be a positive whole number", body)
	}
	units := map[string]time.Duration{"minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour}
	unit, ok := units[strings.TrimSuffix(f[1], "s")]
	if !ok {
		return 0, syntaxf("rate(%s): the unit must be minutes, hours or days", body)
	}
	return time.Duration(n) * unit, nil
}

// cron is a parsed cron expression: a bit set of the plain values of each
// field, and the day fields' special forms.
type cron struct {
	minutes, hours, months uint64
	years                  []bool // index: year - minYear
	dom                    dayField
	dow                    dayField
}

const (
	minYear = 1970
	maxYear = 2199
)

// dayField is day-of-month or day-of-week.
type dayField struct {
	any    bool   // ?
	values uint64 // plain days (dom 1-31; dow 1-7, 1 = SUN)
	last   bool   // dom L
	lastW  bool   // dom LW
	nearW  []int  // dom nW
	lastOf []int  // dow nL
	nth    [][2]int
}

var (
	monthNames = []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	dayNames   = []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
)

func parseCron(body string) (*cron, error) {
	f := strings.Fields(body)
	if len(f) != 6 {
		return nil, syntaxf("cron(%s): want six fields: minutes hours day-of-month month day-of-week year", body)
	}
	c := &cron{}
	var err error
	if c.minutes, err = parseBits(f[0], 0, 59, nil); err != nil {
		return nil, fmt.Errorf("minutes: %w", err)
	}
	if c.hours, err = parseBits(f[1], 0, 23, nil); err != nil {
		return nil, fmt.Errorf("hours: %w", err)
	}
	if c.months, err = parseBits(f[3], 1, 12, monthNames); err != nil {
		return nil, fmt.Errorf("month: %w", err)
	}
	if c.years, err = parseYears(f[5]); err != nil {
		return nil, fmt.Errorf("year: %w", err)
	}
	if c.dom, err = parseDays(f[2], false); err != nil {
		return nil, fmt.Errorf("day-of-month: %w", err)
	}
	if c.dow, err = parseDays(f[4], true); err != nil {
		return nil, fmt.Errorf("day-of-week: %w", err)
	}
	if c.dom.any == c.dow.any {
		return nil, syntaxf("cron(%s): exactly one of day-of-month and day-of-week must be ?", body)
	}
	return c, nil
}

// parseBits parses a field of plain values lo..hi (names[i] is lo+i) into
// a bit set.
func parseBits(field string, lo, hi int, names []string) (uint64, error) {
	var set uint64
	err := eachValue(field, lo, hi, names, func(v int) { set |= 1 << v })
	return set, err
}

func parseYears(field string) ([]bool, error) {
	years := make([]bool, maxYear-minYear+1)
	err := eachValue(field, minYear, maxYear, nil, func(v int) { years[v-minYear] = true })
	return years, err
}

// eachValue calls add for every value a list of *, a, a-b, a/n, */n and
// a-b/n in lo..hi names.
func eachValue(field string, lo, hi int, names []string, add func(int)) error {
	for _, item := range strings.Split(field, ",") {
		rng, step := item, 1
		if r, s, ok := strings.Cut(item, "/"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				return syntaxf("%q: the increment must be a positive number", item)
			}
			rng, step = r, n
		}
		from, to := lo, hi
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if from, err = value(a, lo, hi, names); err != nil {
				return err
			}
			if to, err = value(b, lo, hi, names); err != nil {
				return err
			}
			if from > to {
				return syntaxf("%q: the range runs backwards", item)
			}
		default:
			v, err := value(rng, lo, hi, names)
			if err != nil {
				return err
			}
			from = v
			if step == 1 {
				to = v
			}
		}
		for v := from; v <= to; v += step {
			add(v)
		}
	}
	return nil
}

func value(s string, lo, hi int, names []string) (int, error) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return lo + i, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		return 0, syntaxf("%q is not a value from %d to %d", s, lo, hi)
	}
	return v, nil
}

func parseDays(field string, week bool) (dayField, error) {
	var d dayField
	if field == "?" {
		d.any = true
		return d, nil
	}
	lo, hi, names := 1, 31, []string(nil)
	if week {
		lo, hi, names = 1, 7, dayNames
	}
	var plain []string
	for _, item := range strings.Split(field, ",") {
		up := strings.ToUpper(item)
		switch {
		case !week && up == "L":
			d.last = true
		case !week && up == "LW":
			d.lastW = true
		case !week && strings.HasSuffix(up, "W"):
			n, err := value(strings.TrimSuffix(up, "W"), 1, 31, nil)
			if err != nil {
				return d, err
			}
			d.nearW = append(d.nearW, n)
		case week && up == "L":
			d.values |= 1 << 7 // the last day of the week: Saturday
		case week && strings.HasSuffix(up, "L"):
			n, err := value(strings.TrimSuffix(up, "L"), lo, hi, names)
			if err != nil {
				return d, err
			}
			d.lastOf = append(d.lastOf, n)
		case week && strings.Contains(up, "#"):
			a, b, _ := strings.Cut(up, "#")
			n, err := value(a, lo, hi, names)
			if err != nil {
				return d, err
			}
			k, err := value(b, 1, 5, nil)
			if err != nil {
				return d, err
			}
			d.nth = append(d.nth, [2]int{n, k})
		default:
			plain = append(plain, item)
		}
	}
	if len(plain) > 0 {
		err := eachValue(strings.Join(plain, ","), lo, hi, names, func(v int) { d.values |= 1 << v })
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

func daysIn(y int, m time.Month) int { return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day() }

func weekday(y int, m time.Month, d int) time.Weekday {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()
}

func isWeekday(w time.Weekday) bool { return w != time.Saturday && w != time.Sunday }

// nearestWeekday is the weekday nearest day n of the month, never crossing
// into another month.
func nearestWeekday(y int, m time.Month, n int) int {
	last := daysIn(y, m)
	n = min(n, last)
	switch weekday(y, m, n) {
	case time.Saturday:
		if n == 1 {
			return 3
		}
		return n - 1
	case time.Sunday:
		if n == last {
			return n - 2
		}
		return n + 1
	}
	return n
}

func (c *cron) matchDay(y int, m time.Month, d int) bool {
	last := daysIn(y, m)
	if !c.dom.any {
		f := c.dom
		if f.values&(1<<d) != 0 || (f.last && d == last) {
			return true
		}
		if f.lastW {
			lw := last
			for !isWeekday(weekday(y, m, lw)) {
				lw--
			}
			if d == lw {
				return true
			}
		}
		for _, n := range f.nearW {
			if nearestWeekday(y, m, n) == d {
				return true
			}
		}
		return false
	}
	f := c.dow
	dow := int(weekday(y, m, d)) + 1 // 1 = SUN
	if f.values&(1<<dow) != 0 {
		return true
	}
	for _, n := range f.lastOf {
		if n == dow && d+7 > last {
			return true
		}
	}
	for _, nk := range f.nth {
		if nk[0] == dow && (d-1)/7+1 == nk[1] {
			return true
		}
	}
	return false
}

// next returns the first firing strictly after after (in the schedule's
// zone): the first matching wall time that exists in the zone, at its
// first instant.
func (c *cron) next(after time.Time) (time.Time, bool) {
	loc := after.Location()
	startDay := time.Date(after.Year(), after.Month(), after.Day(), 0, 0, 0, 0, time.UTC)
	for y := max(after.Year(), minYear); y <= maxYear; y++ {
		if !c.years[y-minYear] {
			continue
		}
		for m := time.January; m <= time.December; m++ {
			if c.months&(1<<int(m)) == 0 || time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Before(startDay) {
				continue
			}
			for d := 1; d <= daysIn(y, m); d++ {
				if time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Before(startDay) || !c.matchDay(y, m, d) {
					continue
				}
				if t, ok := c.firstOnDay(y, m, d, after, loc); ok {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

func (c *cron) firstOnDay(y int, m time.Month, d int, after time.Time, loc *time.Location) (time.Time, bool) {
	for hs := c.hours; hs != 0; hs &= hs - 1 {
		h := bits.TrailingZeros64(hs)
		for ms := c.minutes; ms != 0; ms &= ms - 1 {
			mi := bits.TrailingZeros64(ms)
			t, ok := wallTime(y, m, d, h, mi, loc)
			if ok && t.After(after) {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// wallTime is the first instant the zone's clocks read y-m-d h:mi, and
// false when they never do (the hour daylight saving time skips).
func wallTime(y int, m time.Month, d, h, mi int, loc *time.Location) (time.Time, bool) {
	t := time.Date(y, m, d, h, mi, 0, 0, loc)
	same := func(u time.Time) bool {
		u = u.In(loc)
		return u.Year() == y && u.Month() == m && u.Day() == d && u.Hour() == h && u.Minute() == mi
	}
	if !same(t) {
		return time.Time{}, false
	}
	for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
		if earlier := t.Add(-back); same(earlier) {
			return earlier, true // the clocks went back: the first of the two
		}
	}
	return t, true
}
