//go:build integration

package stack

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/testenv"
)

// TestProvisionCreatesTheTemplate provisions template.yaml on moto and reads
// back what it created: keys, TTL, point-in-time recovery, queue attributes,
// redrive policies, the toggle parameter and the functions' environments.
func TestProvisionCreatesTheTemplate(t *testing.T) {
	srv := testenv.Moto(t)
	cfg := srv.Config()
	tmpl, _ := loadTemplate(t)
	ctx := context.Background()
	stackName := testenv.Name(t, "prov")
	st, err := Provision(ctx, NewClients(cfg), tmpl, Options{StackName: stackName})
	if err != nil {
		t.Fatalf("provision: %v", err)
	}
	db, q, ps := dynamodb.NewFromConfig(cfg), sqs.NewFromConfig(cfg), ssm.NewFromConfig(cfg)

	for _, w := range wantTables {
		t.Run(w.id, func(t *testing.T) {
			p, ok := st.Physical(w.id)
			if !ok || p.Name != stackName+"-"+map[string]string{
				"IdempotencyTable": "idempotency", "JobsTable": "jobs", "MarkersTable": "markers",
				"DeadLettersTable": "dead-letters", "UsersTable": "users", "OutboxTable": "outbox",
			}[w.id] {
				t.Fatalf("physical %+v", p)
			}
			d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(p.Name)})
			if err != nil {
				t.Fatal(err)
			}
			keys := map[string]string{}
			for _, k := range d.Table.KeySchema {
				keys[string(k.KeyType)] = aws.ToString(k.AttributeName)
			}
			if keys["HASH"] != w.hash || keys["RANGE"] != w.rang {
				t.Errorf("keys %v", keys)
			}
			if aws.ToString(d.Table.TableArn) != p.ARN {
				t.Errorf("arn %s, physical %s", aws.ToString(d.Table.TableArn), p.ARN)
			}
			stream := ""
			if ss := d.Table.StreamSpecification; ss != nil && aws.ToBool(ss.StreamEnabled) {
				stream = string(ss.StreamViewType)
			}
			if stream != w.stream || aws.ToString(d.Table.LatestStreamArn) != p.StreamARN {
				t.Errorf("stream %q (arn %s, physical %s), want %q", stream, aws.ToString(d.Table.LatestStreamArn), p.StreamARN, w.stream)
			}
			if w.stream != "" {
				if arn, err := st.GetAtt(w.id, "StreamArn"); err != nil || arn != p.StreamARN || arn == "" {
					t.Errorf("GetAtt %s.StreamArn = %q, %v; want %q", w.id, arn, err, p.StreamARN)
				}
			}
			ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(p.Name)})
			if err != nil {
				t.Fatal(err)
			}
			if on := ttl.TimeToLiveDescription.TimeToLiveStatus == "ENABLED" && aws.ToString(ttl.TimeToLiveDescription.AttributeName) == "expiresAt"; on != w.ttl {
				t.Errorf("ttl %+v, want on=%v", ttl.TimeToLiveDescription, w.ttl)
			}
			cb, err := db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(p.Name)})
			if err != nil {
				t.Fatal(err)
			}
			if got := cb.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus; got != "ENABLED" {
				t.Errorf("PITR %s", got)
			}
		})
	}

	dlq, _ := st.Physical("DeadLetterQueue")
	workIDs := slices.Sorted(maps.Values(tmpl.WorkQueueIDs()))
	if len(workIDs) != len(contract.Queues) {
		t.Fatalf("work queues %v in the template; want one per contract queue %v", workIDs, contract.Queues)
	}
	for _, id := range workIDs {
		t.Run(id, func(t *testing.T) {
			p, _ := st.Physical(id)
			out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
				QueueUrl: aws.String(p.URL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, attr := range []string{"VisibilityTimeout", "MessageRetentionPeriod"} {
				if want := scalarString(tmpl.Resources[id].Properties[attr]); out.Attributes[attr] != want {
					t.Errorf("%s %s, template %s", attr, out.Attributes[attr], want)
				}
			}
			var rp struct {
				Target string `json:"deadLetterTargetArn"`
				Max    int    `json:"maxReceiveCount"`
			}
			if err := json.Unmarshal([]byte(out.Attributes["RedrivePolicy"]), &rp); err != nil {
				t.Fatalf("redrive %q: %v", out.Attributes["RedrivePolicy"], err)
			}
			if rp.Target != dlq.ARN || rp.Max != 5 {
				t.Errorf("redrive %+v, want %s/5", rp, dlq.ARN)
			}
		})
	}

	// The DLQ accepts letters from exactly the work queues: the ARNs
	// the template builds from their names are the queues' real ARNs (moto
	// does not keep RedriveAllowPolicy, so this reads what was sent).
	allow, err := st.Resolve(tmpl.Resources["DeadLetterQueue"].Properties["RedriveAllowPolicy"])
	if err != nil {
		t.Fatal(err)
	}
	var workARNs []string
	for _, id := range workIDs {
		p, _ := st.Physical(id)
		workARNs = append(workARNs, p.ARN)
	}
	sources := strs(asMap(allow)["sourceQueueArns"])
	slices.Sort(sources)
	slices.Sort(workARNs)
	if str(asMap(allow)["redrivePermission"]) != "byQueue" || !slices.Equal(sources, workARNs) {
		t.Errorf("DLQ redrive allow policy %v, want byQueue from %v", allow, workARNs)
	}

	// Exactly the tables, queues, parameters, schedule groups and schedules
	// are created, and the roles named; every other resource type (keys,
	// log groups, alarms, the API, functions) is skipped.
	var want []string
	for _, typ := range ProvisionedTypes {
		want = append(want, tmpl.IDs(typ)...)
	}
	slices.Sort(want)
	if got := SortedIDs(st.Resources()); !slices.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
	for _, id := range []string{"AlarmTopicKey", "ApiAccessLogGroup", "DeadLetterPresentAlarm"} {
		if _, err := st.GetAtt(id, "Arn"); !errors.Is(err, ErrNotProvisioned) {
			t.Errorf("GetAtt %s.Arn: %v, want ErrNotProvisioned", id, err)
		}
	}

	par, err := ps.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/runstwice/local/toggles/email.partner-digest.v1")})
	if err != nil || aws.ToString(par.Parameter.Value) != "false" {
		t.Errorf("toggle parameter: %v %v", par, err)
	}

	env, err := st.FunctionEnv("EmailFunction")
	if err != nil {
		t.Fatal(err)
	}
	crit, _ := st.Physical("CriticalQueue")
	for k, want := range map[string]string{
		"STAGE": "local", "LOG_LEVEL": "info", "QUEUE_URL_CRITICAL": crit.URL, "DLQ_URL": dlq.URL,
		"MARKERS_TABLE": stackName + "-markers", "MAX_RECEIVE_COUNT": "5", "TOGGLE_TTL": "30s", "PARK_DELAY": "900",
		"SES_MAX_SEND_RATE": "1", "SES_CONFIGURATION_SET": "",
	} {
		if env[k] != want {
			t.Errorf("EmailFunction env %s = %q, want %q", k, env[k], want)
		}
	}
	if refs := st.Refs(); refs["JobsTable"] != stackName+"-jobs" || !strings.HasPrefix(refs["BulkQueue"], "http") {
		t.Errorf("refs %v", refs)
	}
	// The jobs schedule group exists on moto; the enqueue function is told
	// it, the scheduler role's ARN and the queues' ARNs.
	group, _ := st.Physical("JobsScheduleGroup")
	sg, err := scheduler.NewFromConfig(cfg).GetScheduleGroup(ctx, &scheduler.GetScheduleGroupInput{Name: aws.String("runstwice-local-jobs")})
	if err != nil || group.Name != "runstwice-local-jobs" || aws.ToString(sg.Arn) != group.ARN {
		t.Errorf("jobs schedule group %+v: %v, %v", group, sg, err)
	}
	enq, err := st.FunctionEnv("EnqueueFunction")
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"SCHEDULE_GROUP": "runstwice-local-jobs", "SCHEDULER_ROLE_ARN": "arn:aws:iam::" + DefaultAccountID + ":role/" + stackName + "-SchedulerRole",
		"QUEUE_ARN_CRITICAL": crit.ARN, "DLQ_ARN": dlq.ARN,
	} {
		if enq[k] != want {
			t.Errorf("EnqueueFunction env %s = %q, want %q", k, enq[k], want)
		}
	}
	if _, err := st.GetAtt("EnqueueFunction", "Arn"); err == nil {
		t.Error("GetAtt of a function resolved; want ErrNotProvisioned")
	}

	// Provisioning again reuses what exists, the schedules of a schedule
	// group included.
	sched := scheduler.NewFromConfig(cfg)
	if _, err := sched.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name: aws.String(stackName), GroupName: aws.String(group.Name), ScheduleExpression: aws.String("at(2030-01-01T00:00:00)"),
		FlexibleTimeWindow: &schedtypes.FlexibleTimeWindow{Mode: schedtypes.FlexibleTimeWindowModeOff},
		Target:             &schedtypes.Target{Arn: aws.String(crit.ARN), RoleArn: aws.String(enq["SCHEDULER_ROLE_ARN"]), Input: aws.String("{}")},
	}); err != nil {
		t.Fatal(err)
	}
	again, err := Provision(ctx, NewClients(cfg), tmpl, Options{StackName: stackName})
	if err != nil {
		t.Fatalf("provision again: %v", err)
	}
	if a, b := again.Refs(), st.Refs(); len(a) != len(b) || a["MarkersTable"] != b["MarkersTable"] || a["CriticalQueue"] != b["CriticalQueue"] {
		t.Errorf("second provision %v, first %v", a, b)
	}
	if _, err := sched.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(stackName), GroupName: aws.String(group.Name)}); err != nil {
		t.Errorf("the group's schedule after provisioning again: %v", err)
	}
}
