package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/message"
)

// findings collects what a check of the template finds.
type findings []string

// add records one finding.
func (f *findings) add(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

// sorted returns the findings in order.
func (f findings) sorted() []string {
	sort.Strings(f)
	return f
}

// wantFunctions is the fixed function contract: directory, logical id and
// the environment variables the function reads (STAGE and LOG_LEVEL come
// from Globals).
var wantFunctions = []struct {
	dir, id string
	env     []string
	// unused are actions the derivation finds in the function's packages
	// that the function never calls, so its role does not get them.
	unused map[string]string
}{
	{dir: "functions/enqueue", id: "EnqueueFunction", env: withQueues(true, contract.Queues,
		"IDEMPOTENCY_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "ALLOW_FEDERATED_USERS", "SCHEDULE_GROUP", "SCHEDULER_ROLE_ARN", "DLQ_ARN",
	), unused: map[string]string{
		"sqs:ChangeMessageVisibility": "sqsqueue.Visibility is the e-mail worker's back-off",
		"scheduler:GetSchedule":       "schedule.List is jobctl's and the local scheduler's, not the API's",
		"scheduler:ListSchedules":     "schedule.List is jobctl's and the local scheduler's, not the API's",
	}},
	{dir: "functions/email", id: "EmailFunction", env: withQueues(false, []message.Queue{contract.QueueCritical, contract.QueueDefault, contract.QueueBulk},
		"MARKERS_TABLE", "USERS_TABLE", "JOBS_TABLE", "DLQ_URL",
		"TOGGLE_TTL", "PARK_DELAY", "MAX_RECEIVE_COUNT", "MAIL_FROM", "APP_BASE_URL",
		"SES_MAX_SEND_RATE", "SES_CONFIGURATION_SET", "SCHEDULE_GROUP", "PARTNER_DIGEST_TIMEZONE",
	)},
	{dir: "functions/dlq", id: "DlqFunction", env: withQueues(false, contract.Queues,
		"DEAD_LETTERS_TABLE", "JOBS_TABLE", "MARKERS_TABLE",
	), unused: map[string]string{
		"dynamodb:Scan":               "deadletter.Store.List is jobctl's `dlq list`, not the consumer's",
		"dynamodb:DeleteItem":         "marker release is the e-mail worker's",
		"dynamodb:ConditionCheckItem": "a continuation's reservation is the enqueue path's, not the recorder's",
	}},
	{dir: "functions/outbox", id: "OutboxFunction", env: withQueues(true, contract.Queues,
		"IDEMPOTENCY_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "DEAD_LETTERS_TABLE", "SCHEDULE_GROUP", "SCHEDULER_ROLE_ARN", "DLQ_ARN",
	), unused: map[string]string{
		"dynamodb:Scan":               "deadletter.Store.List is jobctl's `dlq list`, not the relay's",
		"sqs:ChangeMessageVisibility": "sqsqueue.Visibility is the e-mail worker's back-off",
		"scheduler:GetSchedule":       "schedule.List is jobctl's and the local scheduler's, not the relay's",
		"scheduler:ListSchedules":     "schedule.List is jobctl's and the local scheduler's, not the relay's",
	}},
	{dir: "functions/webhook", id: "WebhookFunction", env: withQueues(false, []message.Queue{contract.QueueWebhooks},
		"MARKERS_TABLE", "JOBS_TABLE", "DLQ_URL", "TOGGLE_TTL", "PARK_DELAY", "MAX_RECEIVE_COUNT", "WEBHOOK_URL",
	), unused: map[string]string{
		"dynamodb:ConditionCheckItem": "a continuation's reservation is the enqueue path's, not the recorder's",
	}},
	{dir: "functions/chain", id: "ChainFunction", env: withQueues(true, contract.Queues,
		"IDEMPOTENCY_TABLE", "JOBS_TABLE", "MARKERS_TABLE", "DLQ_URL", "TOGGLE_TTL", "PARK_DELAY", "MAX_RECEIVE_COUNT",
		"SCHEDULE_GROUP", "SCHEDULER_ROLE_ARN", "DLQ_ARN",
	), unused: map[string]string{
		"scheduler:GetSchedule":   "schedule.List is jobctl's and the local scheduler's, not the chain function's",
		"scheduler:ListSchedules": "schedule.List is jobctl's and the local scheduler's, not the chain function's",
	}},
}

// withQueues is vars with QUEUE_URL_<Q> of every queue q, and with arns
// QUEUE_ARN_<Q> too: a function's environment without a list of queues.
func withQueues(arns bool, queues []message.Queue, vars ...string) []string {
	for _, q := range queues {
		vars = append(vars, envvar.QueueURLEnv(q))
		if arns {
			vars = append(vars, envvar.QueueARNEnv(q))
		}
	}
	return vars
}

// wantTables is the storage contract (docs/deploy.md, Data).
var wantTables = []struct {
	id, hash, rang string
	ttl            bool
	// stream is the table's StreamViewType ("" for no stream).
	stream string
}{
	{id: "IdempotencyTable", hash: "pk", ttl: true},
	{id: "JobsTable", hash: "pk", ttl: true},
	// The key internal/marker writes: the hash key holds
	// dynamostore.PartitionKey, one value per job, the range key the job id.
	{id: "MarkersTable", hash: dynamostore.AttrHandler, rang: dynamostore.AttrMessageKey, ttl: true, stream: "NEW_IMAGE"},
	{id: "DeadLettersTable", hash: "pk", ttl: true},
	{id: "UsersTable", hash: "userId"},
	{id: "OutboxTable", hash: "pk", ttl: true, stream: "NEW_IMAGE"},
}

var (
	tmplOnce sync.Once
	tmplData []byte
	tmplRoot string
	tmplErr  error
)

// loadTemplate parses a fresh copy of the checkout's template.yaml (tests
// may mutate it).
func loadTemplate(t *testing.T) (*Template, string) {
	t.Helper()
	tmplOnce.Do(func() {
		tmplRoot, tmplErr = testenv.RepoRoot()
		if tmplErr == nil {
			tmplData, tmplErr = os.ReadFile(filepath.Join(tmplRoot, "template.yaml"))
		}
	})
	if tmplErr != nil {
		t.Fatalf("read template.yaml: %v", tmplErr)
	}
	tmpl, err := Parse(tmplData)
	if err != nil {
		t.Fatalf("parse template.yaml: %v", err)
	}
	return tmpl, tmplRoot
}

func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

func num(v any) int {
	n, err := strconv.Atoi(scalarString(v))
	if err != nil {
		return -1
	}
	return n
}

// eventsOfType returns function fnID's event sources of type typ (SQS,
// DynamoDB), name → props.
func eventsOfType(t *Template, fnID, typ string) map[string]map[string]any {
	props, _ := t.FunctionProperties(fnID)
	out := map[string]map[string]any{}
	for name, e := range asMap(props["Events"]) {
		if ev := asMap(e); str(ev["Type"]) == typ {
			out[name] = asMap(ev["Properties"])
		}
	}
	return out
}

// sqsEvents returns function fnID's SQS event sources.
func sqsEvents(t *Template, fnID string) map[string]map[string]any {
	return eventsOfType(t, fnID, "SQS")
}

// checkFunctions: every function is Go on provided.al2023/arm64 built by
// SAM's go1.x builder, with its fixed environment, and its directory exists.
func checkFunctions(t *Template, root string) []string {
	var problems findings
	bad := problems.add
	for _, f := range wantFunctions {
		if _, err := os.Stat(filepath.Join(root, f.dir, "main.go")); err != nil {
			bad("%s: function directory missing: %v", f.dir, err)
		}
		id, ok := t.FunctionByCodeURI(f.dir)
		if !ok || id != f.id {
			bad("%s: no function %s with CodeUri %s/ in template.yaml (found %q)", f.dir, f.id, f.dir, id)
			continue
		}
		props, _ := t.FunctionProperties(id)
		for k, want := range map[string]string{"Runtime": "provided.al2023", "Handler": "bootstrap", "Architectures": "arm64"} {
			if got := scalarString(props[k]); got != want {
				bad("%s: %s is %q, want %q", id, k, got, want)
			}
		}
		if got := str(t.Resources[id].Metadata["BuildMethod"]); got != "go1.x" {
			bad("%s: Metadata.BuildMethod is %q, want go1.x", id, got)
		}
		if num(props["Timeout"]) <= 0 || num(props["MemorySize"]) <= 0 {
			bad("%s: Timeout and MemorySize must be set", id)
		}
		want := append([]string{"STAGE", "LOG_LEVEL", "OTEL_EXPORTER_OTLP_ENDPOINT"}, f.env...)
		got := SortedIDs(EnvironmentVariables(props))
		sort.Strings(want)
		if !slices.Equal(got, want) {
			bad("%s: environment %v, want %v", id, got, want)
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	for _, d := range dirs {
		rel, _ := filepath.Rel(root, filepath.Dir(d))
		if _, ok := t.FunctionByCodeURI(rel); !ok {
			bad("%s has no function in template.yaml", rel)
		}
	}
	return problems.sorted()
}

// checkQueues: SSE on every queue; a redrive policy to a queue of the
// template on every queue that is not itself a dead-letter target or a
// stream event source's on-failure destination (a person reads those); a
// visibility timeout of at least 6 × the timeout of each function consuming
// it plus that event source's batching window (AWS's rule for SQS event
// sources); ReportBatchItemFailures on every SQS event source.
func checkQueues(t *Template) []string {
	var problems findings
	bad := problems.add
	targets := map[string]bool{}
	for _, id := range t.IDs(TypeQueue) {
		if dl := getAttID(asMap(t.Resources[id].Properties["RedrivePolicy"])["deadLetterTargetArn"], "Arn"); dl != "" {
			targets[dl] = true
		}
	}
	consumers := map[string][]string{}
	for _, fn := range t.IDs(TypeFunction) {
		props, _ := t.FunctionProperties(fn)
		_, _, destinations := eventSources(props)
		for q := range destinations {
			targets[q] = true
		}
		for name, ev := range sqsEvents(t, fn) {
			q := getAttID(ev["Queue"], "Arn")
			if q == "" || t.Resources[q].Type != TypeQueue {
				bad("%s event %s: Queue must be !GetAtt <queue>.Arn of the template", fn, name)
				continue
			}
			consumers[q] = append(consumers[q], fn)
			if !slices.Contains(strs(ev["FunctionResponseTypes"]), "ReportBatchItemFailures") {
				bad("%s event %s: FunctionResponseTypes lacks ReportBatchItemFailures", fn, name)
			}
			if num(ev["BatchSize"]) < 1 {
				bad("%s event %s: BatchSize not set", fn, name)
			}
			if _, ok := ev["MaximumBatchingWindowInSeconds"]; !ok {
				bad("%s event %s: MaximumBatchingWindowInSeconds not set", fn, name)
			}
			if num(asMap(ev["ScalingConfig"])["MaximumConcurrency"]) < 2 {
				bad("%s event %s: ScalingConfig.MaximumConcurrency must be set (>= 2)", fn, name)
			}
			timeout, window := num(props["Timeout"]), num(ev["MaximumBatchingWindowInSeconds"])
			if vis := num(t.Resources[q].Properties["VisibilityTimeout"]); vis < 6*timeout+window {
				bad("%s: VisibilityTimeout %d < 6 × %s timeout %d + batching window %d", q, vis, fn, timeout, window)
			}
		}
	}
	for _, id := range t.IDs(TypeQueue) {
		p := t.Resources[id].Properties
		if !truthy(p["SqsManagedSseEnabled"]) && p["KmsMasterKeyId"] == nil {
			bad("%s: no SSE (SqsManagedSseEnabled or KmsMasterKeyId)", id)
		}
		if targets[id] {
			continue
		}
		rp := asMap(p["RedrivePolicy"])
		dl := getAttID(rp["deadLetterTargetArn"], "Arn")
		if dl == "" || t.Resources[dl].Type != TypeQueue {
			bad("%s: no RedrivePolicy to a dead-letter queue of the template", id)
		}
		if r, _ := asMap(rp["maxReceiveCount"])["Ref"].(string); r != "MaxReceiveCount" {
			bad("%s: RedrivePolicy.maxReceiveCount must be !Ref MaxReceiveCount", id)
		}
		if len(consumers[id]) == 0 {
			bad("%s: no function consumes it", id)
		}
	}
	if p := t.Parameters["MaxReceiveCount"]; p.Default != "5" {
		bad("parameter MaxReceiveCount default %q, want 5", p.Default)
	}
	return problems.sorted()
}

// checkSendRate: every send of the e-mail worker takes a slot of one
// schedule at the account's SES rate (SES_MAX_SEND_RATE, the SesMaxSendRate
// parameter), kept in the jobs table (JOBS_TABLE, where the role may
// UpdateItem), and shared by every invocation of every event source; no
// static share per invocation is left (EVENT_SOURCE_CONCURRENCY, which made
// a queue alone with work send at a fraction of the rate). Its sends go in
// the configuration set SesConfigurationSet names (SES_CONFIGURATION_SET).
func checkSendRate(t *Template) []string {
	var problems findings
	bad := problems.add
	const fn = "EmailFunction"
	props, err := t.FunctionProperties(fn)
	if err != nil {
		return []string{err.Error()}
	}
	env := EnvironmentVariables(props)
	for name, param := range map[string]string{"SES_MAX_SEND_RATE": "SesMaxSendRate", "SES_CONFIGURATION_SET": "SesConfigurationSet"} {
		used := map[string]bool{}
		refs(env[name], used)
		if !used[param] {
			bad("%s: %s must be !Ref %s", fn, name, param)
		}
		if _, ok := t.Parameters[param]; !ok {
			bad("parameter %s is missing", param)
		}
	}
	if r, _ := asMap(env["JOBS_TABLE"])["Ref"].(string); r != "JobsTable" {
		bad("%s: JOBS_TABLE must be !Ref JobsTable: the send schedule lives there", fn)
	}
	if _, ok := env["EVENT_SOURCE_CONCURRENCY"]; ok {
		bad("%s: EVENT_SOURCE_CONCURRENCY is a static share of the rate per invocation; the schedule shares it by the work waiting", fn)
	}
	stmts, err := roleStatements(t, fn)
	if err != nil {
		return append(problems, err.Error())
	}
	booked := false
	for _, st := range stmts {
		on := map[string]bool{}
		refs(st.raw["Resource"], on)
		booked = booked || (slices.Contains(st.actions, "dynamodb:UpdateItem") && on["JobsTable"])
	}
	if !booked {
		bad("%s: its role must grant dynamodb:UpdateItem on JobsTable (the send schedule)", fn)
	}
	return problems.sorted()
}

// checkTables: the five tables with their keys, on-demand, SSE, point-in-time
// recovery, TTL on expiresAt where the storage contract names it.
func checkTables(t *Template) []string {
	var problems findings
	bad := problems.add
	seen := map[string]bool{}
	for _, w := range wantTables {
		seen[w.id] = true
		r, ok := t.Resources[w.id]
		if !ok || r.Type != TypeTable {
			bad("%s: missing (want an %s)", w.id, TypeTable)
			continue
		}
		p := r.Properties
		if str(p["BillingMode"]) != "PAY_PER_REQUEST" {
			bad("%s: BillingMode %q, want PAY_PER_REQUEST", w.id, p["BillingMode"])
		}
		if !truthy(asMap(p["SSESpecification"])["SSEEnabled"]) {
			bad("%s: SSESpecification.SSEEnabled is not true", w.id)
		}
		if !truthy(asMap(p["PointInTimeRecoverySpecification"])["PointInTimeRecoveryEnabled"]) {
			bad("%s: point-in-time recovery is not enabled", w.id)
		}
		ttl := asMap(p["TimeToLiveSpecification"])
		if got := truthy(ttl["Enabled"]) && str(ttl["AttributeName"]) == "expiresAt"; got != w.ttl {
			bad("%s: TTL on expiresAt is %v, want %v", w.id, got, w.ttl)
		}
		if got := str(asMap(p["StreamSpecification"])["StreamViewType"]); got != w.stream {
			bad("%s: stream %q, want %q", w.id, got, w.stream)
		}
		keys := map[string]string{}
		for _, k := range list(p["KeySchema"]) {
			keys[str(asMap(k)["KeyType"])] = str(asMap(k)["AttributeName"])
		}
		if keys["HASH"] != w.hash || keys["RANGE"] != w.rang {
			bad("%s: keys %v, want hash %q range %q", w.id, keys, w.hash, w.rang)
		}
		// Every key is a string but the jobs index's range key, createdAt,
		// the record's epoch milliseconds.
		for _, a := range list(p["AttributeDefinitions"]) {
			want := "S"
			if w.id == "JobsTable" && str(asMap(a)["AttributeName"]) == "createdAt" {
				want = "N"
			}
			if got := str(asMap(a)["AttributeType"]); got != want {
				bad("%s: attribute %v is of type %s, want %s", w.id, asMap(a)["AttributeName"], got, want)
			}
		}
		if w.id == "JobsTable" {
			problems = append(problems, checkCallerIndex(p)...)
		}
	}
	for _, id := range t.IDs(TypeTable) {
		if !seen[id] {
			bad("%s: a table the storage contract does not name (add it to wantTables)", id)
		}
	}
	return problems.sorted()
}

// checkCallerIndex: the jobs table's index of GET /v1/jobs, byCaller,
// with hash key caller, range key createdAt and every attribute projected
// (the list reads the records from the index alone).
func checkCallerIndex(p map[string]any) []string {
	for _, g := range list(p["GlobalSecondaryIndexes"]) {
		m := asMap(g)
		if str(m["IndexName"]) != "byCaller" {
			continue
		}
		keys := map[string]string{}
		for _, k := range list(m["KeySchema"]) {
			keys[str(asMap(k)["KeyType"])] = str(asMap(k)["AttributeName"])
		}
		if keys["HASH"] != "caller" || keys["RANGE"] != "createdAt" || str(asMap(m["Projection"])["ProjectionType"]) != "ALL" {
			return []string{fmt.Sprintf("JobsTable: index byCaller has keys %v and projection %v; want hash caller, range createdAt, ALL", keys, m["Projection"])}
		}
		return nil
	}
	return []string{"JobsTable: no index byCaller (GET /v1/jobs queries it)"}
}

// checkToggles: one parameter, value false, per fail-closed registered type,
// and none for a type the registry does not know. Every switch parameter of
// the template holds false: a deploy that changes one writes its value over
// an operator's flip (docs/deploy.md, Switches across deploys), which may
// stop a type, never start one.
func checkToggles(t *Template) []string {
	var problems findings
	bad := problems.add
	const prefix = "/runstwice/${Stage}/toggles/"
	have := map[string]string{}
	for _, id := range t.IDs(TypeParameter) {
		p := t.Resources[id].Properties
		name, _ := asMap(p["Name"])["Fn::Sub"].(string)
		if typ, ok := strings.CutPrefix(name, prefix); ok {
			have[typ] = scalarString(p["Value"])
		}
	}
	reg := contract.Registry()
	for _, name := range reg.Names() {
		jt, _ := reg.Lookup(name)
		if jt.EnabledByDefault {
			continue
		}
		if v, ok := have[name]; !ok || v != "false" {
			bad("fail-closed type %s: want an %s named %s%s with value false (have %q)", name, TypeParameter, prefix, name, v)
		}
	}
	for typ := range have {
		if _, err := reg.Lookup(typ); err != nil {
			bad("toggle parameter for unregistered type %q", typ)
		}
		if v := have[typ]; v != "false" {
			bad("toggle parameter for %s holds %q: a deploy that changes it would switch the type on over an operator's off; want false", typ, v)
		}
	}
	return problems.sorted()
}

// checkAlarms: the alarms docs/deploy.md lists, each notifying the alarm
// topic.
func checkAlarms(t *Template) []string {
	var problems findings
	found := map[string]bool{}
	for _, id := range t.IDs("AWS::CloudWatch::Alarm") {
		p := t.Resources[id].Properties
		actions := list(p["AlarmActions"])
		if len(actions) == 0 || asMap(actions[0])["Ref"] != "AlarmTopic" {
			problems = append(problems, id+": AlarmActions must notify !Ref AlarmTopic")
		}
		queue := ""
		for _, d := range list(p["Dimensions"]) {
			if str(asMap(d)["Name"]) == "QueueName" {
				queue = getAttID(asMap(d)["Value"], "QueueName")
			}
		}
		key := str(p["MetricName"]) + "@" + queue
		for _, m := range list(p["Metrics"]) {
			if e := subString(asMap(m)["Expression"]); strings.Contains(e, "DeadLetters") {
				key = "DeadLetters"
			}
		}
		found[key] = true
	}
	for _, want := range []string{
		"NumberOfMessagesReceived@DeadLetterQueue", "ApproximateAgeOfOldestMessage@DeadLetterQueue", "DeadLetters",
		"ApproximateAgeOfOldestMessage@CriticalQueue", "ApproximateAgeOfOldestMessage@DefaultQueue",
		"ApproximateAgeOfOldestMessage@BulkQueue", "5xx@",
		"IteratorAge@", "ApproximateNumberOfMessagesVisible@OutboxFailureQueue",
	} {
		if !found[want] {
			problems = append(problems, "missing alarm on "+want)
		}
	}
	if _, ok := t.Resources["AlarmTopic"]; !ok {
		problems = append(problems, "missing AlarmTopic")
	}
	return problems.sorted()
}

var (
	deriveMu    sync.Mutex
	deriveCache = map[string]derived{}
)

func derive(t *testing.T, root, dir string) derived {
	t.Helper()
	deriveMu.Lock()
	defer deriveMu.Unlock()
	if d, ok := deriveCache[dir]; ok {
		return d
	}
	d, err := deriveActions(root, dir)
	if err != nil {
		t.Fatalf("derive the AWS actions of %s: %v", dir, err)
	}
	deriveCache[dir] = d
	return d
}

// One test per template check, so that a failing check names itself
// (docs/job-types.md names TestTemplateToggles): these tests share their form.
func TestTemplateFunctions(t *testing.T) {
	tmpl, root := loadTemplate(t)
	report(t, checkFunctions(tmpl, root))
}

func TestTemplateQueuesAndEventSources(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkQueues(tmpl))
}

func TestTemplateSendRate(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkSendRate(tmpl))
}

func TestTemplateTables(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkTables(tmpl))
}

func TestTemplateToggles(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkToggles(tmpl))
}

func TestTemplateAlarms(t *testing.T) {
	tmpl, _ := loadTemplate(t)
	report(t, checkAlarms(tmpl))
}

// TestFunctionPolicies checks each function's role against the AWS calls its
// code makes. It fails for a function directory that does not exist.
func TestFunctionPolicies(t *testing.T) {
	tmpl, root := loadTemplate(t)
	for _, f := range wantFunctions {
		t.Run(f.id, func(t *testing.T) {
			if _, err := os.Stat(filepath.Join(root, f.dir, "main.go")); err != nil {
				t.Fatalf("%s: %v", f.dir, err)
			}
			calls := derive(t, root, f.dir)
			if len(calls) == 0 {
				t.Fatalf("%s: derived no AWS action at all; the derivation is broken", f.dir)
			}
			t.Logf("%s calls %v", f.dir, SortedIDs(calls))
			report(t, checkPolicy(tmpl, f.id, calls, f.unused))
		})
	}
}

// TestChecksCatchMistakes proves each check fails on a template with the
// mistake it is there to catch.
func TestChecksCatchMistakes(t *testing.T) {
	_, root := loadTemplate(t)
	email, dlq := wantFunctions[1], wantFunctions[2]
	policy := func(t *testing.T, tmpl *Template) []string {
		return checkPolicy(tmpl, email.id, derive(t, root, email.dir), email.unused)
	}
	dlqPolicy := func(t *testing.T, tmpl *Template) []string {
		return checkPolicy(tmpl, dlq.id, derive(t, root, dlq.dir), dlq.unused)
	}
	queues := func(_ *testing.T, tmpl *Template) []string { return checkQueues(tmpl) }
	tables := func(_ *testing.T, tmpl *Template) []string { return checkTables(tmpl) }
	sendRate := func(_ *testing.T, tmpl *Template) []string { return checkSendRate(tmpl) }
	toggles := func(_ *testing.T, tmpl *Template) []string { return checkToggles(tmpl) }
	stmt := func(tmpl *Template, role, sid string) map[string]any {
		for _, p := range list(tmpl.Resources[role].Properties["Policies"]) {
			for _, s := range list(asMap(asMap(p)["PolicyDocument"])["Statement"]) {
				if str(asMap(s)["Sid"]) == sid {
					return asMap(s)
				}
			}
		}
		t.Fatalf("no statement %s in %s", sid, role)
		return nil
	}
	catchesMistakes(t, []mutation{
		{"action the code does not call", policy, func(tm *Template) {
			s := stmt(tm, "EmailFunctionRole", "Users")
			s["Action"] = append(list(s["Action"]), "dynamodb:DeleteTable")
		}, "dynamodb:DeleteTable, which its code does not call"},
		{"Scan on a table it only reads", policy, func(tm *Template) {
			s := stmt(tm, "EmailFunctionRole", "Users")
			s["Action"] = append(list(s["Action"]), "dynamodb:Scan")
		}, "grants dynamodb:Scan, which its code does not call"},
		{"an action the code has but the function must not use", dlqPolicy, func(tm *Template) {
			s := stmt(tm, "DlqFunctionRole", "DeadLetters")
			s["Action"] = append(list(s["Action"]), "dynamodb:Scan")
		}, "listed as not needed"},
		{"wildcard action", policy, func(tm *Template) {
			s := stmt(tm, "EmailFunctionRole", "Users")
			s["Action"] = append(list(s["Action"]), "dynamodb:*")
		}, "wildcard action"},
		{"resource *", policy, func(tm *Template) { stmt(tm, "EmailFunctionRole", "Users")["Resource"] = "*" }, `literal resource "*"`},
		{"resource it does not use", policy, func(tm *Template) {
			stmt(tm, "EmailFunctionRole", "Users")["Resource"] = map[string]any{"Fn::GetAtt": []any{"IdempotencyTable", "Arn"}}
		}, "on IdempotencyTable, which is not among"},
		{"called action not granted", policy, func(tm *Template) {
			stmt(tm, "EmailFunctionRole", "KillSwitches")["Action"] = []any{}
		}, "calls ssm:GetParametersByPath"},
		{"poll a queue that is no event source", policy, func(tm *Template) {
			s := stmt(tm, "EmailFunctionRole", "PollWorkQueues")
			s["Resource"] = append(list(s["Resource"]), map[string]any{"Fn::GetAtt": []any{"DeadLetterQueue", "Arn"}})
		}, "sqs:ReceiveMessage on DeadLetterQueue"},
		{"queue without redrive", queues, func(tm *Template) { delete(tm.Resources["BulkQueue"].Properties, "RedrivePolicy") }, "BulkQueue: no RedrivePolicy"},
		{"queue without SSE", queues, func(tm *Template) { delete(tm.Resources["DefaultQueue"].Properties, "SqsManagedSseEnabled") }, "DefaultQueue: no SSE"},
		{"a static share of the rate again", sendRate, func(tm *Template) {
			EnvironmentVariables(tm.Resources["EmailFunction"].Properties)["EVENT_SOURCE_CONCURRENCY"] = "18"
		}, "EVENT_SOURCE_CONCURRENCY is a static share"},
		{"configuration set not passed", sendRate, func(tm *Template) {
			delete(EnvironmentVariables(tm.Resources["EmailFunction"].Properties), "SES_CONFIGURATION_SET")
		}, "SES_CONFIGURATION_SET must be !Ref SesConfigurationSet"},
		{"send rate not the parameter", sendRate, func(tm *Template) {
			EnvironmentVariables(tm.Resources["EmailFunction"].Properties)["SES_MAX_SEND_RATE"] = "14"
		}, "SES_MAX_SEND_RATE must be !Ref SesMaxSendRate"},
		{"visibility below 6x timeout", queues, func(tm *Template) { tm.Resources["CriticalQueue"].Properties["VisibilityTimeout"] = 100 }, "VisibilityTimeout 100 < 6"},
		{"no ReportBatchItemFailures", queues, func(tm *Template) {
			ev := asMap(asMap(asMap(tm.Resources["EmailFunction"].Properties["Events"])["Bulk"])["Properties"])
			delete(ev, "FunctionResponseTypes")
		}, "lacks ReportBatchItemFailures"},
		{"table without SSE", tables, func(tm *Template) { delete(tm.Resources["JobsTable"].Properties, "SSESpecification") }, "JobsTable: SSESpecification"},
		{"table without PITR", tables, func(tm *Template) {
			delete(tm.Resources["MarkersTable"].Properties, "PointInTimeRecoverySpecification")
		}, "MarkersTable: point-in-time recovery"},
		{"fail-closed type without toggle", toggles, func(tm *Template) { delete(tm.Resources, "PartnerDigestToggle") }, "fail-closed type email.partner-digest.v1"},
		{"a switch parameter that holds true", toggles, func(tm *Template) {
			tm.Resources["WelcomeToggle"] = Resource{Type: TypeParameter, Properties: map[string]any{
				"Name": map[string]any{"Fn::Sub": "/runstwice/${Stage}/toggles/email.welcome.v1"}, "Type": "String", "Value": "true"}}
		}, `email.welcome.v1 holds "true"`},
	})
}

// mutation is one mistake a check must catch: mutate a fresh copy of the
// template, and check must report a problem containing want.
type mutation struct {
	name   string
	check  func(*testing.T, *Template) []string
	mutate func(*Template)
	want   string
}

// catchesMistakes runs each mutation: the check passes on the unchanged
// template and reports the mistake on the mutated one.
func catchesMistakes(t *testing.T, tests []mutation) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, _ := loadTemplate(t)
			if got := tc.check(t, tmpl); len(got) != 0 {
				t.Fatalf("the unchanged template already has problems: %v", got)
			}
			tc.mutate(tmpl)
			got := tc.check(t, tmpl)
			for _, p := range got {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("want a problem containing %q, got %v", tc.want, got)
		})
	}
}
