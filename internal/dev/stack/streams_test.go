package stack

import (
	"slices"
	"testing"
)

// streamEvents returns function fnID's DynamoDB stream event sources.
func streamEvents(t *Template, fnID string) map[string]map[string]any {
	return eventsOfType(t, fnID, "DynamoDB")
}

// checkStreamSources: a stream event source never blocks its shard and
// never loses a record silently. Each DynamoDB event source reads the stream
// of a table of the template from TRIM_HORIZON (LATEST would skip what was
// written before the mapping existed), reports batch item failures, bisects
// a failed batch, retries a bounded number of times (not -1, forever), gives
// up on records past a bounded age within the stream's 24 hours, and sends
// what it gave up on to an on-failure queue of the template that is
// encrypted and keeps messages 14 days. Every table with a stream has a
// consumer.
func checkStreamSources(t *Template) []string {
	var problems findings
	bad := problems.add
	consumed := map[string]bool{}
	for _, fn := range t.IDs(TypeFunction) {
		for name, ev := range streamEvents(t, fn) {
			where := fn + " event " + name
			table := getAttID(ev["Stream"], "StreamArn")
			if table == "" || t.Resources[table].Type != TypeTable {
				bad("%s: Stream must be !GetAtt <table>.StreamArn of the template", where)
			} else if str(asMap(t.Resources[table].Properties["StreamSpecification"])["StreamViewType"]) == "" {
				bad("%s: table %s has no StreamSpecification", where, table)
			}
			consumed[table] = true
			if got := str(ev["StartingPosition"]); got != "TRIM_HORIZON" {
				bad("%s: StartingPosition %q, want TRIM_HORIZON", where, got)
			}
			if n := num(ev["BatchSize"]); n < 1 || n > 10000 {
				bad("%s: BatchSize not set (1-10000)", where)
			}
			if !slices.Contains(strs(ev["FunctionResponseTypes"]), "ReportBatchItemFailures") {
				bad("%s: FunctionResponseTypes lacks ReportBatchItemFailures", where)
			}
			if !truthy(ev["BisectBatchOnFunctionError"]) {
				bad("%s: BisectBatchOnFunctionError is not true", where)
			}
			if n := num(ev["MaximumRetryAttempts"]); n < 0 || n > 10000 {
				bad("%s: MaximumRetryAttempts must be bounded (0-10000), is %v", where, ev["MaximumRetryAttempts"])
			}
			if n := num(ev["MaximumRecordAgeInSeconds"]); n < 60 || n > 86400 {
				bad("%s: MaximumRecordAgeInSeconds must be bounded (60-86400, the stream keeps records 24 h), is %v", where, ev["MaximumRecordAgeInSeconds"])
			}
			onFailure := asMap(asMap(ev["DestinationConfig"])["OnFailure"])
			q := getAttID(onFailure["Destination"], "Arn")
			if q == "" || t.Resources[q].Type != TypeQueue || str(onFailure["Type"]) != "SQS" {
				bad("%s: DestinationConfig.OnFailure must be Type SQS, Destination !GetAtt <queue>.Arn of the template", where)
				continue
			}
			p := t.Resources[q].Properties
			if !truthy(p["SqsManagedSseEnabled"]) && p["KmsMasterKeyId"] == nil {
				bad("%s: on-failure queue %s has no SSE", where, q)
			}
			if num(p["MessageRetentionPeriod"]) != 1209600 {
				bad("%s: on-failure queue %s keeps messages %v s, want 1209600 (14 days)", where, q, p["MessageRetentionPeriod"])
			}
		}
	}
	for _, id := range t.IDs(TypeTable) {
		if str(asMap(t.Resources[id].Properties["StreamSpecification"])["StreamViewType"]) != "" && !consumed[id] {
			bad("%s: has a stream no function consumes", id)
		}
	}
	return problems.sorted()
}

func TestTemplateStreamSources(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	if len(streamEvents(tmpl, "OutboxFunction")) != 1 {
		t.Fatal("OutboxFunction has no DynamoDB event source")
	}
	report(t, checkStreamSources(tmpl))
}

// TestStreamChecksCatchMistakes proves the stream checks fail on a template
// with each mistake, the policy check included.
func TestStreamChecksCatchMistakes(t *testing.T) {
	_, root := loadTemplate(t)
	outbox := wantFunctions[3]
	streams := func(_ *testing.T, tm *Template) []string { return checkStreamSources(tm) }
	alarms := func(_ *testing.T, tm *Template) []string { return checkFunctionAlarms(tm) }
	queues := func(_ *testing.T, tm *Template) []string { return checkQueues(tm) }
	policy := func(t *testing.T, tm *Template) []string {
		return checkPolicy(tm, outbox.id, derive(t, root, outbox.dir), outbox.unused)
	}
	ev := func(tm *Template) map[string]any {
		return asMap(asMap(asMap(tm.Resources["OutboxFunction"].Properties["Events"])["Outbox"])["Properties"])
	}
	stmt := func(tm *Template, sid string) map[string]any {
		for _, p := range list(tm.Resources["OutboxFunctionRole"].Properties["Policies"]) {
			for _, s := range list(asMap(asMap(p)["PolicyDocument"])["Statement"]) {
				if str(asMap(s)["Sid"]) == sid {
					return asMap(s)
				}
			}
		}
		t.Fatalf("no statement %s in OutboxFunctionRole", sid)
		return nil
	}
	getAtt := func(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }
	catchesMistakes(t, []mutation{
		{"starts at LATEST", streams, func(tm *Template) { ev(tm)["StartingPosition"] = "LATEST" }, "StartingPosition \"LATEST\""},
		{"retries forever", streams, func(tm *Template) { ev(tm)["MaximumRetryAttempts"] = -1 }, "MaximumRetryAttempts must be bounded"},
		{"no record age", streams, func(tm *Template) { delete(ev(tm), "MaximumRecordAgeInSeconds") }, "MaximumRecordAgeInSeconds must be bounded"},
		{"no bisect", streams, func(tm *Template) { delete(ev(tm), "BisectBatchOnFunctionError") }, "BisectBatchOnFunctionError"},
		{"no batch item failures", streams, func(tm *Template) { delete(ev(tm), "FunctionResponseTypes") }, "lacks ReportBatchItemFailures"},
		{"no on-failure destination", streams, func(tm *Template) { delete(ev(tm), "DestinationConfig") }, "DestinationConfig.OnFailure"},
		{"short-lived on-failure queue", streams, func(tm *Template) {
			tm.Resources["OutboxFailureQueue"].Properties["MessageRetentionPeriod"] = 345600
		}, "want 1209600"},
		{"table without stream", streams, func(tm *Template) {
			delete(tm.Resources["OutboxTable"].Properties, "StreamSpecification")
		}, "OutboxTable has no StreamSpecification"},
		{"stream nobody reads", streams, func(tm *Template) {
			delete(asMap(tm.Resources["OutboxFunction"].Properties["Events"]), "Outbox")
		}, "OutboxTable: has a stream no function consumes"},
		{"no iterator-age alarm", alarms, func(tm *Template) { delete(tm.Resources, "OutboxIteratorAgeAlarm") }, "no AWS/Lambda IteratorAge alarm"},
		{"iterator age threshold too high", alarms, func(tm *Template) {
			tm.Resources["OutboxIteratorAgeAlarm"].Properties["Threshold"] = 3600000
		}, "at most 60000 ms"},
		{"on-failure queue without SSE", queues, func(tm *Template) {
			delete(tm.Resources["OutboxFailureQueue"].Properties, "SqsManagedSseEnabled")
		}, "OutboxFailureQueue: no SSE"},
		{"stream read on a table that is no source", policy, func(tm *Template) {
			stmt(tm, "ReadOutboxStream")["Resource"] = getAtt("JobsTable", "StreamArn")
		}, "dynamodb:GetRecords on JobsTable"},
		{"stream wildcard on another table", policy, func(tm *Template) {
			stmt(tm, "ListOutboxStreams")["Resource"] = map[string]any{"Fn::Sub": "${JobsTable.Arn}/stream/*"}
		}, "wildcard resource"},
		{"stream wildcard with a table action", policy, func(tm *Template) {
			s := stmt(tm, "ListOutboxStreams")
			s["Action"] = append(list(s["Action"]), "dynamodb:GetItem")
		}, "wildcard resource"},
		{"send to a queue that is no destination", policy, func(tm *Template) {
			// A queue neither the event source nor the code names (the
			// work queues and the DLQ are in the relay's environment: it
			// sends jobs, and schedules them with the DLQ as theirs).
			tm.Resources["StrayQueue"] = tm.Resources["OutboxFailureQueue"]
			stmt(tm, "OnFailureDestination")["Resource"] = getAtt("StrayQueue", "Arn")
		}, "sqs:SendMessage on StrayQueue"},
		{"destination grant stands in for the code's", policy, func(tm *Template) {
			stmt(tm, "SendJobs")["Action"] = []any{}
		}, "calls sqs:SendMessage"},
		{"dead letters scanned", policy, func(tm *Template) {
			s := stmt(tm, "DeadLetters")
			s["Action"] = append(list(s["Action"]), "dynamodb:Scan")
		}, "listed as not needed"},
	})
}
