package webview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/deadletter"
	"github.com/runstwice/runstwice/internal/dev/stack"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/operate"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/switchview"
	"github.com/runstwice/runstwice/message"
)

// FromStack returns the AWS-backed sources of a provisioned stack: its
// JobsTable, MarkersTable and DeadLettersTable, the switches of its Stage
// for every shipped type (internal/contract), and its schedules. mail is
// the mail log (nil: none; a nil pointer inside a non-nil interface is not
// nil).
func FromStack(cfg aws.Config, st *stack.Stack, mail MailLog) (Sources, error) {
	names := map[string]string{}
	for _, id := range []string{"JobsTable", "MarkersTable", "DeadLettersTable"} {
		p, ok := st.Physical(id)
		if !ok {
			return Sources{}, fmt.Errorf("webview: the stack has no %s", id)
		}
		names[id] = p.Name
	}
	db := dynamodb.NewFromConfig(cfg)
	table := NewJobsTable(db, names["JobsTable"], names["MarkersTable"])
	queues := map[message.Queue]string{}
	for _, q := range contract.Queues {
		if p, ok := st.Physical(strings.ToUpper(string(q[:1])) + string(q[1:]) + "Queue"); ok {
			queues[q] = p.URL
		}
	}
	op := operate.New(cfg, operate.Stack{Stage: st.Param("Stage"), JobsTable: names["JobsTable"], MarkersTable: names["MarkersTable"],
		DeadLettersTable: names["DeadLettersTable"], Queues: queues}, contract.Registry())
	return Sources{
		Jobs:        table,
		Job:         table,
		Operator:    StackOperator{Operator: op},
		Mail:        mail,
		DeadLetters: NewDeadLettersTable(db, names["DeadLettersTable"], marker.NewStore(db, names["MarkersTable"])),
		Switches:    NewSSMSwitches(ssm.NewFromConfig(cfg), st.Param("Stage"), contract.Registry()),
		Schedules:   NewSchedules(scheduler.NewFromConfig(cfg), st.Param("Stage")),
	}, nil
}

// Schedules lists a stage's schedules from EventBridge Scheduler (moto's,
// locally): its recurring group and its jobs group.
type Schedules struct {
	client schedule.ListAPI
	stage  string
	// Now is the clock (time.Now if nil).
	Now func() time.Time
}

// NewSchedules returns the lister of stage's schedules.
func NewSchedules(client schedule.ListAPI, stage string) *Schedules {
	return &Schedules{client: client, stage: stage}
}

// List reads the schedules with when each fires next.
func (s *Schedules) List(ctx context.Context) ([]Schedule, error) {
	all, err := schedule.List(ctx, s.client, schedule.RecurringGroup(s.stage), schedule.JobsGroup(s.stage))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	out := make([]Schedule, 0, len(all))
	for _, sc := range all {
		row := Schedule{Group: sc.Group, Name: sc.Name, Expression: sc.Expression, Timezone: sc.Timezone, State: sc.State, Type: sc.JobType, Tick: sc.Tick}
		if next, ok := sc.Next(now); ok {
			row.Next = next
		}
		out = append(out, row)
	}
	return out, nil
}

// JobsDynamoAPI is the part of the DynamoDB client JobsTable uses.
type JobsDynamoAPI interface {
	jobs.DynamoAPI
	dynamostore.API
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// JobsTable lists jobs from the jobs table: a Scan for the job records
// (fine for a local stack, never for a production table), then each of the
// newest through jobs.Store.Get, which derives its state from its marker.
type JobsTable struct {
	client JobsDynamoAPI
	table  string
	store  *jobs.Store
}

// NewJobsTable returns the lister of jobsTable, whose markers are in
// markersTable.
func NewJobsTable(client JobsDynamoAPI, jobsTable, markersTable string) *JobsTable {
	return &JobsTable{client: client, table: jobsTable, store: jobs.NewStore(client, jobsTable, marker.NewStore(client, markersTable))}
}

// deriveConcurrency bounds the parallel Gets of Recent.
const deriveConcurrency = 4

// Recent returns the n newest jobs (by creation time) with their derived
// states. A record whose state cannot be derived is listed with its stored
// state and the error as its reason.
func (t *JobsTable) Recent(ctx context.Context, n int) ([]Job, error) {
	expr, err := expression.NewBuilder().
		WithFilter(expression.Name(jobs.AttrPK).BeginsWith(jobs.JobPK(""))).Build()
	if err != nil {
		return nil, fmt.Errorf("webview: jobs scan: %w", err)
	}
	var recs []Job
	p := dynamodb.NewScanPaginator(t.client, &dynamodb.ScanInput{
		TableName: aws.String(t.table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("webview: scan %s: %w", t.table, err)
		}
		for _, item := range page.Items {
			recs = append(recs, scannedJob(item))
		}
	}
	slices.SortFunc(recs, func(a, b Job) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	recs = recs[:min(n, len(recs))]
	out := make([]*Job, len(recs))
	sem := make(chan struct{}, deriveConcurrency)
	var wg sync.WaitGroup
	for i, rec := range recs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = t.derive(ctx, rec)
		})
	}
	wg.Wait()
	list := make([]Job, 0, len(out))
	for _, j := range out {
		if j != nil {
			list = append(list, *j)
		}
	}
	return list, nil
}

// derive completes a scanned record with its derived state; nil when the
// record has expired or vanished since the scan.
func (t *JobsTable) derive(ctx context.Context, rec Job) *Job {
	j, err := t.store.Get(ctx, rec.ID)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return nil
	case err != nil:
		rec.LastReason = strings.TrimSpace(rec.LastReason + " (state not derived: " + err.Error() + ")")
		return &rec
	}
	row := jobRow(j)
	return &row
}

// Job reads job id through jobs.Store.Get: the view GET /v1/jobs/{jobId}
// and jobctl show, with its history.
func (t *JobsTable) Job(ctx context.Context, id string) (Job, bool, error) {
	j, err := t.store.Get(ctx, id)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return Job{}, false, nil
	case err != nil:
		return Job{}, false, fmt.Errorf("webview: %w", err)
	}
	row := jobRow(j)
	if row.Chain, err = t.chain(ctx, j); err != nil {
		return Job{}, false, fmt.Errorf("webview: the chain of %s: %w", id, err)
	}
	return row, true, nil
}

// chain reads the job j waits for and the jobs that wait for j, each with
// its state now (as GET shows it): one GetItem of j's continuations, then
// one BatchGetItem of the records and one of their markers.
func (t *JobsTable) chain(ctx context.Context, j jobs.Job) (Chain, error) {
	children, err := t.store.Continuations(ctx, j.ID)
	if err != nil {
		return Chain{}, err
	}
	keys := make([]engine.Key, 0, len(children)+1)
	for _, id := range children {
		keys = append(keys, engine.Key{JobID: id})
	}
	if j.After != "" {
		keys = append(keys, engine.Key{JobID: j.After})
	}
	views, err := t.store.Views(ctx, keys)
	if err != nil {
		return Chain{}, err
	}
	var c Chain
	for i, v := range views {
		l := Link{ID: v.ID, Type: v.Type, State: string(v.State)}
		if i == len(children) { // the parent, last
			c.Parent, c.AfterPolicy = &l, cmp.Or(string(j.AfterPolicy), string(contract.OnSucceeded))
			continue
		}
		c.Children = append(c.Children, l)
	}
	return c, nil
}

// jobRow is job j's row, every field as jobs.View shows it (as GET
// /v1/jobs/{jobId} and jobctl do).
func jobRow(j jobs.Job) Job {
	row := Job{
		ID: j.ID, Type: j.Type, Key: j.Key, Caller: j.Caller, State: string(j.State), Attempts: j.Attempts,
		LastErrorClass: j.LastErrorClass, LastOutcome: j.LastOutcome, LastReason: j.LastReason, TraceID: j.TraceID,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt, RunAt: j.RunAt, Queue: j.Queue, CorrelationID: j.CorrelationID,
	}
	if j.FailedAt != nil {
		row.FailedAt = *j.FailedAt
	}
	for _, h := range j.History {
		row.History = append(row.History, Outcome{At: h.At, Outcome: h.Outcome, Reason: h.Reason})
	}
	return row
}

// StackOperator takes the job page's actions through internal/operate: the
// stores and calls jobctl's jobs cancel, jobs run-now and dlq redrive use.
type StackOperator struct{ Operator operate.Operator }

// Act takes action on job id and says what it did.
func (s StackOperator) Act(ctx context.Context, action Action, id string) (string, error) {
	var (
		res operate.Result
		err error
	)
	switch action {
	case ActionCancel:
		res, err = s.Operator.Cancel(ctx, id)
	case ActionRunNow:
		res, err = s.Operator.RunNow(ctx, id)
	case ActionRedrive:
		res, err = s.Operator.Redrive(ctx, id)
	default:
		return "", fmt.Errorf("webview: no action %q", action)
	}
	return res.Said, err
}

// scannedJob reads a job record attribute by attribute, so a missing or
// mistyped attribute leaves its field empty instead of hiding the job.
func scannedJob(item map[string]types.AttributeValue) Job {
	id := attrS(item, jobs.AttrJobID)
	if id == "" {
		id = strings.TrimPrefix(attrS(item, jobs.AttrPK), jobs.JobPK(""))
	}
	return Job{
		ID: id, Type: attrS(item, "type"), Key: attrS(item, "key"), Caller: attrS(item, "caller"),
		State: attrS(item, jobs.AttrState), Attempts: int(attrN(item, "attempts")),
		LastErrorClass: attrS(item, "lastErrorClass"), LastOutcome: attrS(item, "lastOutcome"),
		LastReason: attrS(item, "lastReason"), TraceID: attrS(item, "traceId"),
		CreatedAt: fromMillis(attrN(item, "createdAt")), UpdatedAt: fromMillis(attrN(item, "updatedAt")),
		RunAt: fromMillis(attrN(item, "runAt")),
	}
}

// fromMillis reads an epoch-milliseconds attribute; 0 is the zero time.
func fromMillis(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func attrN(item map[string]types.AttributeValue, name string) int64 {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil {
			return n
		}
	}
	return 0
}

// DeadLettersTable lists the dead-letters table through deadletter.Store.
type DeadLettersTable struct {
	store *deadletter.Store
}

// NewDeadLettersTable returns the lister of table; markers settle what
// became of a redriven letter (deadletter.Settle).
func NewDeadLettersTable(client deadletter.DynamoAPI, table string, markers deadletter.BatchPeeker) *DeadLettersTable {
	s := deadletter.NewStore(client, table)
	s.Markers = markers
	return &DeadLettersTable{store: s}
}

// Recent returns the n most recently seen dead letters, whatever their
// status (a redriven one whose job has since run reads succeeded).
func (d *DeadLettersTable) Recent(ctx context.Context, n int) ([]DeadLetter, error) {
	recs, err := d.store.Select(ctx, deadletter.Filter{})
	if err != nil {
		return nil, fmt.Errorf("webview: %w", err)
	}
	slices.SortFunc(recs, func(a, b deadletter.Record) int {
		return cmp.Or(b.LastSeen.Compare(a.LastSeen), strings.Compare(a.ID, b.ID))
	})
	out := make([]DeadLetter, 0, min(n, len(recs)))
	for _, r := range recs[:min(n, len(recs))] {
		out = append(out, DeadLetter{
			ID: r.ID, JobID: r.JobID, Type: r.Type, Reason: r.Reason, Status: string(r.Status),
			SourceQueue:  r.SourceQueue[strings.LastIndex(r.SourceQueue, ":")+1:],
			ReceiveCount: r.ReceiveCount, Occurrences: r.Occurrences, FirstSeen: r.FirstSeen, LastSeen: r.LastSeen,
		})
	}
	return out, nil
}

// SSMAPI is the part of the SSM client SSMSwitches uses.
type SSMAPI interface {
	switchview.SSMAPI
	PutParameter(ctx context.Context, in *ssm.PutParameterInput, optFns ...func(*ssm.Options)) (*ssm.PutParameterOutput, error)
}

// SSMSwitches are a stage's kill switches in SSM Parameter Store, read as an
// operator sees them (switchview.Read, no cache) and written as plain
// "on"/"off".
type SSMSwitches struct {
	client   SSMAPI
	stage    string
	defaults map[string]bool
}

// NewSSMSwitches returns the switches of stage for every type in reg.
func NewSSMSwitches(client SSMAPI, stage string, reg *message.Registry) *SSMSwitches {
	defaults := map[string]bool{}
	for _, t := range reg.Types() {
		defaults[t.Name] = t.EnabledByDefault
	}
	return &SSMSwitches{client: client, stage: stage, defaults: defaults}
}

// List returns every registered switch by type name, then any parameter
// under the path that names no registered type.
func (s *SSMSwitches) List(ctx context.Context) ([]Switch, error) {
	snap, err := switchview.Read(ctx, s.client, contract.SwitchPath(s.stage), s.defaults, time.Now())
	if err != nil {
		return nil, fmt.Errorf("webview: %w", err)
	}
	out := make([]Switch, 0, len(snap.Entries)+len(snap.Unknown))
	for _, e := range snap.Entries {
		out = append(out, Switch{
			Type: e.Type, Stored: e.Stored, HasStored: e.HasStored, Readable: e.Readable,
			Default: e.Default, Effective: e.Effective, Until: e.Until, Expired: e.Expired, Reason: e.Reason,
		})
	}
	for _, name := range slices.Sorted(maps.Keys(snap.Unknown)) {
		out = append(out, Switch{Type: name, Stored: snap.Unknown[name], HasStored: true, Unknown: true})
	}
	return out, nil
}

// Set overwrites jobType's parameter with "on" or "off". A type that is not
// registered is ErrUnknownType.
func (s *SSMSwitches) Set(ctx context.Context, jobType string, enabled bool) error {
	if _, ok := s.defaults[jobType]; !ok {
		return fmt.Errorf("%w: %s", ErrUnknownType, jobType)
	}
	value := "off"
	if enabled {
		value = "on"
	}
	name := contract.SwitchParameter(s.stage, jobType)
	_, err := s.client.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeString, Overwrite: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("webview: put %s: %w", name, err)
	}
	return nil
}
