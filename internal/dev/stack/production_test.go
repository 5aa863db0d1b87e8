package stack

import (
	"strings"
	"testing"
	"time"
)

// productionRules are the rules that make a first `sam deploy` of
// template.yaml production-ready, each named for what it enforces (the
// check's comment says why; docs/deploy.md explains them to a user).
var productionRules = []struct {
	name  string
	check func(*Template) []string
}{
	{"AlarmTopicKeyLetsCloudWatchPublish", checkAlarmTopicKey},
	{"MetricAlarmsFilterTheirStage", checkMetricAlarms},
	{"AlarmsSeeAFailingFunction", checkFunctionAlarms},
	{"DashboardShowsThisStage", checkDashboard},
	{"RulesKeepPlaceholdersOutOfProduction", checkRules},
	{"TablesSurviveDeleteAndReplacement", checkTableRetention},
	{"APIStageWritesAccessLogs", checkAccessLogs},
	{"FunctionsAreTraced", checkTracing},
	{"SendMailWorksInTheSESSandbox", checkSendMail},
	{"DeadLetterQueueAcceptsOnlyWorkQueues", checkDeadLetterAllowList},
	{"DeadLetterQueueOutlivesItsSources", checkDeadLetterRetention},
}

func TestTemplateProductionRules(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	for _, r := range productionRules {
		t.Run(r.name, func(t *testing.T) { report(t, r.check(tmpl)) })
	}
}

// TestProductionChecksCatchMistakes proves each production rule's check
// fails on a template with the mistake it is there to catch.
func TestProductionChecksCatchMistakes(t *testing.T) {
	_, root := loadTemplate(t)
	email := wantFunctions[1]
	on := func(check func(*Template) []string) func(*testing.T, *Template) []string {
		return func(_ *testing.T, tm *Template) []string { return check(tm) }
	}
	policy := func(t *testing.T, tm *Template) []string {
		return checkPolicy(tm, email.id, derive(t, root, email.dir), email.unused)
	}
	props := func(tm *Template, id string) map[string]any { return tm.Resources[id].Properties }
	keyStmt := func(tm *Template, svc string) map[string]any {
		for _, st := range statements(props(tm, "AlarmTopicKey")["KeyPolicy"]) {
			for _, s := range principalServices(st) {
				if s == svc {
					return st
				}
			}
		}
		t.Fatalf("no key policy statement for %s", svc)
		return nil
	}
	roleStmt := func(tm *Template, role, sid string) map[string]any {
		for _, p := range list(props(tm, role)["Policies"]) {
			for _, st := range statements(asMap(p)["PolicyDocument"]) {
				if str(st["Sid"]) == sid {
					return st
				}
			}
		}
		t.Fatalf("no statement %s in %s", sid, role)
		return nil
	}
	metricQuery := func(tm *Template, alarm string) map[string]any { return asMap(list(props(tm, alarm)["Metrics"])[0]) }
	setTable := func(field string, v string) func(*Template) {
		return func(tm *Template) {
			r := tm.Resources["MarkersTable"]
			if field == "DeletionPolicy" {
				r.DeletionPolicy = v
			} else {
				r.UpdateReplacePolicy = v
			}
			tm.Resources["MarkersTable"] = r
		}
	}
	accessLog := func(tm *Template) map[string]any { return asMap(props(tm, "HttpApiStage")["AccessLogSettings"]) }
	catchesMistakes(t, []mutation{
		{"alarm topic on the AWS managed key", on(checkAlarmTopicKey), func(tm *Template) {
			props(tm, "AlarmTopic")["KmsMasterKeyId"] = "alias/aws/sns"
		}, "alias/aws/sns is not a customer managed"},
		{"key without rotation", on(checkAlarmTopicKey), func(tm *Template) { delete(props(tm, "AlarmTopicKey"), "EnableKeyRotation") }, "EnableKeyRotation"},
		{"key policy without CloudWatch", on(checkAlarmTopicKey), func(tm *Template) {
			keyStmt(tm, "cloudwatch.amazonaws.com")["Principal"] = map[string]any{"Service": "sns.amazonaws.com"}
		}, "does not let cloudwatch.amazonaws.com use it"},
		{"CloudWatch may only decrypt", on(checkAlarmTopicKey), func(tm *Template) {
			keyStmt(tm, "cloudwatch.amazonaws.com")["Action"] = []any{"kms:Decrypt"}
		}, "must allow kms:GenerateDataKey* and kms:Decrypt"},
		{"CloudWatch statement for any account", on(checkAlarmTopicKey), func(tm *Template) {
			delete(asMap(asMap(keyStmt(tm, "cloudwatch.amazonaws.com")["Condition"])["StringEquals"]), "aws:SourceAccount")
		}, "aws:SourceAccount"},
		{"alarm outside the key's SourceArn", on(checkAlarmTopicKey), func(tm *Template) {
			props(tm, "EmailErrorsAlarm")["AlarmName"] = "email-errors"
		}, "EmailErrorsAlarm: AlarmName"},
		{"key policy without EventBridge", on(checkAlarmTopicKey), func(tm *Template) {
			keyStmt(tm, "events.amazonaws.com")["Effect"] = "Deny"
		}, "does not let events.amazonaws.com"},
		{"account locked out of the key", on(checkAlarmTopicKey), func(tm *Template) {
			key := props(tm, "AlarmTopicKey")["KeyPolicy"]
			asMap(key)["Statement"] = list(asMap(key)["Statement"])[1:]
		}, "administrator"},
		{"metric alarm without the stage filter", on(checkMetricAlarms), func(tm *Template) {
			metricQuery(tm, "ClaimFailedAlarm")["Expression"] = "SELECT SUM(ClaimFailed) FROM SCHEMA(runstwice, type)"
		}, "ClaimFailedAlarm: query"},
		{"no alarm on UnreadableToggle", on(checkMetricAlarms), func(tm *Template) { delete(tm.Resources, "UnreadableToggleAlarm") }, "runstwice/UnreadableToggle"},
		{"no alarm on ToggleReadFailed", on(checkMetricAlarms), func(tm *Template) { delete(tm.Resources, "ToggleReadFailedAlarm") }, "runstwice/ToggleReadFailed"},
		{"no Throttles alarm", on(checkFunctionAlarms), func(tm *Template) { delete(tm.Resources, "DlqThrottlesAlarm") }, "DlqFunction: no AWS/Lambda Throttles"},
		{"Errors alarm on another function", on(checkFunctionAlarms), func(tm *Template) {
			asMap(list(props(tm, "EmailErrorsAlarm")["Dimensions"])[0])["Value"] = map[string]any{"Ref": "DlqFunction"}
		}, "EmailFunction: no AWS/Lambda Errors"},
		{"DLQ present alarm on visible messages only", on(checkFunctionAlarms), func(tm *Template) {
			q := list(props(tm, "DeadLetterPresentAlarm")["Metrics"])
			asMap(q[len(q)-1])["Expression"] = "visible"
		}, "no alarm on messages present"},
		{"DLQ present alarm after 5 minutes", on(checkFunctionAlarms), func(tm *Template) {
			props(tm, "DeadLetterPresentAlarm")["EvaluationPeriods"] = 5
			props(tm, "DeadLetterPresentAlarm")["DatapointsToAlarm"] = 5
		}, "want 15 of 60 s"},
		{"DLQ present alarm silenced by one missing minute", on(checkFunctionAlarms), func(tm *Template) {
			props(tm, "DeadLetterPresentAlarm")["DatapointsToAlarm"] = 15
		}, "one minute not reported: fires false, want true"},
		{"DLQ present alarm fired by missing data", on(checkFunctionAlarms), func(tm *Template) {
			props(tm, "DeadLetterPresentAlarm")["TreatMissingData"] = "breaching"
		}, "no data at all: fires true, want false"},
		{"DLQ present alarm fired by a DLQ that empties", on(checkFunctionAlarms), func(tm *Template) {
			props(tm, "DeadLetterPresentAlarm")["DatapointsToAlarm"] = 10
		}, "emptied in two minutes: fires true, want false"},
		{"dashboard search without the stage", on(checkDashboard), func(tm *Template) {
			sub := asMap(props(tm, "Dashboard")["DashboardBody"])["Fn::Sub"].([]any)
			sub[0] = strings.Replace(str(sub[0]), `{runstwice,stage,type} stage=\"${Stage}\"`, "{runstwice,type}", 1)
		}, "must have the stage dimension"},
		{"dashboard body not JSON", on(checkDashboard), func(tm *Template) {
			sub := asMap(props(tm, "Dashboard")["DashboardBody"])["Fn::Sub"].([]any)
			sub[0] = strings.Replace(str(sub[0]), "]}", "]", 1)
		}, "not valid JSON"},
		{"no rules", on(checkRules), func(tm *Template) { tm.Rules = nil }, "accepted, want the Rules to refuse it"},
		{"placeholder rule only in prod", on(checkRules), func(tm *Template) {
			asMap(tm.Rules["NoPlaceholdersOutsideDev"])["RuleCondition"] = map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "Stage"}, "prod"}}
		}, "staging keeps the MailFrom placeholder: accepted"},
		{"no rule for AlarmEmail", on(checkRules), func(tm *Template) { delete(tm.Rules, "AlarmEmailOutsideDev") }, "prod without AlarmEmail: accepted"},
		{"AlarmEmail rule only in prod", on(checkRules), func(tm *Template) {
			asMap(tm.Rules["AlarmEmailOutsideDev"])["RuleCondition"] = map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "Stage"}, "prod"}}
		}, "staging without AlarmEmail: accepted"},
		{"AlarmEmail rule in dev too", on(checkRules), func(tm *Template) {
			asMap(tm.Rules["AlarmEmailOutsideDev"])["RuleCondition"] = map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "Stage"}, "local"}}}}
		}, "dev without AlarmEmail: refused"},
		{"table deleted with the stack", on(checkTableRetention), setTable("DeletionPolicy", "Delete"), "MarkersTable: DeletionPolicy"},
		{"table dropped on replacement", on(checkTableRetention), setTable("UpdateReplacePolicy", ""), "MarkersTable: DeletionPolicy"},
		{"table kept by a rolled-back first deploy (as before)", on(checkTableRetention), setTable("DeletionPolicy", "Retain"), "already exists"},
		{"no deletion protection", on(checkTableRetention), func(tm *Template) { delete(props(tm, "JobsTable"), "DeletionProtectionEnabled") }, "JobsTable: DeletionProtectionEnabled in stage prod"},
		{"protection a first deploy cannot turn off (as before)", on(checkTableRetention), func(tm *Template) {
			tm.Conditions["ProtectData"] = map[string]any{"Fn::Not": []any{map[string]any{"Fn::Or": []any{
				map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "Stage"}, "dev"}}, map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "Stage"}, "local"}}}}}}
		}, `in stage prod with TableDeletionProtection "false" is true`},
		{"no access log", on(checkAccessLogs), func(tm *Template) { delete(props(tm, "HttpApiStage"), "AccessLogSettings") }, "DestinationArn"},
		{"access log without the caller", on(checkAccessLogs), func(tm *Template) {
			accessLog(tm)["Format"] = strings.Replace(str(accessLog(tm)["Format"]), "$context.identity.userArn", "$context.identity.caller", 1)
		}, `field "caller"`},
		{"access log kept forever", on(checkAccessLogs), func(tm *Template) { delete(props(tm, "ApiAccessLogGroup"), "RetentionInDays") }, "no RetentionInDays"},
		{"access log in the standard class", on(checkAccessLogs), func(tm *Template) { delete(props(tm, "ApiAccessLogGroup"), "LogGroupClass") }, "want INFREQUENT_ACCESS"},
		{"metric filter on the access log", on(checkAccessLogs), func(tm *Template) {
			tm.Resources["AccessErrorsFilter"] = Resource{Type: "AWS::Logs::MetricFilter", Properties: map[string]any{"LogGroupName": map[string]any{"Ref": "ApiAccessLogGroup"}}}
		}, "AccessErrorsFilter: AWS::Logs::MetricFilter"},
		{"function not traced", on(checkTracing), func(tm *Template) { props(tm, "DlqFunction")["Tracing"] = "PassThrough" }, "DlqFunction: Tracing"},
		{"role cannot write traces", on(checkTracing), func(tm *Template) {
			roleStmt(tm, "EnqueueFunctionRole", "Traces")["Action"] = []any{"xray:PutTraceSegments"}
		}, "EnqueueFunction: its role does not grant xray:PutTelemetryRecords"},
		{"send grant on the sender's identity only", on(checkSendMail), func(tm *Template) {
			res := list(roleStmt(tm, "EmailFunctionRole", "SendMail")["Resource"])
			res[0] = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:identity/${MailFrom}"}
		}, "ses:SendEmail must be granted on identity/*"},
		{"send grant on the identity only, not the configuration set", on(checkSendMail), func(tm *Template) {
			st := roleStmt(tm, "EmailFunctionRole", "SendMail")
			st["Resource"] = list(st["Resource"])[:1]
		}, `with SesConfigurationSet "tracking", ses:SendEmail must be granted on identity/* and configuration-set/tracking`},
		{"no grant for an identity's default set", on(checkSendMail), func(tm *Template) {
			res := list(roleStmt(tm, "EmailFunctionRole", "SendMail")["Resource"])
			res[1] = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/${SesConfigurationSet}"}
		}, `with SesConfigurationSet "", ses:SendEmail must be granted on identity/* and configuration-set/*`},
		{"any identity without the sender condition", policy, func(tm *Template) {
			delete(roleStmt(tm, "EmailFunctionRole", "SendMail"), "Condition")
		}, "wildcard resource"},
		{"trace grant on a function not traced", policy, func(tm *Template) { props(tm, "EmailFunction")["Tracing"] = "PassThrough" }, "has no Tracing: Active"},
		{"DLQ accepts any queue", on(checkDeadLetterAllowList), func(tm *Template) {
			props(tm, "DeadLetterQueue")["RedriveAllowPolicy"] = map[string]any{"redrivePermission": "allowAll"}
		}, "want byQueue"},
		{"DLQ allow list misses a work queue", on(checkDeadLetterAllowList), func(tm *Template) {
			rap := asMap(props(tm, "DeadLetterQueue")["RedriveAllowPolicy"])
			rap["sourceQueueArns"] = list(rap["sourceQueueArns"])[1:]
		}, "want exactly the work queues"},
		{"DLQ expires letters with their source", on(checkDeadLetterRetention), func(tm *Template) {
			props(tm, "DeadLetterQueue")["MessageRetentionPeriod"] = 345600
		}, "is not longer than its source"},
		{"work queue retention drifts from the job states", func(_ *testing.T, tm *Template) []string {
			return checkWorkQueueRetention(tm, 4*24*time.Hour)
		}, func(tm *Template) { props(tm, "BulkQueue")["MessageRetentionPeriod"] = 1209600 }, "BulkQueue: MessageRetentionPeriod"},
		{"visibility below 6x timeout + batching window", func(_ *testing.T, tm *Template) []string { return checkQueues(tm) }, func(tm *Template) {
			props(tm, "BulkQueue")["VisibilityTimeout"] = 180
		}, "VisibilityTimeout 180 < 6 × EmailFunction timeout 30 + batching window 20"},
	})
}
