package stack

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// metricStats returns an alarm's metric-math queries that read a metric:
// by query id, the namespace, metric name and the dimensions (name → the
// value, unresolved).
func metricStats(p map[string]any) map[string]struct {
	ns, name string
	dims     map[string]any
	period   int
} {
	out := map[string]struct {
		ns, name string
		dims     map[string]any
		period   int
	}{}
	for _, m := range list(p["Metrics"]) {
		mm := asMap(m)
		stat := asMap(mm["MetricStat"])
		metric := asMap(stat["Metric"])
		if metric == nil {
			continue
		}
		dims := map[string]any{}
		for _, d := range list(metric["Dimensions"]) {
			dims[str(asMap(d)["Name"])] = asMap(d)["Value"]
		}
		out[str(mm["Id"])] = struct {
			ns, name string
			dims     map[string]any
			period   int
		}{str(metric["Namespace"]), str(metric["MetricName"]), dims, num(stat["Period"])}
	}
	return out
}

// returned is the expression an alarm's metric math returns.
func returned(p map[string]any) string {
	for _, m := range list(p["Metrics"]) {
		if mm := asMap(m); truthy(mm["ReturnData"]) {
			return strings.Join(strings.Fields(str(mm["Expression"])), " ")
		}
	}
	return ""
}

// schedulerMetrics are the AWS/Scheduler counters of a schedule group that
// mean a job or tick did not reach its queue: the target refused it, the
// scheduler gave up (it then goes to the DLQ), or it could not reach the
// DLQ either (it is lost).
var schedulerMetrics = []string{"TargetErrorCount", "InvocationDroppedCount", "InvocationsFailedToBeSentToDeadLetterCount"}

// checkSchedulerAlarm: one alarm sums, for every schedule group of the
// template, each of schedulerMetrics, and fires on any: a job the
// scheduler could neither deliver nor dead-letter is seen, never lost
// silently.
func checkSchedulerAlarm(t *Template) []string {
	groups := t.IDs(TypeScheduleGroup)
	for _, id := range t.IDs(typeAlarm) {
		p := t.Resources[id].Properties
		stats := metricStats(p)
		var want, missing []string
		for _, g := range groups {
			for _, metric := range schedulerMetrics {
				found := ""
				for qid, s := range stats {
					if ref, _ := asMap(s.dims["ScheduleGroup"])["Ref"].(string); s.ns == "AWS/Scheduler" && s.name == metric && ref == g {
						found = qid
					}
				}
				if found == "" {
					missing = append(missing, metric+" of "+g)
					continue
				}
				want = append(want, "FILL("+found+", 0)")
			}
		}
		if len(want) == 0 {
			continue // not the scheduler's alarm
		}
		terms := strings.Split(strings.ReplaceAll(returned(p), " ", ""), "+")
		slices.Sort(terms)
		for i := range want {
			want[i] = strings.ReplaceAll(want[i], " ", "")
		}
		slices.Sort(want)
		var problems findings
		if len(missing) > 0 {
			problems.add("%s: reads no %s", id, strings.Join(missing, ", "))
		}
		if !slices.Equal(terms, want) {
			problems.add("%s: returns %q; want the sum of %v", id, returned(p), want)
		}
		if !isAlarmOnZero(p) || str(p["TreatMissingData"]) != "notBreaching" {
			problems.add("%s: must fire on any failed invocation (above 0, missing data OK)", id)
		}
		return problems.sorted()
	}
	return []string{"no alarm reads AWS/Scheduler's failures of the schedule groups"}
}

// unrelayed is the expression that sees a relay that is handed nothing:
// the stream's table was written and the function was not invoked.
var unrelayed = regexp.MustCompile(`^IF\(FILL\((\w+), ?0\) > 0 AND FILL\((\w+), ?0\) == 0, 1, 0\)$`)

// checkRelayAlarms: a stream relay that is disabled (or throttled
// throughout) is handed no batch and reports no IteratorAge, which its
// iterator-age alarm reads as OK; so each function with a stream event
// source has an alarm that fires when the stream's table was written in a
// quarter of an hour (ConsumedWriteCapacityUnits) and the function was not
// invoked (Invocations), and its iterator-age alarm does not claim to see a
// disabled relay.
func checkRelayAlarms(t *Template) []string {
	var problems findings
	bad := problems.add
	for _, fn := range t.IDs(TypeFunction) {
		props, _ := t.FunctionProperties(fn)
		_, streams, _ := eventSources(props)
		for table := range streams {
			seen := false
			for _, id := range t.IDs(typeAlarm) {
				p := t.Resources[id].Properties
				m := unrelayed.FindStringSubmatch(returned(p))
				if m == nil {
					continue
				}
				stats := metricStats(p)
				w, i := stats[m[1]], stats[m[2]]
				wt, _ := asMap(w.dims["TableName"])["Ref"].(string)
				ifn, _ := asMap(i.dims["FunctionName"])["Ref"].(string)
				if w.ns != "AWS/DynamoDB" || w.name != "ConsumedWriteCapacityUnits" || wt != table ||
					i.ns != "AWS/Lambda" || i.name != "Invocations" || ifn != fn {
					continue
				}
				seen = true
				if w.period != i.period || w.period > 900 || num(p["EvaluationPeriods"]) != 1 || !isAlarmOnZero(p) || str(p["TreatMissingData"]) != "notBreaching" {
					bad("%s: must fire on one period of at most 900 s with writes and no invocation (missing data OK)", id)
				}
			}
			if !seen {
				bad("%s: no alarm sees it not invoked while %s is written (ConsumedWriteCapacityUnits > 0 and Invocations == 0)", fn, table)
			}
		}
		for _, id := range t.IDs(typeAlarm) {
			p := t.Resources[id].Properties
			ref := ""
			for _, d := range list(p["Dimensions"]) {
				if str(asMap(d)["Name"]) == "FunctionName" {
					ref, _ = asMap(asMap(d)["Value"])["Ref"].(string)
				}
			}
			if str(p["MetricName"]) == "IteratorAge" && ref == fn && !strings.Contains(subString(p["AlarmDescription"]), "cannot see a disabled relay") {
				bad("%s: its description must say it cannot see a disabled relay (a disabled one reports no IteratorAge)", id)
			}
		}
	}
	return problems.sorted()
}

func TestTemplateAlarmsSeeWhatTheyName(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	t.Run("SchedulerAlarmSeesJobsItCouldNotDeadLetter", func(t *testing.T) { report(t, checkSchedulerAlarm(tmpl)) })
	t.Run("RelayAlarmsSeeADisabledRelay", func(t *testing.T) { report(t, checkRelayAlarms(tmpl)) })
}

// The alarm checks catch each mistake they are there for, the template as
// it was before among them.
func TestAlarmChecksCatchMistakes(t *testing.T) {
	on := func(check func(*Template) []string) func(*testing.T, *Template) []string {
		return func(_ *testing.T, tm *Template) []string { return check(tm) }
	}
	props := func(tm *Template, id string) map[string]any { return tm.Resources[id].Properties }
	dropQuery := func(alarm, qid string) func(*Template) {
		return func(tm *Template) {
			p := props(tm, alarm)
			p["Metrics"] = slices.DeleteFunc(list(p["Metrics"]), func(m any) bool { return str(asMap(m)["Id"]) == qid })
		}
	}
	catchesMistakes(t, []mutation{
		{"scheduler alarm without the failures to reach the DLQ (as before)", on(checkSchedulerAlarm), func(tm *Template) {
			dropQuery("SchedulerFailedInvocationsAlarm", "recurringLost")(tm)
			dropQuery("SchedulerFailedInvocationsAlarm", "jobsLost")(tm)
			for _, m := range list(props(tm, "SchedulerFailedInvocationsAlarm")["Metrics"]) {
				if str(asMap(m)["Id"]) == "failed" {
					asMap(m)["Expression"] = "FILL(recurringTargetErrors, 0) + FILL(recurringDropped, 0) + FILL(jobsTargetErrors, 0) + FILL(jobsDropped, 0)"
				}
			}
		}, "reads no InvocationsFailedToBeSentToDeadLetterCount of JobsScheduleGroup"},
		{"a query read but not summed", on(checkSchedulerAlarm), func(tm *Template) {
			for _, m := range list(props(tm, "SchedulerFailedInvocationsAlarm")["Metrics"]) {
				if str(asMap(m)["Id"]) == "failed" {
					asMap(m)["Expression"] = "FILL(recurringTargetErrors, 0) + FILL(recurringDropped, 0) + FILL(jobsTargetErrors, 0) + FILL(jobsDropped, 0) + FILL(jobsLost, 0)"
				}
			}
		}, "want the sum of"},
		{"no alarm on a relay handed nothing (as before)", on(checkRelayAlarms), func(tm *Template) { delete(tm.Resources, "OutboxNotRelayedAlarm") },
			"OutboxFunction: no alarm sees it not invoked while OutboxTable is written"},
		{"relay alarm on another table's writes", on(checkRelayAlarms), func(tm *Template) {
			for _, m := range list(props(tm, "OutboxNotRelayedAlarm")["Metrics"]) {
				if str(asMap(m)["Id"]) == "writes" {
					asMap(list(asMap(asMap(asMap(m)["MetricStat"])["Metric"])["Dimensions"])[0])["Value"] = map[string]any{"Ref": "JobsTable"}
				}
			}
		}, "no alarm sees it not invoked"},
		{"relay alarm over an hour", on(checkRelayAlarms), func(tm *Template) {
			for _, m := range list(props(tm, "OutboxNotRelayedAlarm")["Metrics"]) {
				if st := asMap(asMap(m)["MetricStat"]); st != nil {
					st["Period"] = 3600
				}
			}
		}, "at most 900 s"},
		{"iterator-age alarm that claims to see a disabled relay (as before)", on(checkRelayAlarms), func(tm *Template) {
			props(tm, "OutboxIteratorAgeAlarm")["AlarmDescription"] = "Outbox items have waited over a minute to be relayed, for 5 minutes (the relay is failing, throttled or disabled)."
		}, "cannot see a disabled relay"},
	})
	if got := checkSchedulerAlarm(&Template{Resources: map[string]Resource{}}); len(got) == 0 {
		t.Error("a template without the scheduler alarm passes")
	}
}
