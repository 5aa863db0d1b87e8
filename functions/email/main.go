// Command email is the e-mail worker Lambda function: it consumes the
// critical, default and bulk queues (ReportBatchItemFailures) and runs the
// e-mail job types, the weekly digest's fan-out and the schedule sweep
// through the runner. It only wires adapters.
package main

import (
	"context"
	"log/slog"
	"maps"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/runstwice/runstwice/aws/dynamostore"
	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/email"
	"github.com/runstwice/runstwice/internal/email/digest"
	"github.com/runstwice/runstwice/internal/email/sendrate"
	"github.com/runstwice/runstwice/internal/email/ses"
	"github.com/runstwice/runstwice/internal/email/smtprelay"
	"github.com/runstwice/runstwice/internal/email/users"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/function"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/obs"
	"github.com/runstwice/runstwice/internal/schedule/deletion"
	"github.com/runstwice/runstwice/internal/sweep"
)

// Consumes is the work queues this function is the worker of: its event
// sources in template.yaml (the main test checks both agree). It sends only
// to these (parked jobs, the digest fan-out's digests and pages).
var Consumes = []engine.Queue{contract.QueueCritical, contract.QueueDefault, contract.QueueBulk}

// The functions' mains have one form on purpose: each function is
// its own binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("email", build, func(h *engine.Runner) any { return h.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*engine.Runner, error) {
	env := envvar.New(os.Getenv)
	stage := env.Required("STAGE")
	markersTable := env.Required("MARKERS_TABLE")
	usersTable := env.Required("USERS_TABLE")
	jobsTable := env.Required("JOBS_TABLE")
	scheduleGroup := env.Required("SCHEDULE_GROUP")
	urls := env.QueueURLsOf(Consumes...)
	dlqURL := env.Required("DLQ_URL")
	from := env.Required("MAIL_FROM")
	baseURL := env.Required("APP_BASE_URL")
	smtpAddr := env.Optional("SMTP_ADDR", "")
	toggleTTL := env.Duration("TOGGLE_TTL", ssmswitch.DefaultTTL)
	parkDelay := env.Seconds("PARK_DELAY", engine.DefaultParkDelay)
	maxReceives := env.Int("MAX_RECEIVE_COUNT", engine.DefaultMaxReceiveCount)
	concurrency := env.Int("BATCH_CONCURRENCY", 10)
	// The account's SES rate: every send takes a slot of one schedule in
	// the jobs table, shared by every invocation (docs/deploy.md, "Sending
	// within SES's rate"); unset: no pacing.
	sesRate := env.Int("SES_MAX_SEND_RATE", 0)
	configurationSet := env.Optional("SES_CONFIGURATION_SET", "")
	// The weekly schedule's time zone (PartnerDigestTimezone): a tick's
	// digestId is the ISO week of its scheduled time there.
	digestZone, zerr := digest.Timezone(env.Optional(digest.TimezoneEnv, "UTC"))
	backoff := engine.BackoffSchedule{
		Base:   env.Duration("BACKOFF_BASE", engine.DefaultBackoffBase),
		Factor: float64(env.Int("BACKOFF_FACTOR", int(engine.DefaultBackoffFactor))),
		Cap:    env.Duration("BACKOFF_CAP", engine.DefaultBackoffCap),
	}
	if zerr != nil {
		return nil, zerr
	}
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(cfg)
	metrics := engine.DefaultMetrics(obs.Namespace)
	reg := contract.RegistryIn(digestZone)

	toggles := ssmswitch.New(ssm.NewFromConfig(cfg), contract.SwitchPath(stage), func(n string) bool { _, err := reg.Lookup(n); return err == nil })
	toggles.TTL, toggles.Logger, toggles.Metrics = toggleTTL, log, metrics

	mail := ses.New(sesv2.NewFromConfig(cfg), from)
	mail.ConfigurationSet = configurationSet
	var sender email.Sender = mail
	if sesRate > 0 {
		sender, err = email.NewPaced(mail, email.Pacing{
			Slots: sendrate.New(db, jobsTable, float64(sesRate)), QuotaWait: parkDelay, Metrics: metrics,
		})
		if err != nil {
			return nil, err
		}
	}
	if smtpAddr != "" {
		sender = smtprelay.New(smtpAddr, from)
	}
	handlers, err := email.Handlers(email.Config{
		Users: users.New(db, usersTable), Sender: sender, BaseURL: baseURL,
	})
	if err != nil {
		return nil, err
	}
	markers := dynamostore.New(db, markersTable)
	sqsClient := sqs.NewFromConfig(cfg)
	queues := sqsqueue.New(sqsClient, urls, dlqURL)
	// The jobs a worker makes (a tick's job, the digest fan-out's) are
	// reserved and promoted through the enqueue function's store.
	store := jobs.NewStore(db, jobsTable, markers)
	// The schedule sweep deletes the one-time schedules of ended jobs; the
	// worker deletes schedules, never makes one.
	store.Schedules = deletion.New(scheduler.NewFromConfig(cfg), scheduleGroup)
	fanout, err := digest.Handlers(digest.Config{Directory: users.NewDigestIndex(db, usersTable), Jobs: store, Queue: queues, Metrics: metrics})
	if err != nil {
		return nil, err
	}
	maps.Copy(handlers, fanout)
	sweeps, err := sweep.Handlers(store)
	if err != nil {
		return nil, err
	}
	maps.Copy(handlers, sweeps)
	runcfg := engine.Config{
		Registry: reg, Handlers: handlers, Switch: toggles, Markers: markers, Ticks: jobs.TicksForEngine(store),
		Parker: queues, DeadLetterer: queues, Jobs: jobs.ForEngine(jobs.NewRecorder(db, jobsTable)),
		Backoff: sqsqueue.NewVisibility(sqsClient, urls), BackoffSchedule: backoff,
		ParkDelay: min(parkDelay, engine.DefaultParkDelay), MaxReceiveCount: maxReceives, Concurrency: concurrency,
		Logger: log, Metrics: metrics,
	}
	killpoint.Wire(&runcfg) // the chaos build's kill points and mutations; nothing in a release build
	return engine.New(runcfg)
}
