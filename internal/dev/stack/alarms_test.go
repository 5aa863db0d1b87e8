package stack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/obs"
)

// The checks of this file keep the alarms deliverable and watching what can
// go wrong: docs/deploy.md's alarm table is their reading.

const (
	typeAlarm = "AWS::CloudWatch::Alarm"
	typeKey   = "AWS::KMS::Key"
)

// statements returns the statements of a policy document.
func statements(doc any) []map[string]any {
	var out []map[string]any
	for _, s := range list(asMap(doc)["Statement"]) {
		out = append(out, asMap(s))
	}
	return out
}

// principalServices returns the service principals of a statement.
func principalServices(st map[string]any) []string {
	switch v := asMap(st["Principal"])["Service"].(type) {
	case string:
		return []string{v}
	case []any:
		return strs(v)
	}
	return nil
}

// stmtActions returns a statement's actions.
func stmtActions(st map[string]any) []string {
	if a, ok := st["Action"].(string); ok {
		return []string{a}
	}
	return strs(st["Action"])
}

// condition returns st.Condition[op][key].
func condition(st map[string]any, op, key string) any {
	return asMap(asMap(st["Condition"])[op])[key]
}

// checkAlarmTopicKey: alarms reach people. The alarm topic is encrypted with
// a customer managed key of the template (with rotation) whose policy lets
// CloudWatch alarms of this stack (aws:SourceAccount, aws:SourceArn) and
// EventBridge use it for this topic (kms:GenerateDataKey*, kms:Decrypt), and
// keeps the account as its administrator. The AWS managed alias/aws/sns key
// cannot be given to CloudWatch: every alarm notification would be dropped.
func checkAlarmTopicKey(t *Template) []string {
	var problems findings
	bad := problems.add
	topic, ok := t.Resources["AlarmTopic"]
	if !ok {
		return []string{"missing AlarmTopic"}
	}
	kmsRef := topic.Properties["KmsMasterKeyId"]
	keyID, _ := asMap(kmsRef)["Ref"].(string)
	if keyID == "" {
		keyID = getAttID(kmsRef, "Arn")
	}
	key, ok := t.Resources[keyID]
	if !ok || key.Type != typeKey {
		bad("AlarmTopic: KmsMasterKeyId %v is not a customer managed %s of the template: CloudWatch cannot use an AWS managed key such as alias/aws/sns, so every alarm notification would be dropped", kmsRef, typeKey)
		return problems
	}
	if !truthy(key.Properties["EnableKeyRotation"]) {
		bad("%s: EnableKeyRotation is not true", keyID)
	}
	topicName := subString(topic.Properties["TopicName"])
	topicArn := "arn:${AWS::Partition}:sns:${AWS::Region}:${AWS::AccountId}:" + topicName
	const alarmArns = "arn:${AWS::Partition}:cloudwatch:${AWS::Region}:${AWS::AccountId}:alarm:${AWS::StackName}-*"
	admin := false
	for _, svc := range []string{"cloudwatch.amazonaws.com", "events.amazonaws.com"} {
		found := false
		for _, st := range statements(key.Properties["KeyPolicy"]) {
			if str(st["Effect"]) != "Allow" || !slices.Contains(principalServices(st), svc) {
				continue
			}
			found = true
			acts := stmtActions(st)
			if !slices.Contains(acts, "kms:Decrypt") || !(slices.Contains(acts, "kms:GenerateDataKey*") || slices.Contains(acts, "kms:GenerateDataKey")) {
				bad("%s: the statement for %s must allow kms:GenerateDataKey* and kms:Decrypt (has %v)", keyID, svc, acts)
			}
			if got := subString(condition(st, "StringEquals", "kms:EncryptionContext:aws:sns:topicArn")); got != topicArn {
				bad("%s: the statement for %s must be limited to the alarm topic (StringEquals kms:EncryptionContext:aws:sns:topicArn %q, has %q)", keyID, svc, topicArn, got)
			}
			if svc != "cloudwatch.amazonaws.com" {
				continue
			}
			if r, _ := asMap(condition(st, "StringEquals", "aws:SourceAccount"))["Ref"].(string); r != "AWS::AccountId" {
				bad("%s: the statement for CloudWatch must carry StringEquals aws:SourceAccount !Ref AWS::AccountId", keyID)
			}
			if got := subString(condition(st, "ArnLike", "aws:SourceArn")); got != alarmArns {
				bad("%s: the statement for CloudWatch must carry ArnLike aws:SourceArn %q (has %q)", keyID, alarmArns, got)
			}
		}
		if !found {
			bad("%s: its key policy does not let %s use it: alarm notifications would be dropped", keyID, svc)
		}
	}
	for _, st := range statements(key.Properties["KeyPolicy"]) {
		p := subString(asMap(st["Principal"])["AWS"])
		if str(st["Effect"]) == "Allow" && p == "arn:${AWS::Partition}:iam::${AWS::AccountId}:root" && slices.Contains(stmtActions(st), "kms:*") {
			admin = true
		}
	}
	if !admin {
		bad("%s: its key policy must keep the account (arn:${AWS::Partition}:iam::${AWS::AccountId}:root) as administrator, or nobody can manage the key", keyID)
	}
	for _, id := range t.IDs(typeAlarm) {
		if !strings.HasPrefix(subString(t.Resources[id].Properties["AlarmName"]), "${AWS::StackName}-") {
			bad("%s: AlarmName must be !Sub \"${AWS::StackName}-...\", or the key policy's aws:SourceArn does not cover it", id)
		}
	}
	return problems.sorted()
}

// insightsQuery matches a Metrics Insights query of one of the stack's own
// counters: the sum over every type, of this stack's stage only.
var insightsQuery = regexp.MustCompile(`^SELECT\s+SUM\((\w+)\)\s+FROM\s+SCHEMA\(\s*` + obs.Namespace + `\s*,\s*stage\s*,\s*type\s*\)\s+WHERE\s+stage\s*=\s*'\$\{Stage\}'$`)

// checkMetricAlarms: an alarm on each of the worker's counters that mean
// trouble (DeadLetters, ClaimFailed, UnknownToggle, UnreadableToggle,
// ToggleReadFailed, SesDailyQuota, SesSendingPaused), each
// a Metrics Insights query of the namespace's [stage, type] schema filtered
// to this stack's Stage, so dev and prod in one account never share an
// alarm; no alarm queries the namespace without that filter.
func checkMetricAlarms(t *Template) []string {
	var problems findings
	found := map[string]bool{}
	for _, id := range t.IDs(typeAlarm) {
		for _, m := range list(t.Resources[id].Properties["Metrics"]) {
			expr := subString(asMap(m)["Expression"])
			if !strings.Contains(expr, obs.Namespace) {
				continue
			}
			match := insightsQuery.FindStringSubmatch(strings.TrimSpace(expr))
			if match == nil {
				problems = append(problems, fmt.Sprintf("%s: query %q must be SELECT SUM(<metric>) FROM SCHEMA(%s, stage, type) WHERE stage = '${Stage}' (in a !Sub)", id, expr, obs.Namespace))
				continue
			}
			if truthy(asMap(m)["ReturnData"]) {
				found[match[1]] = true
			}
		}
	}
	for _, metric := range []string{engine.DeadLetters, engine.ClaimFailed, engine.UnknownToggle, engine.UnreadableToggle, engine.ToggleReadFailed, obs.SesDailyQuota, obs.SesSendingPaused} {
		if !found[metric] {
			problems = append(problems, "missing alarm on "+obs.Namespace+"/"+metric+" of this stage")
		}
	}
	return problems.sorted()
}

// isAlarmOnZero reports whether alarm props fire on any value above 0.
func isAlarmOnZero(p map[string]any) bool {
	return num(p["Threshold"]) == 0 && str(p["ComparisonOperator"]) == "GreaterThanThreshold"
}

// checkFunctionAlarms: a failing function is seen. Every function has an
// AWS/Lambda Errors and a Throttles alarm (any in 5 minutes); every function
// with a stream event source has an IteratorAge alarm (Maximum above at most
// a minute, within 10 minutes: its records wait, and a failing batch holds
// its shard while it is retried); the DLQ has an
// alarm on messages present (visible + in flight, metric math) throughout 15
// minutes (one minute SQS did not report tolerated), because SQS leaves a
// message received three or more times out of
// ApproximateAgeOfOldestMessage: a dead letter the dlq function keeps failing
// on never ages, so the age alarm alone never fires.
func checkFunctionAlarms(t *Template) []string {
	var problems findings
	bad := problems.add
	lambda := map[string]bool{}
	for _, id := range t.IDs(typeAlarm) {
		p := t.Resources[id].Properties
		if str(p["Namespace"]) != "AWS/Lambda" {
			continue
		}
		dims := list(p["Dimensions"])
		if len(dims) != 1 || str(asMap(dims[0])["Name"]) != "FunctionName" {
			bad("%s: an AWS/Lambda alarm must have the one dimension FunctionName", id)
			continue
		}
		fn, _ := asMap(asMap(dims[0])["Value"])["Ref"].(string)
		if str(p["MetricName"]) == "IteratorAge" {
			if str(p["Statistic"]) != "Maximum" || str(p["ComparisonOperator"]) != "GreaterThanThreshold" ||
				num(p["Threshold"]) <= 0 || num(p["Threshold"]) > 60000 || num(p["Period"])*num(p["EvaluationPeriods"]) > 600 {
				bad("%s: must fire on a Maximum above at most 60000 ms within 10 minutes", id)
			}
			lambda["IteratorAge@"+fn] = true
			continue
		}
		if !isAlarmOnZero(p) || str(p["Statistic"]) != "Sum" || num(p["Period"])*num(p["EvaluationPeriods"]) > 300 {
			bad("%s: must fire on a Sum above 0 within 5 minutes", id)
		}
		lambda[str(p["MetricName"])+"@"+fn] = true
	}
	for _, fn := range t.IDs(TypeFunction) {
		metrics := []string{"Errors", "Throttles"}
		if props, _ := t.FunctionProperties(fn); props != nil {
			if _, streams, _ := eventSources(props); len(streams) > 0 {
				metrics = append(metrics, "IteratorAge")
			}
		}
		for _, metric := range metrics {
			if !lambda[metric+"@"+fn] {
				bad("%s: no AWS/Lambda %s alarm (FunctionName !Ref %s)", fn, metric, fn)
			}
		}
	}
	if msg := dlqPresentAlarm(t); msg != "" {
		bad("%s", msg)
	}
	return problems.sorted()
}

// dlqPresentAlarm checks the alarm on messages present in the DLQ: it sums
// the DLQ's visible and in-flight messages (metric math) each minute over
// 15 minutes, and, evaluated as CloudWatch does, fires when letters stay
// throughout, also when SQS did not report one of the minutes, but not on
// missing data alone, nor when the DLQ emptied twice (the dlq function is
// working). It returns what is wrong, or "" when it is right.
func dlqPresentAlarm(t *Template) string {
	for _, id := range t.IDs(typeAlarm) {
		p := t.Resources[id].Properties
		ids := map[string]string{} // metric name → query id
		period, expr := 0, ""
		for _, m := range list(p["Metrics"]) {
			mm := asMap(m)
			stat := asMap(mm["MetricStat"])
			metric := asMap(stat["Metric"])
			dims := list(metric["Dimensions"])
			if str(metric["Namespace"]) == "AWS/SQS" && len(dims) == 1 && getAttID(asMap(dims[0])["Value"], "QueueName") == "DeadLetterQueue" {
				ids[str(metric["MetricName"])] = str(mm["Id"])
				period = num(stat["Period"])
			}
			if e := str(mm["Expression"]); e != "" && truthy(mm["ReturnData"]) {
				expr = e
			}
		}
		vis, inFlight := ids["ApproximateNumberOfMessagesVisible"], ids["ApproximateNumberOfMessagesNotVisible"]
		terms := strings.Split(strings.ReplaceAll(expr, " ", ""), "+")
		sort.Strings(terms)
		want := []string{vis, inFlight}
		sort.Strings(want)
		if vis == "" || inFlight == "" || !slices.Equal(terms, want) {
			continue
		}
		if n := num(p["EvaluationPeriods"]); period != 60 || period*n != 900 {
			return fmt.Sprintf("%s: evaluates %d periods of %d s; want 15 of 60 s", id, n, period)
		}
		present, none := 3.0, 0.0
		minutes := func(set map[int]*float64) []*float64 {
			out := make([]*float64, 15)
			for i := range out {
				out[i] = &present
			}
			for i, v := range set {
				out[i] = v
			}
			return out
		}
		allMissing := make([]*float64, 15)
		for _, c := range []struct {
			name   string
			points []*float64
			fires  bool
		}{
			{"letters present in every minute", minutes(nil), true},
			{"letters present, one minute not reported", minutes(map[int]*float64{7: nil}), true},
			{"no data at all", allMissing, false},
			{"the DLQ emptied in two minutes", minutes(map[int]*float64{3: &none, 11: &none}), false},
		} {
			fires, err := alarmFires(p, c.points)
			switch {
			case err != nil:
				return id + ": " + err.Error()
			case fires != c.fires:
				return fmt.Sprintf("%s: %s: fires %v, want %v", id, c.name, fires, c.fires)
			}
		}
		return ""
	}
	return "DeadLetterQueue: no alarm on messages present (ApproximateNumberOfMessagesVisible + ApproximateNumberOfMessagesNotVisible, metric math)"
}

// alarmFires evaluates a GreaterThanThreshold alarm over its last
// EvaluationPeriods datapoints (nil: missing) as CloudWatch does: a present
// datapoint breaches above the threshold, a missing one as TreatMissingData
// says (breaching or notBreaching; the other treatments look further back
// and are not modelled); it fires when at least DatapointsToAlarm (default
// EvaluationPeriods) breach.
func alarmFires(p map[string]any, points []*float64) (bool, error) {
	if str(p["ComparisonOperator"]) != "GreaterThanThreshold" {
		return false, fmt.Errorf("ComparisonOperator %q is not modelled", str(p["ComparisonOperator"]))
	}
	n, m := num(p["EvaluationPeriods"]), num(p["DatapointsToAlarm"])
	if m == 0 {
		m = n
	}
	if len(points) != n {
		return false, fmt.Errorf("%d datapoints for %d evaluation periods", len(points), n)
	}
	missing := str(p["TreatMissingData"])
	if missing != "breaching" && missing != "notBreaching" {
		return false, fmt.Errorf("TreatMissingData %q: want notBreaching (missing data is not trouble) or breaching", missing)
	}
	breaching := 0
	for _, v := range points {
		if (v == nil && missing == "breaching") || (v != nil && *v > float64(num(p["Threshold"]))) {
			breaching++
		}
	}
	return breaching >= m, nil
}

// dashboardSearch matches a SEARCH of the stack's own namespace in the
// dashboard body: the schema's dimensions and the search terms.
var dashboardSearch = regexp.MustCompile(`SEARCH\('\{` + obs.Namespace + `,([^}]*)\}([^']*)'`)

// checkDashboard: the dashboard body is valid JSON; every search of the
// stack's metrics names the stage dimension and this stack's Stage, and
// every counter the worker writes is on it. (It starts as every check of one
// resource does: a missing resource is its one finding.)
func checkDashboard(t *Template) []string {
	var problems findings
	bad := problems.add
	d, ok := t.Resources["Dashboard"]
	if !ok {
		return []string{"missing Dashboard"}
	}
	sub, _ := asMap(d.Properties["DashboardBody"])["Fn::Sub"].([]any)
	if len(sub) != 2 {
		return []string{"Dashboard: DashboardBody must be !Sub [body, {names}]"}
	}
	body := str(sub[0])
	plain := regexp.MustCompile(`\$\{[^}]*\}`).ReplaceAllString(body, "x")
	var v any
	if err := json.Unmarshal([]byte(plain), &v); err != nil {
		bad("Dashboard: DashboardBody is not valid JSON: %v", err)
	}
	shown := map[string]bool{}
	for _, m := range dashboardSearch.FindAllStringSubmatch(body, -1) {
		dims, terms := m[1], m[2]
		if !strings.HasPrefix(dims, "stage,") || !strings.Contains(terms, `stage=\"${Stage}\"`) {
			bad("Dashboard: search {%s,%s}%s must have the stage dimension and stage=\\\"${Stage}\\\"", obs.Namespace, dims, terms)
		}
		if name := regexp.MustCompile(`MetricName=\\"(\w+)\\"`).FindStringSubmatch(terms); name != nil {
			shown[name[1]] = true
		}
	}
	if strings.Count(body, "{"+obs.Namespace+",") != len(dashboardSearch.FindAllString(body, -1)) {
		bad("Dashboard: a metric of %s is shown other than through a SEARCH with the stage filter", obs.Namespace)
	}
	for _, metric := range []string{engine.JobsSucceeded, engine.JobsDuplicate, engine.JobsSkipped, engine.JobsParked, engine.JobsFailed, engine.JobsSnoozed,
		engine.DeadLetters, engine.ClaimFailed, engine.UnknownToggle, engine.UnreadableToggle, engine.ToggleReadFailed, engine.ColdStart,
		obs.SesDailyQuota, obs.SesSendingPaused} {
		if !shown[metric] {
			bad("Dashboard: %s/%s is not shown", obs.Namespace, metric)
		}
	}
	return problems.sorted()
}
