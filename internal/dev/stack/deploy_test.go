package stack

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The checks of this file keep a first `sam deploy` to production safe:
// no placeholder reaches it, its data survives, its calls leave a record,
// its traces are written, and its mail is authorised in the SES sandbox too.

// realValues are production values for every parameter whose default is an
// example.com placeholder, and for those a stage other than dev and local
// must set (requiredOutsideDev).
var realValues = map[string]string{"MailFrom": "no-reply@mail.runstwice.dev", "AppBaseUrl": "https://app.runstwice.dev",
	"AlarmEmail": "oncall@runstwice.dev", "WebhookUrl": "https://hooks.runstwice.dev/events"}

// realValuesBut is stage with every real value but name's.
func realValuesBut(stage, name string) map[string]string {
	out := map[string]string{"Stage": stage}
	maps.Copy(out, realValues)
	delete(out, name)
	return out
}

// requiredOutsideDev are the parameters whose default (empty) is fine in dev
// and local but refused elsewhere: AlarmEmail, or the alarms page nobody.
var requiredOutsideDev = []string{"AlarmEmail"}

// realAccountSets are the parameters a real account's production stage
// must set although the template gives them a default, with why: the
// default is the SES sandbox's, dev's or only right after a first deploy.
var realAccountSets = map[string]string{
	"SesMaxSendRate":          "its default is the SES sandbox's rate, 1 mail a second",
	"UsersTableName":          "its default is the stack's own users table, which starts empty",
	"TableDeletionProtection": "a new stage's first deploy sets it false, so that a failed one can be deployed again",
}

// prodMustSet are the parameters samconfig.toml's prod section must name:
// every parameter a Rule checks outside dev, and realAccountSets.
func prodMustSet(t *Template) []string {
	set := map[string]bool{}
	for name := range realAccountSets {
		set[name] = true
	}
	for _, r := range t.Rules {
		cond := map[string]bool{}
		refs(asMap(r)["RuleCondition"], cond)
		if !cond["Stage"] {
			continue // a rule for every stage: its parameters have defaults dev uses too
		}
		refs(asMap(r)["Assertions"], set)
	}
	delete(set, "Stage")
	return SortedIDs(set)
}

// ruleOutcome instantiates t with params and returns the failed rules'
// descriptions (nil when the rules pass) or an error for anything else.
func ruleOutcome(t *Template, params map[string]string) ([]string, error) {
	_, err := New(t, Options{Params: params})
	var re *RulesError
	if errors.As(err, &re) {
		var out []string
		for _, f := range re.Failures {
			out = append(out, f.Description)
		}
		return out, nil
	}
	return nil, err
}

// checkRules: no placeholder reaches production. The template's Rules
// refuse a stage other than dev and local whose parameters keep an
// example.com default (every such parameter, named in the refusal) or
// without AlarmEmail (named), and ApiAuth=JWT without JwtIssuer or
// JwtAudience (each named); dev and local deploy with the defaults, and
// production with real values.
func checkRules(t *Template) []string {
	var problems findings
	bad := problems.add
	prodParams := func(extra map[string]string) map[string]string {
		p := map[string]string{"Stage": "prod"}
		maps.Copy(p, realValues)
		maps.Copy(p, extra)
		return p
	}
	type want struct {
		name   string
		params map[string]string
		refuse []string // parameters the refusal must name; nil: accepted
	}
	cases := []want{
		{"dev keeps the defaults", map[string]string{"Stage": "dev"}, nil},
		{"local keeps the defaults", map[string]string{"Stage": "local"}, nil},
		{"prod with real values", prodParams(nil), nil},
		{"JWT with issuer and audience", prodParams(map[string]string{"ApiAuth": "JWT", "JwtIssuer": "https://auth.runstwice.dev", "JwtAudience": "jobs"}), nil},
		{"JWT without issuer", prodParams(map[string]string{"ApiAuth": "JWT", "JwtAudience": "jobs"}), []string{"JwtIssuer"}},
		{"JWT without audience", prodParams(map[string]string{"ApiAuth": "JWT", "JwtIssuer": "https://auth.runstwice.dev"}), []string{"JwtAudience"}},
		{"JWT in dev without either", map[string]string{"Stage": "dev", "ApiAuth": "JWT"}, []string{"JwtIssuer", "JwtAudience"}},
	}
	for _, name := range SortedIDs(t.Parameters) {
		p := t.Parameters[name]
		if !strings.Contains(p.Default, "example.com") {
			continue
		}
		if _, ok := realValues[name]; !ok {
			bad("parameter %s has an example.com default: add a production value to realValues", name)
			continue
		}
		params := prodParams(nil)
		delete(params, name) // back to its default
		cases = append(cases, want{"prod keeps the " + name + " placeholder", params, []string{name}})
		cases = append(cases, want{"staging keeps the " + name + " placeholder", realValuesBut("staging", name), []string{name}})
	}
	for _, name := range requiredOutsideDev {
		params := prodParams(nil)
		delete(params, name)
		cases = append(cases, want{"prod without " + name, params, []string{name}},
			want{"staging without " + name, realValuesBut("staging", name), []string{name}},
			want{"dev without " + name, realValuesBut("dev", name), nil})
	}
	for _, c := range cases {
		got, err := ruleOutcome(t, c.params)
		switch {
		case err != nil:
			bad("%s: %v", c.name, err)
		case c.refuse == nil && got != nil:
			bad("%s: refused (%v), want accepted", c.name, got)
		case c.refuse != nil && got == nil:
			bad("%s: accepted, want the Rules to refuse it naming %v", c.name, c.refuse)
		}
		for _, param := range c.refuse {
			if got != nil && !slices.ContainsFunc(got, func(d string) bool { return strings.Contains(d, param) }) {
				bad("%s: no refusal names %s (got %q)", c.name, param, got)
			}
		}
	}
	return problems.sorted()
}

// stageStack instantiates t for stage with production values.
func stageStack(t *Template, stage string) (*Stack, error) {
	params := map[string]string{"Stage": stage}
	maps.Copy(params, realValues)
	return New(t, Options{Params: params})
}

// checkTableRetention: data survives a `sam delete` or a replacement, and
// a first deploy that fails can be deployed again. Every table has
// DeletionPolicy RetainExceptOnCreate (Retain, except that the rollback of
// the deploy that created it deletes it: with Retain the rolled-back table
// stays and every retry fails with "already exists") and UpdateReplacePolicy
// Retain. Deletion protection is on in every stage but dev and local, unless
// TableDeletionProtection is "false" (a first deploy: a rollback cannot
// delete a protected table either).
func checkTableRetention(t *Template) []string {
	var problems findings
	bad := problems.add
	for _, id := range t.IDs(TypeTable) {
		r := t.Resources[id]
		if r.DeletionPolicy != "RetainExceptOnCreate" || r.UpdateReplacePolicy != "Retain" {
			bad("%s: DeletionPolicy %q, UpdateReplacePolicy %q: want RetainExceptOnCreate and Retain, or a `sam delete` or a replacement drops its data, "+
				"or a rolled-back first deploy leaves it behind and every retry fails with \"already exists\"", id, r.DeletionPolicy, r.UpdateReplacePolicy)
		}
		for _, c := range []struct {
			stage, protection string
			want              bool
		}{{"dev", "", false}, {"local", "", false}, {"prod", "", true}, {"staging", "", true}, {"prod", "false", false}, {"dev", "true", false}} {
			params := map[string]string{"Stage": c.stage}
			maps.Copy(params, realValues)
			if c.protection != "" {
				params["TableDeletionProtection"] = c.protection
			}
			st, err := New(t, Options{Params: params})
			if err != nil {
				bad("%s: stage %s: %v", id, c.stage, err)
				continue
			}
			got, err := st.Resolve(r.Properties["DeletionProtectionEnabled"])
			if err != nil || truthy(got) != c.want {
				bad("%s: DeletionProtectionEnabled in stage %s with TableDeletionProtection %q is %v (%v), want %v", id, c.stage, c.protection, got, err, c.want)
			}
		}
	}
	return problems.sorted()
}

// wantAccessLog is what every access log record carries: the request, the
// caller, the route, the answer, the latency, the integration's error and
// the client address.
var wantAccessLog = map[string]string{
	"requestId":               "$context.requestId",
	"caller":                  "$context.identity.userArn",
	"routeKey":                "$context.routeKey",
	"status":                  "$context.status",
	"responseLatency":         "$context.responseLatency",
	"integrationErrorMessage": "$context.integrationErrorMessage",
	"ip":                      "$context.identity.sourceIp",
}

// checkAccessLogs: the HTTP API stage writes a JSON access log record per
// request (a 403 from IAM auth included) to a log group of the template with
// a retention, in the Infrequent Access class, with no metric or
// subscription filter (a class that has neither).
func checkAccessLogs(t *Template) []string {
	var problems findings
	bad := problems.add
	for _, id := range t.IDs("AWS::ApiGatewayV2::Stage") {
		als := asMap(t.Resources[id].Properties["AccessLogSettings"])
		lg := getAttID(als["DestinationArn"], "Arn")
		if r, ok := t.Resources[lg]; !ok || r.Type != TypeLogGroup {
			bad("%s: AccessLogSettings.DestinationArn must be !GetAtt <log group>.Arn of the template", id)
		} else {
			if num(r.Properties["RetentionInDays"]) <= 0 {
				bad("%s: the access log group %s has no RetentionInDays", id, lg)
			}
			if c := str(r.Properties["LogGroupClass"]); c != "INFREQUENT_ACCESS" {
				bad("%s: the access log group %s has LogGroupClass %q, want INFREQUENT_ACCESS (read with Logs Insights only; half the ingestion price)", id, lg, c)
			}
			for _, typ := range []string{"AWS::Logs::MetricFilter", "AWS::Logs::SubscriptionFilter"} {
				for _, f := range t.IDs(typ) {
					if ref, _ := asMap(t.Resources[f].Properties["LogGroupName"])["Ref"].(string); ref == lg {
						bad("%s: %s on the access log group %s, which the Infrequent Access class does not support", f, typ, lg)
					}
				}
			}
		}
		var record map[string]any
		if err := json.Unmarshal([]byte(str(als["Format"])), &record); err != nil {
			bad("%s: AccessLogSettings.Format is not a JSON object: %v", id, err)
			continue
		}
		for _, k := range SortedIDs(wantAccessLog) {
			if got := str(record[k]); got != wantAccessLog[k] {
				bad("%s: access log field %q is %q, want %q", id, k, got, wantAccessLog[k])
			}
		}
	}
	if len(t.IDs("AWS::ApiGatewayV2::Stage")) == 0 {
		bad("no AWS::ApiGatewayV2::Stage")
	}
	return problems.sorted()
}

// checkTracing: every function has X-Ray active tracing and its explicit
// role lets it write its segments (xray:PutTraceSegments,
// xray:PutTelemetryRecords).
func checkTracing(t *Template) []string {
	var problems findings
	for _, fn := range t.IDs(TypeFunction) {
		props, _ := t.FunctionProperties(fn)
		if got := str(props["Tracing"]); got != "Active" {
			problems = append(problems, fmt.Sprintf("%s: Tracing is %q, want Active", fn, got))
		}
		stmts, err := roleStatements(t, fn)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		granted := map[string]bool{}
		for _, st := range stmts {
			for _, a := range st.actions {
				granted[a] = true
			}
		}
		for _, a := range SortedIDs(traceActions) {
			if !granted[a] {
				problems = append(problems, fmt.Sprintf("%s: its role does not grant %s: with Tracing Active its segments would be refused", fn, a))
			}
		}
	}
	return problems.sorted()
}

// checkSendMail: mail sends in the SES sandbox too, and in a configuration
// set. The e-mail function's ses:SendEmail grant names every identity of
// the account (identity/*) with a ses:FromAddress condition naming
// MailFrom: in the sandbox SES also authorises each send against the
// recipient's verified identity, so a grant on the sender's identity alone
// is refused there with AccessDenied. A send in a configuration set is
// authorised against the set as well, so the grant names the set
// SesConfigurationSet names, or, when it names none, any set (the sender
// identity's default set, which the template cannot know).
func checkSendMail(t *Template) []string {
	stmts, err := roleStatements(t, "EmailFunction")
	if err != nil {
		return []string{err.Error()}
	}
	for _, st := range stmts {
		if !slices.Contains(st.actions, "ses:SendEmail") {
			continue
		}
		var problems findings
		from, _ := asMap(asMap(asMap(st.raw["Condition"])["StringEquals"])["ses:FromAddress"])["Ref"].(string)
		if from != "MailFrom" {
			problems.add("EmailFunction: ses:SendEmail must have the condition StringEquals ses:FromAddress !Ref MailFrom (has %q)", from)
		}
		for set, want := range map[string]string{"": "configuration-set/*", "tracking": "configuration-set/tracking"} {
			s, err := New(t, Options{Params: map[string]string{"SesConfigurationSet": set}})
			if err != nil {
				return []string{err.Error()}
			}
			got, err := s.resolveList(st.raw["Resource"])
			if err != nil {
				return []string{err.Error()}
			}
			ok := len(got) == 2
			for i, suffix := range []string{":identity/*", ":" + want} {
				ok = ok && strings.HasPrefix(got[i], "arn:") && strings.Contains(got[i], ":ses:") && strings.HasSuffix(got[i], suffix)
			}
			if !ok {
				problems.add("EmailFunction: with SesConfigurationSet %q, ses:SendEmail must be granted on identity/* and %s (has %v): "+
					"in the SES sandbox every recipient's identity is authorised too, and a send in a configuration set against the set", set, want, got)
			}
		}
		return problems.sorted()
	}
	return []string{"EmailFunction: no statement grants ses:SendEmail"}
}

// overridesRe matches one Name="value" of a parameter_overrides string.
var overridesRe = regexp.MustCompile(`(\w+)=\\"([^"\\]*)\\"`)

// TestSamconfigProdShowsWhatToFillIn reads samconfig.toml: the default and
// dev environments deploy as they are; prod as shipped is refused by the
// template's Rules (it still has the placeholders), and its commented
// parameter_overrides names every parameter a real account must set
// (prodMustSet: the Rules' outside dev, the SES rate, the users table, the
// first deploy's table protection), with <FILL-IN> values that the
// parameters' types and patterns refuse, so uncommenting it unedited fails
// too, and that line filled in deploys. Every environment deletes a stack
// whose first deploy failed (on_failure = "DELETE"), so the deploy can be
// run again as it is.
func TestSamconfigProdShowsWhatToFillIn(t *testing.T) {
	tmpl, root := loadTemplate(t)
	data, err := os.ReadFile(filepath.Join(root, "samconfig.toml"))
	if err != nil {
		t.Fatal(err)
	}
	section, active, commented, deletesFailedCreate := "", map[string]string{}, map[string]string{}, map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[]")
		}
		body, isComment := strings.CutPrefix(line, "#")
		if !isComment && strings.HasSuffix(section, ".deploy.parameters") && strings.ReplaceAll(line, " ", "") == `on_failure="DELETE"` {
			deletesFailedCreate[strings.TrimSuffix(section, ".deploy.parameters")] = true
		}
		if !strings.HasPrefix(strings.TrimSpace(body), "parameter_overrides") || !strings.HasSuffix(section, ".deploy.parameters") {
			continue
		}
		env := strings.TrimSuffix(section, ".deploy.parameters")
		if isComment {
			commented[env] = body
		} else {
			active[env] = body
		}
	}
	parse := func(s string) map[string]string {
		out := map[string]string{}
		for _, m := range overridesRe.FindAllStringSubmatch(s, -1) {
			out[m[1]] = m[2]
		}
		return out
	}
	for _, env := range []string{"default", "dev", "prod"} {
		if !deletesFailedCreate[env] {
			t.Errorf(`%s: deploy parameters lack on_failure = "DELETE": a first deploy that fails leaves a stack in ROLLBACK_COMPLETE, which no deploy can update`, env)
		}
		params := parse(active[env])
		if params["Stage"] == "" {
			t.Errorf("%s: parameter_overrides sets no Stage: %q", env, active[env])
			continue
		}
		got, err := ruleOutcome(tmpl, params)
		switch {
		case err != nil:
			t.Errorf("%s: %v", env, err)
		case env != "prod" && got != nil:
			t.Errorf("%s: refused by the Rules: %v", env, got)
		case env == "prod" && got == nil:
			t.Errorf("prod as shipped deploys with placeholders %v; want the Rules to refuse it", params)
		}
	}
	fill := parse(commented["prod"])
	for _, name := range append([]string{"Stage"}, prodMustSet(tmpl)...) {
		if _, ok := fill[name]; !ok {
			t.Errorf("prod's commented parameter_overrides does not name %s, which a real account must set: %q", name, commented["prod"])
		}
	}
	if fill["TableDeletionProtection"] != "false" {
		t.Errorf("prod's commented parameter_overrides (the first deploy) has TableDeletionProtection=%q; want false", fill["TableDeletionProtection"])
	}
	filled := map[string]string{}
	for name, v := range fill {
		filled[name] = v
		if v != placeholder {
			continue
		}
		p, ok := tmpl.Parameters[name]
		if !ok || (p.Type != "Number" && (p.AllowedPattern == "" || regexp.MustCompile(p.AllowedPattern).MatchString(v))) {
			t.Errorf("%s=%s would deploy: give the parameter an AllowedPattern (or a type) that refuses it", name, placeholder)
		}
		filled[name] = map[string]string{"SesMaxSendRate": "14", "UsersTableName": "app-users"}[name]
		if real, ok := realValues[name]; ok {
			filled[name] = real
		}
	}
	if got, err := ruleOutcome(tmpl, filled); err != nil || got != nil {
		t.Errorf("prod's commented parameter_overrides, filled in, is refused: %v %v", got, err)
	}
}

// placeholder is what samconfig.toml's prod line holds where a real
// account's value goes.
const placeholder = "<FILL-IN>"

// TestDeployDocsCoverTheTemplate keeps docs/deploy.md whole: every
// parameter has a row in its parameter table, every alarm one in its alarm
// table (and in docs/tour.md's), every rule one in its rules table, and the
// queue table states each queue's visibility timeout and retention as the
// template has them.
func TestDeployDocsCoverTheTemplate(t *testing.T) {
	tmpl, root := loadTemplate(t)
	data, err := os.ReadFile(filepath.Join(root, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	rows := func(section string) string {
		_, after, ok := strings.Cut(doc, "\n## "+section+"\n")
		if !ok {
			t.Fatalf("docs/deploy.md has no section %q", section)
		}
		body, _, _ := strings.Cut(after, "\n## ")
		return body
	}
	params, alarms, rules, queues := rows("Parameters"), rows("Alarms"), rows("What the template refuses"), rows("Queues and timings")
	for _, name := range SortedIDs(tmpl.Parameters) {
		if !strings.Contains(params, "| `"+name+"` |") {
			t.Errorf("parameter %s has no row in docs/deploy.md's parameter table", name)
		}
	}
	tour, err := os.ReadFile(filepath.Join(root, "docs", "tour.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tmpl.IDs(typeAlarm) {
		name := strings.Replace(subString(tmpl.Resources[id].Properties["AlarmName"]), "${AWS::StackName}", "<stack>", 1)
		if !strings.Contains(alarms, "`"+name+"`") {
			t.Errorf("alarm %s (%s) has no row in docs/deploy.md's alarm table", id, name)
		}
		if !strings.Contains(string(tour), "`"+name+"`") {
			t.Errorf("alarm %s (%s) is not in docs/tour.md's alarm table", id, name)
		}
	}
	for _, name := range SortedIDs(tmpl.Rules) {
		if !strings.Contains(rules, "| `"+name+"` |") {
			t.Errorf("rule %s has no row in docs/deploy.md", name)
		}
	}
	for _, id := range tmpl.IDs(TypeQueue) {
		p := tmpl.Resources[id].Properties
		name := strings.TrimPrefix(subString(p["QueueName"]), "${AWS::StackName}-")
		if name == "dlq" {
			name = "DLQ"
		}
		row := fmt.Sprintf("| %s | %d s | %d days |", name, num(p["VisibilityTimeout"]), int(retention(p).Hours()/24))
		if !strings.Contains(queues, row) {
			t.Errorf("queue %s: docs/deploy.md's queue table lacks %q", id, row)
		}
	}
}
