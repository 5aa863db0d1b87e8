package stack

import (
	"fmt"
	"slices"
	"testing"
)

// schedulerRoles are the roles of the template EventBridge Scheduler may
// assume.
func schedulerRoles(t *Template) []string {
	var out []string
	for _, id := range t.IDs(TypeRole) {
		for _, s := range list(asMap(t.Resources[id].Properties["AssumeRolePolicyDocument"])["Statement"]) {
			if str(asMap(asMap(s)["Principal"])["Service"]) == "scheduler.amazonaws.com" {
				out = append(out, id)
			}
		}
	}
	return out
}

// checkJobSchedules: the jobs schedule group is runstwice-<stage>-jobs; the
// enqueue function is told that group, a role the scheduler assumes, each
// work queue's ARN and the DLQ's; every role the scheduler assumes is
// limited to this account's schedules and may only send messages to the
// work queues and the dead-letter queue.
func checkJobSchedules(t *Template) []string {
	var problems findings
	bad := problems.add
	g, ok := t.Resources["JobsScheduleGroup"]
	if !ok || g.Type != TypeScheduleGroup {
		bad("JobsScheduleGroup: missing (want an %s)", TypeScheduleGroup)
	} else if name, _ := asMap(g.Properties["Name"])["Fn::Sub"].(string); name != "runstwice-${Stage}-jobs" {
		bad("JobsScheduleGroup: Name %v, want !Sub runstwice-${Stage}-jobs", g.Properties["Name"])
	}
	props, _ := t.FunctionProperties("EnqueueFunction")
	env := EnvironmentVariables(props)
	if r, _ := asMap(env["SCHEDULE_GROUP"])["Ref"].(string); r != "JobsScheduleGroup" {
		bad("EnqueueFunction: SCHEDULE_GROUP must be !Ref JobsScheduleGroup")
	}
	roles := schedulerRoles(t)
	if role := getAttID(env["SCHEDULER_ROLE_ARN"], "Arn"); !slices.Contains(roles, role) {
		bad("EnqueueFunction: SCHEDULER_ROLE_ARN must be !GetAtt of a role scheduler.amazonaws.com assumes (have %v)", roles)
	}
	if q := getAttID(env["DLQ_ARN"], "Arn"); q != "DeadLetterQueue" {
		bad("EnqueueFunction: DLQ_ARN must be !GetAtt DeadLetterQueue.Arn")
	}
	for _, q := range []string{"CRITICAL", "DEFAULT", "BULK"} {
		url, _ := asMap(env["QUEUE_URL_"+q])["Ref"].(string)
		if arn := getAttID(env["QUEUE_ARN_"+q], "Arn"); arn == "" || arn != url {
			bad("EnqueueFunction: QUEUE_ARN_%s must be !GetAtt %s.Arn, the queue of QUEUE_URL_%s", q, url, q)
		}
	}
	sendTo := map[string]bool{}
	for _, id := range t.IDs(TypeQueue) {
		sendTo[id] = true // the work queues and the DLQ: every queue of the template
	}
	groups := t.IDs(TypeScheduleGroup)
	for _, role := range roles {
		r := t.Resources[role]
		for _, s := range list(asMap(r.Properties["AssumeRolePolicyDocument"])["Statement"]) {
			cond := asMap(asMap(s)["Condition"])
			acct, _ := asMap(asMap(cond["StringEquals"])["aws:SourceAccount"])["Ref"].(string)
			if acct != "AWS::AccountId" {
				bad("%s: the scheduler's trust must be Condition StringEquals aws:SourceAccount !Ref AWS::AccountId", role)
			}
			var arns []string
			for _, a := range list(asMap(cond["ArnEquals"])["aws:SourceArn"]) {
				arns = append(arns, getAttID(a, "Arn"))
			}
			slices.Sort(arns)
			if !slices.Equal(arns, groups) {
				bad("%s: the scheduler's trust must be Condition ArnEquals aws:SourceArn the template's schedule groups (!GetAtt %v .Arn), has %v", role, groups, arns)
			}
		}
		if len(list(r.Properties["ManagedPolicyArns"])) > 0 {
			bad("%s: managed policies", role)
		}
		for _, p := range list(r.Properties["Policies"]) {
			for i, s := range list(asMap(asMap(p)["PolicyDocument"])["Statement"]) {
				m := asMap(s)
				name := fmt.Sprintf("%s statement %d", role, i)
				if str(m["Effect"]) != "Allow" {
					bad("%s: Effect %v", name, m["Effect"])
				}
				actions := strs(m["Action"])
				if a, isStr := m["Action"].(string); isStr {
					actions = []string{a}
				}
				if !slices.Equal(actions, []string{"sqs:SendMessage"}) {
					bad("%s: actions %v, want only sqs:SendMessage", name, actions)
				}
				res := list(m["Resource"])
				if m["Resource"] != nil && res == nil {
					res = []any{m["Resource"]}
				}
				for _, q := range res {
					if id := getAttID(q, "Arn"); !sendTo[id] {
						bad("%s: resource %v is not a queue of the template", name, q)
					}
				}
			}
		}
	}
	return problems.sorted()
}

func TestTemplateJobSchedules(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkJobSchedules(tmpl))
}

// The checks of the schedules and of the enqueue function's scheduler
// grants catch each mistake they are there for.
func TestJobScheduleChecksCatchMistakes(t *testing.T) {
	_, root := loadTemplate(t)
	enq := wantFunctions[0]
	policy := func(t *testing.T, tmpl *Template) []string {
		return checkPolicy(tmpl, enq.id, derive(t, root, enq.dir), enq.unused)
	}
	schedules := func(_ *testing.T, tmpl *Template) []string { return checkJobSchedules(tmpl) }
	schedStmt := func(tm *Template, sid string) map[string]any {
		for _, p := range list(tm.Resources["EnqueueFunctionRole"].Properties["Policies"]) {
			for _, st := range statements(asMap(p)["PolicyDocument"]) {
				if str(st["Sid"]) == sid {
					return st
				}
			}
		}
		t.Fatalf("no statement %s in EnqueueFunctionRole", sid)
		return nil
	}
	sendStmt := func(tm *Template) map[string]any {
		p := list(tm.Resources["SchedulerRole"].Properties["Policies"])[0]
		return asMap(list(asMap(asMap(p)["PolicyDocument"])["Statement"])[0])
	}
	trust := func(tm *Template) map[string]any {
		return asMap(asMap(list(asMap(tm.Resources["SchedulerRole"].Properties["AssumeRolePolicyDocument"])["Statement"])[0])["Condition"])
	}
	catchesMistakes(t, []mutation{
		{"scheduler trust for any schedule group (as before)", schedules, func(tm *Template) { delete(trust(tm), "ArnEquals") }, "ArnEquals aws:SourceArn"},
		{"scheduler trust misses the recurring group", schedules, func(tm *Template) {
			arns := asMap(trust(tm)["ArnEquals"])
			arns["aws:SourceArn"] = list(arns["aws:SourceArn"])[:1]
		}, "ArnEquals aws:SourceArn"},
		{"PassRole without its condition", policy, func(tm *Template) { delete(schedStmt(tm, "PassSchedulerRole"), "Condition") }, "iam:PassedToService"},
		{"PassRole of another role", policy, func(tm *Template) {
			schedStmt(tm, "PassSchedulerRole")["Resource"] = map[string]any{"Fn::GetAtt": []any{"EmailFunctionRole", "Arn"}}
		}, "iam:PassRole on EmailFunctionRole"},
		{"schedules of every group", policy, func(tm *Template) {
			schedStmt(tm, "JobSchedules")["Resource"] = map[string]any{"Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/*/*"}
		}, "wildcard resource"},
		{"a schedule action the code does not call", policy, func(tm *Template) {
			s := schedStmt(tm, "JobSchedules")
			s["Action"] = append(list(s["Action"]), "scheduler:UpdateSchedule")
		}, "scheduler:UpdateSchedule, which its code does not call"},
		{"no schedule grant", policy, func(tm *Template) { schedStmt(tm, "JobSchedules")["Action"] = []any{"scheduler:DeleteSchedule"} }, "calls scheduler:CreateSchedule"},
		{"scheduler role may do more", schedules, func(tm *Template) {
			s := sendStmt(tm)
			s["Action"] = append(list(s["Action"]), "sqs:DeleteMessage")
		}, "want only sqs:SendMessage"},
		{"scheduler role sends elsewhere", schedules, func(tm *Template) {
			sendStmt(tm)["Resource"] = []any{map[string]any{"Fn::GetAtt": []any{"AlarmTopic", "Arn"}}}
		}, "is not a queue of the template"},
		{"scheduler trust of any account", schedules, func(tm *Template) {
			s := list(asMap(tm.Resources["SchedulerRole"].Properties["AssumeRolePolicyDocument"])["Statement"])[0]
			delete(asMap(s), "Condition")
		}, "aws:SourceAccount"},
		{"group of another name", schedules, func(tm *Template) {
			tm.Resources["JobsScheduleGroup"].Properties["Name"] = map[string]any{"Fn::Sub": "${AWS::StackName}-jobs"}
		}, "JobsScheduleGroup: Name"},
		{"enqueue told another DLQ", schedules, func(tm *Template) {
			EnvironmentVariables(tm.Resources["EnqueueFunction"].Properties)["DLQ_ARN"] = map[string]any{"Fn::GetAtt": []any{"BulkQueue", "Arn"}}
		}, "DLQ_ARN"},
	})
}
