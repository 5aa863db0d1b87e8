package stack

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/internal/schedule"
)

// checkScheduleRetries: every schedule of the template retries a delivery
// its queue refused exactly as every one-time job schedule does
// (schedule.RetryPolicy): for lifetime.SchedulerRetryWindow, the window
// every guard's lifetime counts with, and schedule.MaxRetryAttempts times.
// Without a RetryPolicy the service's defaults apply, which nothing keeps
// equal to the lifetimes.
func checkScheduleRetries(t *Template) []string {
	var f findings
	window := int(lifetime.SchedulerRetryWindow / time.Second)
	for _, id := range t.IDs(TypeSchedule) {
		rp := asMap(asMap(t.Resources[id].Properties["Target"])["RetryPolicy"])
		if len(rp) == 0 {
			f.add("%s: no Target.RetryPolicy; want MaximumEventAgeInSeconds %d (lifetime.SchedulerRetryWindow) and MaximumRetryAttempts %d", id, window, schedule.MaxRetryAttempts)
			continue
		}
		if got := num(rp["MaximumEventAgeInSeconds"]); got != window {
			f.add("%s: RetryPolicy.MaximumEventAgeInSeconds %d; want %d, lifetime.SchedulerRetryWindow", id, got, window)
		}
		if got := num(rp["MaximumRetryAttempts"]); got != schedule.MaxRetryAttempts {
			f.add("%s: RetryPolicy.MaximumRetryAttempts %d; want %d, schedule.MaxRetryAttempts", id, got, schedule.MaxRetryAttempts)
		}
	}
	return f.sorted()
}

// relayedEvents are the stream records the outbox relay acts on.
var relayedEvents = []string{"INSERT", "MODIFY"}

// checkOutboxFilter: the outbox relay's stream event source lets only
// INSERT and MODIFY records through (FilterCriteria), so the TTL's REMOVE
// records never invoke it.
func checkOutboxFilter(t *Template) []string {
	var f findings
	sources := eventsOfType(t, "OutboxFunction", "DynamoDB")
	if len(sources) == 0 {
		f.add("OutboxFunction: no DynamoDB event source")
	}
	for name, p := range sources {
		filters := list(asMap(p["FilterCriteria"])["Filters"])
		if len(filters) != 1 {
			f.add("OutboxFunction event %s: %d FilterCriteria filters; want one, eventName %v", name, len(filters), relayedEvents)
			continue
		}
		var pattern map[string][]string
		raw := str(asMap(filters[0])["Pattern"])
		if err := json.Unmarshal([]byte(raw), &pattern); err != nil {
			f.add("OutboxFunction event %s: filter pattern %q is not {\"eventName\":[...]}: %v", name, raw, err)
			continue
		}
		got := slices.Sorted(slices.Values(pattern["eventName"]))
		if len(pattern) != 1 || !slices.Equal(got, relayedEvents) {
			f.add("OutboxFunction event %s: filter pattern %s; want exactly eventName %v", name, raw, relayedEvents)
		}
	}
	return f.sorted()
}

func TestTemplateScheduleRetries(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	if len(tmpl.IDs(TypeSchedule)) == 0 {
		t.Fatal("no AWS::Scheduler::Schedule in the template")
	}
	report(t, checkScheduleRetries(tmpl))
}

func TestTemplateOutboxFilter(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkOutboxFilter(tmpl))
}

// Both checks fail on a template with the mistake they are there for.
func TestRetryAndFilterChecksCatchMistakes(t *testing.T) {
	retries := func(_ *testing.T, tm *Template) []string { return checkScheduleRetries(tm) }
	filter := func(_ *testing.T, tm *Template) []string { return checkOutboxFilter(tm) }
	target := func(tm *Template) map[string]any {
		return asMap(tm.Resources["PartnerDigestWeeklySchedule"].Properties["Target"])
	}
	outbox := func(tm *Template) map[string]any { return eventsOfType(tm, "OutboxFunction", "DynamoDB")["Outbox"] }
	catchesMistakes(t, []mutation{
		{"no retry policy", retries, func(tm *Template) { delete(target(tm), "RetryPolicy") }, "no Target.RetryPolicy"},
		{"a shorter window", retries, func(tm *Template) { asMap(target(tm)["RetryPolicy"])["MaximumEventAgeInSeconds"] = 3600 }, "MaximumEventAgeInSeconds 3600"},
		{"other attempts", retries, func(tm *Template) { asMap(target(tm)["RetryPolicy"])["MaximumRetryAttempts"] = 3 }, "MaximumRetryAttempts 3"},
		{"no filter", filter, func(tm *Template) { delete(outbox(tm), "FilterCriteria") }, "0 FilterCriteria filters"},
		{"REMOVE let through", filter, func(tm *Template) {
			asMap(list(asMap(outbox(tm)["FilterCriteria"])["Filters"])[0])["Pattern"] = `{"eventName":["INSERT","MODIFY","REMOVE"]}`
		}, "want exactly eventName"},
		{"a pattern that is not JSON", filter, func(tm *Template) {
			asMap(list(asMap(outbox(tm)["FilterCriteria"])["Filters"])[0])["Pattern"] = "eventName=INSERT"
		}, "is not"},
	})
}
