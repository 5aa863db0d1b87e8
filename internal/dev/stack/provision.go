package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// Defaults of Options.
const (
	DefaultStackName = "runstwice-local"
	DefaultStage     = "local"
	DefaultRegion    = "us-east-1"
	// DefaultAccountID is moto's account.
	DefaultAccountID = "123456789012"
)

// Options say how to instantiate the template.
type Options struct {
	// StackName is AWS::StackName (DefaultStackName if empty). Give each test
	// its own to keep its tables and queues apart on a shared endpoint.
	StackName string
	// Params override parameter defaults; Stage defaults to "local".
	Params map[string]string
	// Region and AccountID are AWS::Region and AWS::AccountId.
	Region, AccountID string
}

// Physical is a resource the stack created.
type Physical struct {
	// Type is the CloudFormation type, e.g. AWS::SQS::Queue.
	Type string `json:"type"`
	// Name is the table, queue or parameter name.
	Name string `json:"name"`
	// URL is the queue URL (queues only).
	URL string `json:"url,omitempty"`
	// ARN is the resource ARN (tables, queues).
	ARN string `json:"arn,omitempty"`
	// StreamARN is the ARN of a table's stream (tables with a
	// StreamSpecification only).
	StreamARN string `json:"streamArn,omitempty"`
	// Value is the parameter's value (parameters only).
	Value string `json:"value,omitempty"`
}

// DynamoAPI is the part of the DynamoDB client the provisioner uses. The
// provisioner's client interfaces have the form of the stores' on purpose:
// each consumer declares the SDK methods it calls.
type DynamoAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	UpdateContinuousBackups(ctx context.Context, in *dynamodb.UpdateContinuousBackupsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateContinuousBackupsOutput, error)
}

// SQSAPI is the part of the SQS client the provisioner uses.
type SQSAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// SSMAPI is the part of the SSM client the provisioner uses.
type SSMAPI interface {
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// SchedulerAPI is the part of the EventBridge Scheduler client the
// provisioner uses.
type SchedulerAPI interface {
	GetScheduleGroup(ctx context.Context, in *scheduler.GetScheduleGroupInput, optFns ...func(*scheduler.Options)) (*scheduler.GetScheduleGroupOutput, error)
	CreateScheduleGroup(ctx context.Context, in *scheduler.CreateScheduleGroupInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleGroupOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, optFns ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
}

// Clients are the AWS clients Provision uses. Without a Scheduler the
// schedule groups and schedules are skipped.
type Clients struct {
	Dynamo    DynamoAPI
	SQS       SQSAPI
	SSM       SSMAPI
	Scheduler SchedulerAPI
}

// NewClients builds the clients from an SDK configuration (e.g.
// moto.Config(endpoint, region) for moto).
func NewClients(cfg aws.Config) Clients {
	return Clients{Dynamo: dynamodb.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg),
		Scheduler: scheduler.NewFromConfig(cfg)}
}

// Stack is a template instantiated with parameter values: what Provision
// created, and the resolver of intrinsic functions against it.
type Stack struct {
	tmpl    *Template
	opts    Options
	params  map[string]string
	clients Clients
	ctx     context.Context
	created map[string]Physical
	busy    map[string]bool
	// conds are the template's conditions, evaluated by New.
	conds map[string]bool
}

// New instantiates t with opts without touching any endpoint: resolving a
// reference to a table, queue or parameter then fails with
// ErrNotProvisioned. Like CloudFormation, it evaluates every condition, and
// refuses parameters that fail the template's Rules (a *RulesError).
// Provision is New plus creating the resources.
func New(t *Template, opts Options) (*Stack, error) {
	if opts.StackName == "" {
		opts.StackName = DefaultStackName
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.AccountID == "" {
		opts.AccountID = DefaultAccountID
	}
	params := map[string]string{}
	for name, p := range t.Parameters {
		if p.HasDefault {
			params[name] = p.Default
		}
	}
	if _, ok := t.Parameters["Stage"]; ok {
		params["Stage"] = DefaultStage
	}
	for k, v := range opts.Params {
		if _, ok := t.Parameters[k]; !ok {
			return nil, fmt.Errorf("stack: parameter %s is not in the template", k)
		}
		params[k] = v
	}
	s := &Stack{tmpl: t, opts: opts, params: params, created: map[string]Physical{}, busy: map[string]bool{}}
	conds, err := s.evalConditions()
	if err != nil {
		return nil, err
	}
	s.conds = conds
	if err := s.CheckRules(); err != nil {
		return nil, err
	}
	return s, nil
}

// Provision creates every DynamoDB table, SQS queue, SSM parameter and
// EventBridge Scheduler schedule group and schedule of t (whose condition
// holds) through clients, resolving names, keys, TTL, point-in-time
// recovery, queue attributes, redrive policies and schedule targets from the
// template. Resources that already exist are reused (a table, queue or
// schedule group of the same name; a parameter keeps its stored value; a
// schedule is updated to the template's), so provisioning twice is
// harmless. Every other resource type the local stack emulates (functions,
// the API) is run by the local stack, and every type it knowingly leaves out
// (NotEmulated: alarms, keys, topics, log groups) is skipped; resolving a
// reference to one fails with ErrNotProvisioned, but a role's Arn (a
// schedule's RoleArn) resolves to the ARN it would have. A template with a
// resource of any other type is refused (CheckScope).
func Provision(ctx context.Context, clients Clients, t *Template, opts Options) (*Stack, error) {
	if err := CheckScope(t); err != nil {
		return nil, err
	}
	s, err := New(t, opts)
	if err != nil {
		return nil, err
	}
	s.clients, s.ctx = clients, ctx
	defer func() { s.ctx = nil }()
	for _, typ := range ProvisionedTypes {
		if clients.Scheduler == nil && (typ == TypeScheduleGroup || typ == TypeSchedule) {
			continue
		}
		for _, id := range t.IDs(typ) {
			if _, err := s.ensure(id); err != nil && !errors.Is(err, errConditionFalse) {
				return nil, err
			}
		}
	}
	return s, nil
}

// ProvisionedTypes are the resource types Provision creates (or, for roles,
// names), in order.
var ProvisionedTypes = []string{TypeQueue, TypeTable, TypeParameter, TypeScheduleGroup, TypeRole, TypeSchedule}

var errConditionFalse = errors.New("stack: resource condition is false")

// Template returns the template the stack instantiates.
func (s *Stack) Template() *Template { return s.tmpl }

// Param returns the value of template parameter name.
func (s *Stack) Param(name string) string { return s.params[name] }

// StackName returns AWS::StackName.
func (s *Stack) StackName() string { return s.opts.StackName }

// Resources returns what was created, by logical id.
func (s *Stack) Resources() map[string]Physical {
	out := make(map[string]Physical, len(s.created))
	for k, v := range s.created {
		out[k] = v
	}
	return out
}

// Physical returns the created resource with logical id id.
func (s *Stack) Physical(id string) (Physical, bool) {
	p, ok := s.created[id]
	return p, ok
}

// Refs returns logical id → what !Ref gives for every created resource: the
// table or parameter name, the queue URL (what .devstack/resources.json
// holds).
func (s *Stack) Refs() map[string]string {
	out := make(map[string]string, len(s.created))
	for id, p := range s.created {
		if p.Type == TypeQueue {
			out[id] = p.URL
		} else {
			out[id] = p.Name
		}
	}
	return out
}

// MarshalJSON writes Refs.
func (s *Stack) MarshalJSON() ([]byte, error) { return json.Marshal(s.Refs()) }

// FunctionEnv returns the resolved environment variables of function id,
// Globals included: what the function gets when deployed, with this stack's
// table names and queue URLs.
func (s *Stack) FunctionEnv(id string) (map[string]string, error) {
	props, err := s.tmpl.FunctionProperties(id)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, v := range EnvironmentVariables(props) {
		r, err := s.Resolve(v)
		if err != nil {
			return nil, fmt.Errorf("stack: %s env %s: %w", id, name, err)
		}
		if r != nil {
			out[name] = scalarString(r)
		}
	}
	return out, nil
}

// FunctionTimeout returns function id's timeout in seconds (Globals
// included; 3 when unset, Lambda's default).
func (s *Stack) FunctionTimeout(id string) (int, error) {
	props, err := s.tmpl.FunctionProperties(id)
	if err != nil {
		return 0, err
	}
	v, ok := props["Timeout"]
	if !ok {
		return 3, nil
	}
	txt, err := s.ResolveString(v)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(txt)
	if err != nil {
		return 0, fmt.Errorf("stack: %s Timeout %q: %w", id, txt, err)
	}
	return n, nil
}

// ensure returns the physical resource id, creating it first when the stack
// is provisioning.
func (s *Stack) ensure(id string) (Physical, error) {
	if p, ok := s.created[id]; ok {
		return p, nil
	}
	r, ok := s.tmpl.Resources[id]
	if !ok {
		return Physical{}, fmt.Errorf("stack: no resource or parameter %q in the template", id)
	}
	if s.ctx == nil {
		return Physical{}, fmt.Errorf("%w: %s (%s)", ErrNotProvisioned, id, r.Type)
	}
	if r.Condition != "" {
		ok, err := s.condition(r.Condition)
		if err != nil {
			return Physical{}, err
		}
		if !ok {
			return Physical{}, fmt.Errorf("%w: %s", errConditionFalse, id)
		}
	}
	if s.busy[id] {
		return Physical{}, fmt.Errorf("stack: %s refers to itself", id)
	}
	s.busy[id] = true
	defer delete(s.busy, id)
	if r.Type == TypeRole {
		// Only its name is resolved: its policies name what the local
		// stack does not emulate (log groups), and are not enforced.
		p, err := s.role(id, r.Properties["RoleName"])
		if err != nil {
			return Physical{}, fmt.Errorf("stack: %s: %w", id, err)
		}
		s.created[id] = p
		return p, nil
	}
	props, err := s.Resolve(r.Properties)
	if err != nil {
		return Physical{}, fmt.Errorf("stack: %s: %w", id, err)
	}
	pm := asMap(props)
	var p Physical
	switch r.Type {
	case TypeTable:
		p, err = s.createTable(id, pm)
	case TypeQueue:
		p, err = s.createQueue(id, pm)
	case TypeParameter:
		p, err = s.putParameter(id, pm)
	case TypeScheduleGroup:
		p, err = s.createScheduleGroup(id, pm)
	case TypeSchedule:
		p, err = s.createSchedule(id, pm)
	default:
		return Physical{}, fmt.Errorf("%w: %s (%s)", ErrNotProvisioned, id, r.Type)
	}
	if err != nil {
		return Physical{}, fmt.Errorf("stack: create %s: %w", id, err)
	}
	p.Type = r.Type
	s.created[id] = p
	return p, nil
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func strs(v any) []string {
	var out []string
	for _, e := range list(v) {
		out = append(out, scalarString(e))
	}
	return out
}

func truthy(v any) bool {
	b, err := strconv.ParseBool(scalarString(v))
	return err == nil && b
}

func atoi(v any) int {
	n, _ := strconv.Atoi(scalarString(v))
	return n
}

// SortedIDs returns the keys of m, sorted.
func SortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
