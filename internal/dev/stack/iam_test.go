package stack

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The IAM derivation: every AWS call in runstwice goes through a small
// interface in the consuming package that declares the SDK method with the
// SDK signature (e.g. dynamostore.API). deriveActions lists a function's
// in-module packages (go list -deps), parses them (no build) and collects
// the interface methods whose first non-context parameter is
// *<svc>.<Op>Input, for the services the function's own main package builds
// a client of (mains only wire adapters: a function that builds
// no SQS client cannot call SQS). TransactWriteItems is authorized per
// element (PutItem, UpdateItem, DeleteItem, ConditionCheckItem), so its
// actions come from the types.Put/Update/Delete/ConditionCheck literals in
// those packages; TransactGetItems likewise from types.Get.

const modulePath = "github.com/runstwice/runstwice"

const sdkService = "github.com/aws/aws-sdk-go-v2/service/"

// iamPrefix maps an SDK service package to its IAM action prefix.
var iamPrefix = map[string]string{"dynamodb": "dynamodb", "sqs": "sqs", "ssm": "ssm", "sesv2": "ses", "scheduler": "scheduler"}

// transactElement maps DynamoDB transaction element types to IAM actions.
var transactElement = map[string]string{
	"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem", "Delete": "dynamodb:DeleteItem",
	"ConditionCheck": "dynamodb:ConditionCheckItem", "Get": "dynamodb:GetItem",
}

// batchAction maps an SQS batch call to the IAM action that authorises it
// (there is no sqs:*Batch action).
var batchAction = map[string]string{
	"sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
	"sqs:DeleteMessageBatch":           "sqs:DeleteMessage",
	"sqs:SendMessageBatch":             "sqs:SendMessage",
}

// derived is the set of IAM actions a function's code can call, each with
// where it was found.
type derived map[string][]string

func (d derived) add(action, where string) {
	d[action] = append(d[action], where)
}

func deriveActions(root, fnDir string) (derived, error) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", "./"+fnDir)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps ./%s: %w: %s", fnDir, err, stderr.String())
	}
	mainPath := modulePath + "/" + fnDir
	type call struct{ svc, op, where string }
	var calls []call
	var literals []call
	clients := map[string]bool{}
	fset := token.NewFileSet()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[0], modulePath) {
			continue
		}
		pkg, dir := parts[0], parts[1]
		for _, name := range strings.Fields(parts[2]) {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			imports := map[string]string{} // local name → import path
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				local := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					local = imp.Name.Name
				}
				imports[local] = p
				// The clients a function makes: in its main, or in the
				// wiring its main calls.
				if (pkg == mainPath || pkg == modulePath+"/internal/wiring" || strings.HasPrefix(pkg, modulePath+"/internal/wiring/")) && strings.HasPrefix(p, sdkService) {
					clients[strings.TrimPrefix(p, sdkService)] = true
				}
			}
			where := strings.TrimPrefix(pkg, modulePath+"/")
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.InterfaceType:
					for _, m := range x.Methods.List {
						ft, ok := m.Type.(*ast.FuncType)
						if !ok || len(m.Names) == 0 {
							continue
						}
						if svc, op, ok := inputParam(ft, imports); ok {
							calls = append(calls, call{svc, op, where + "." + m.Names[0].Name})
						}
					}
				case *ast.CompositeLit:
					if sel, ok := x.Type.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && imports[id.Name] == sdkService+"dynamodb/types" {
							if _, ok := transactElement[sel.Sel.Name]; ok {
								literals = append(literals, call{"dynamodb", sel.Sel.Name, where})
							}
						}
					}
				}
				return true
			})
		}
	}
	d := derived{}
	transact := map[string]bool{}
	for _, c := range calls {
		if !clients[c.svc] {
			continue
		}
		switch {
		case c.svc == "dynamodb" && (c.op == "TransactWriteItems" || c.op == "TransactGetItems"):
			transact[c.op] = true
		default:
			action := iamPrefix[c.svc] + ":" + c.op
			if a, ok := batchAction[action]; ok {
				action = a
			}
			d.add(action, c.where)
		}
	}
	for _, l := range literals {
		write := l.op != "Get"
		if (write && transact["TransactWriteItems"]) || (!write && transact["TransactGetItems"]) {
			d.add(transactElement[l.op], l.where+" (transaction element types."+l.op+")")
		}
	}
	return d, nil
}

// inputParam finds the first non-context parameter and reports it when it is
// *<svc>.<Op>Input of a supported SDK service.
func inputParam(ft *ast.FuncType, imports map[string]string) (svc, op string, ok bool) {
	for _, field := range ft.Params.List {
		if sel, isSel := field.Type.(*ast.SelectorExpr); isSel && sel.Sel.Name == "Context" {
			continue
		}
		star, isStar := field.Type.(*ast.StarExpr)
		if !isStar {
			return "", "", false
		}
		sel, isSel := star.X.(*ast.SelectorExpr)
		if !isSel || !strings.HasSuffix(sel.Sel.Name, "Input") {
			return "", "", false
		}
		id, isID := sel.X.(*ast.Ident)
		if !isID {
			return "", "", false
		}
		path := imports[id.Name]
		svc = strings.TrimPrefix(path, sdkService)
		if _, known := iamPrefix[svc]; !known || !strings.HasPrefix(path, sdkService) {
			return "", "", false
		}
		return svc, strings.TrimSuffix(sel.Sel.Name, "Input"), true
	}
	return "", "", false
}

// runtimeActions are granted for the Lambda service, not called by the code:
// writing the function's logs, polling its SQS event sources, reading the
// DynamoDB streams of its stream event sources, sending a stream batch it
// gave up on to the event source's on-failure destination, and sending its
// X-Ray trace segments (Tracing: Active; X-Ray has no resource-level
// permissions, so these are the only actions granted on "*").
var (
	logActions    = map[string]bool{"logs:CreateLogStream": true, "logs:PutLogEvents": true}
	pollActions   = map[string]bool{"sqs:ReceiveMessage": true, "sqs:DeleteMessage": true, "sqs:GetQueueAttributes": true, "sqs:ChangeMessageVisibility": true}
	streamActions = map[string]bool{"dynamodb:DescribeStream": true, "dynamodb:GetRecords": true, "dynamodb:GetShardIterator": true, "dynamodb:ListStreams": true}
	traceActions  = map[string]bool{"xray:PutTraceSegments": true, "xray:PutTelemetryRecords": true}
)

// onFailureAction is how Lambda delivers a stream batch it gave up on to an
// SQS on-failure destination.
const onFailureAction = "sqs:SendMessage"

// streamWildcard reports whether st grants only stream actions on sub, the
// streams of one stream source table: "${<table>.Arn}/stream/*", the form
// AWS documents for dynamodb:ListStreams.
func streamWildcard(st statement, sub any, streams map[string]bool) bool {
	for _, a := range st.actions {
		if !streamActions[a] {
			return false
		}
	}
	s, _ := sub.(string)
	table, ok := strings.CutSuffix(strings.TrimPrefix(s, "${"), ".Arn}/stream/*")
	return ok && strings.HasPrefix(s, "${") && streams[table] && len(st.actions) > 0
}

// eventSources returns the logical ids function props' event sources name:
// the queues its SQS sources poll, the tables whose stream its DynamoDB
// sources read, and those sources' on-failure destinations.
func eventSources(props map[string]any) (queues, streams, destinations map[string]bool) {
	queues, streams, destinations = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, e := range asMap(props["Events"]) {
		ev := asMap(e)
		p := asMap(ev["Properties"])
		switch str(ev["Type"]) {
		case "SQS":
			refs(p["Queue"], queues)
		case "DynamoDB":
			if id := getAttID(p["Stream"], "StreamArn"); id != "" {
				streams[id] = true
			}
			refs(asMap(asMap(p["DestinationConfig"])["OnFailure"])["Destination"], destinations)
		}
	}
	return queues, streams, destinations
}

// scopedWildcards are the actions that may name a wildcard resource, each
// with the StringEquals condition key that must then pin the request to a
// parameter of the function's environment: SES authorises ses:SendEmail
// against the sender's identity and, while the account is in the SES
// sandbox, against every recipient's identity too, so the grant names every
// identity of the account for mail from the function's own sender only.
var scopedWildcards = map[string]string{"ses:SendEmail": "ses:FromAddress"}

// wildcardScoped reports whether every action of st is a scoped wildcard
// action whose condition names a parameter in envRefs.
func wildcardScoped(st statement, envRefs map[string]bool) bool {
	for _, a := range st.actions {
		key, ok := scopedWildcards[a]
		if !ok {
			return false
		}
		ref, _ := asMap(asMap(asMap(st.raw["Condition"])["StringEquals"])[key])["Ref"].(string)
		if ref == "" || !envRefs[ref] {
			return false
		}
	}
	return len(st.actions) > 0
}

// groupSchedules is the only wildcard resource a scheduler action may name:
// the schedules of one schedule group of the template.
var groupSchedules = regexp.MustCompile(`^arn:\$\{AWS::Partition\}:scheduler:\$\{AWS::Region\}:\$\{AWS::AccountId\}:schedule/\$\{([A-Za-z0-9]+)\}/\*$`)

// groupScoped reports whether every action of st is a scheduler action and
// sub names the schedules of a schedule group in envRefs (the group the
// function's code is told to use).
func groupScoped(t *Template, st statement, sub any, envRefs map[string]bool) bool {
	for _, a := range st.actions {
		if !strings.HasPrefix(a, "scheduler:") {
			return false
		}
	}
	s, _ := sub.(string)
	m := groupSchedules.FindStringSubmatch(s)
	return len(st.actions) > 0 && m != nil && envRefs[m[1]] && t.Resources[m[1]].Type == TypeScheduleGroup
}

// passRoleTo is the service a role may be passed to, by the action that
// passes it: creating a schedule hands the scheduler its role.
var passRoleTo = map[string]string{"scheduler:CreateSchedule": "scheduler.amazonaws.com"}

// onlyTraceActions reports whether every action of st is a trace action.
func onlyTraceActions(st statement) bool {
	for _, a := range st.actions {
		if !traceActions[a] {
			return false
		}
	}
	return len(st.actions) > 0
}

type statement struct {
	sid       string
	effect    string
	actions   []string
	resources []any
	raw       map[string]any
}

// roleStatements returns the inline policy statements of the role function
// fnID runs as (its Role must be !GetAtt <Role>.Arn of a role in the
// template).
func roleStatements(t *Template, fnID string) ([]statement, error) {
	props, err := t.FunctionProperties(fnID)
	if err != nil {
		return nil, err
	}
	if _, ok := props["Policies"]; ok {
		return nil, fmt.Errorf("%s uses SAM Policies; give it an explicit Role so every statement is reviewed here", fnID)
	}
	ga, _ := asMap(props["Role"])["Fn::GetAtt"].([]any)
	if len(ga) != 2 || str(ga[1]) != "Arn" {
		return nil, fmt.Errorf("%s: Role must be !GetAtt <role>.Arn", fnID)
	}
	role, ok := t.Resources[str(ga[0])]
	if !ok || role.Type != TypeRole {
		return nil, fmt.Errorf("%s: role %v is not an AWS::IAM::Role of the template", fnID, ga[0])
	}
	if len(list(role.Properties["ManagedPolicyArns"])) > 0 {
		return nil, fmt.Errorf("%s: role %v has managed policies (their statements use Resource *)", fnID, ga[0])
	}
	var out []statement
	for _, p := range list(role.Properties["Policies"]) {
		for _, s := range list(asMap(asMap(p)["PolicyDocument"])["Statement"]) {
			m := asMap(s)
			st := statement{sid: str(m["Sid"]), effect: str(m["Effect"]), raw: m}
			switch a := m["Action"].(type) {
			case string:
				st.actions = []string{a}
			case []any:
				st.actions = strs(a)
			}
			switch r := m["Resource"].(type) {
			case []any:
				st.resources = r
			case nil:
			default:
				st.resources = []any{r}
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// passRole checks an iam:PassRole grant: the code must call an action that
// passes a role, the grant must be conditioned on the service it passes the
// role to (iam:PassedToService), and it may only name roles of the
// function's environment, which it returns.
func passRole(t *Template, st statement, name string, calls derived, envRefs map[string]bool, bad func(string, ...any)) map[string]bool {
	var services []string
	for action, svc := range passRoleTo {
		if _, ok := calls[action]; ok {
			services = append(services, svc)
		}
	}
	if len(services) == 0 {
		bad("%s: grants iam:PassRole, but its code calls nothing that passes a role", name)
	}
	to := str(asMap(asMap(st.raw["Condition"])["StringEquals"])["iam:PassedToService"])
	if !slices.Contains(services, to) {
		bad("%s: iam:PassRole must have Condition StringEquals iam:PassedToService %v (has %q)", name, services, to)
	}
	roles := map[string]bool{}
	for r := range envRefs {
		if t.Resources[r].Type == TypeRole {
			roles[r] = true
		}
	}
	return roles
}

// refs collects the logical ids and parameters v refers to (Ref, GetAtt,
// names in Sub), without pseudo parameters.
func refs(v any, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		if r, ok := x["Ref"].(string); ok && len(x) == 1 {
			if !strings.HasPrefix(r, "AWS::") {
				into[r] = true
			}
			return
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok && len(x) == 1 && len(ga) == 2 {
			into[str(ga[0])] = true
			return
		}
		if sub, ok := x["Fn::Sub"]; ok && len(x) == 1 {
			tmpl, vars := "", map[string]any{}
			switch s := sub.(type) {
			case string:
				tmpl = s
			case []any:
				if len(s) == 2 {
					tmpl, vars = str(s[0]), asMap(s[1])
				}
			}
			for _, name := range SubNames(tmpl) {
				if _, isVar := vars[name]; isVar || strings.HasPrefix(name, "AWS::") {
					continue
				}
				res, _, _ := strings.Cut(name, ".")
				into[res] = true
			}
			for _, val := range vars {
				refs(val, into)
			}
			return
		}
		for _, e := range x {
			refs(e, into)
		}
	case []any:
		for _, e := range x {
			refs(e, into)
		}
	}
}

// checkPolicy reports every way function fnID's role grants more (or less)
// than its code calls. unused lists actions the derivation finds that the
// function deliberately does not get, with the reason.
func checkPolicy(t *Template, fnID string, calls derived, unused map[string]string) []string {
	var problems findings
	bad := func(format string, args ...any) { problems.add(fnID+": "+format, args...) }
	stmts, err := roleStatements(t, fnID)
	if err != nil {
		return []string{err.Error()}
	}
	props, _ := t.FunctionProperties(fnID)
	tracing := str(props["Tracing"]) == "Active"
	envRefs := map[string]bool{}
	refs(EnvironmentVariables(props), envRefs)
	ownLogs := map[string]bool{}
	if fnName, ok := asMap(props["FunctionName"])["Fn::Sub"].(string); ok {
		for _, id := range t.IDs(TypeLogGroup) {
			if lg, _ := asMap(t.Resources[id].Properties["LogGroupName"])["Fn::Sub"].(string); lg == "/aws/lambda/"+fnName {
				ownLogs[id] = true
			}
		}
	}
	sources, streams, destinations := eventSources(props)
	granted := map[string]bool{}
	for i, st := range stmts {
		name := st.sid
		if name == "" {
			name = fmt.Sprintf("statement %d", i)
		}
		if st.effect != "Allow" {
			bad("%s: Effect %q (only Allow statements are expected)", name, st.effect)
		}
		for _, k := range []string{"NotAction", "NotResource"} {
			if _, ok := st.raw[k]; ok {
				bad("%s: %s is not allowed", name, k)
			}
		}
		if len(st.actions) == 0 || len(st.resources) == 0 {
			bad("%s: no actions or no resources", name)
		}
		stRefs := map[string]bool{}
		for _, r := range st.resources {
			if s, ok := r.(string); ok {
				if s == "*" && tracing && onlyTraceActions(st) {
					continue
				}
				bad("%s: literal resource %q (name resources by !GetAtt or !Sub of the template's own names)", name, s)
				continue
			}
			if sub, ok := asMap(r)["Fn::Sub"]; ok && strings.Contains(fmt.Sprint(sub), "*") && !wildcardScoped(st, envRefs) &&
				!groupScoped(t, st, sub, envRefs) && !streamWildcard(st, sub, streams) {
				bad("%s: wildcard resource %v", name, sub)
			}
			refs(r, stRefs)
		}
		toDestinations := len(stRefs) > 0
		for r := range stRefs {
			toDestinations = toDestinations && destinations[r]
		}
		for _, a := range st.actions {
			var allowed map[string]bool
			switch {
			case strings.Contains(a, "*"):
				bad("%s: wildcard action %q", name, a)
				continue
			case logActions[a]:
				allowed = ownLogs
			case traceActions[a]:
				if !tracing {
					bad("%s: grants %s but the function has no Tracing: Active", name, a)
				}
			case pollActions[a] && len(sources) > 0:
				// The event source's, and the code's too where it calls one
				// (the e-mail worker's back-off changes visibility).
				granted[a] = true
				allowed = sources
			case a == "iam:PassRole":
				granted[a] = true
				allowed = passRole(t, st, name, calls, envRefs, bad)
			case streamActions[a] && len(streams) > 0:
				allowed = streams
			case a == onFailureAction && toDestinations:
				// The event source's, not the code's: it grants the code
				// nothing on the queues the code sends to.
				allowed = destinations
			default:
				granted[a] = true
				if _, ok := calls[a]; !ok {
					bad("%s: grants %s, which its code does not call", name, a)
				}
				allowed = envRefs
			}
			for r := range stRefs {
				if !allowed[r] {
					bad("%s: %s on %s, which is not among the resources it may use (%v)", name, a, r, SortedIDs(allowed))
				}
			}
		}
	}
	for a, where := range calls {
		_, skip := unused[a]
		if !granted[a] && !skip {
			bad("its code calls %s (%s) but no statement grants it", a, strings.Join(where, ", "))
		}
	}
	for a, why := range unused {
		if granted[a] {
			bad("%s is listed as not needed (%s) but is granted", a, why)
		}
		if _, ok := calls[a]; !ok {
			bad("%s is listed as not needed but the code no longer has it: drop it from the list", a)
		}
	}
	return problems.sorted()
}
