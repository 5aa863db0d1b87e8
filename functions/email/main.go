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

	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

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
	"github.com/runstwice/runstwice/internal/jobs/sweepindex"
	"github.com/runstwice/runstwice/internal/runner"
	"github.com/runstwice/runstwice/internal/schedule/deletion"
	"github.com/runstwice/runstwice/internal/sweep"
	"github.com/runstwice/runstwice/internal/wiring/worker"
	"github.com/runstwice/runstwice/message"
)

// Consumes is the work queues this function is the worker of: its event
// sources in template.yaml (the main test checks both agree). It sends only
// to these (parked jobs, the digest fan-out's digests and pages).
var Consumes = []message.Queue{contract.QueueCritical, contract.QueueDefault, contract.QueueBulk}

// The functions' mains have one form on purpose: each function is
// its own binary that only wires adapters, and internal/function starts it.
func main() {
	function.Main("email", build, func(h *runner.Runner) any { return h.Handle })
}

func build(ctx context.Context, log *slog.Logger) (*runner.Runner, error) {
	env := envvar.New(os.Getenv)
	w := worker.Read(env, Consumes...)
	usersTable := env.Required("USERS_TABLE")
	scheduleGroup := env.Required("SCHEDULE_GROUP")
	from := env.Required("MAIL_FROM")
	baseURL := env.Required("APP_BASE_URL")
	smtpAddr := env.Optional("SMTP_ADDR", "")
	// The account's SES rate: every send takes a slot of one schedule in
	// the jobs table, shared by every invocation (docs/deploy.md, "Sending
	// within SES's rate"); unset: no pacing.
	sesRate := env.Int("SES_MAX_SEND_RATE", 0)
	configurationSet := env.Optional("SES_CONFIGURATION_SET", "")
	// The weekly schedule's time zone (PartnerDigestTimezone): a tick's
	// digestId is the ISO week of its scheduled time there.
	digestZone, zerr := digest.Timezone(env.Optional(digest.TimezoneEnv, "UTC"))
	if zerr != nil {
		return nil, zerr
	}
	cfg, err := env.Config(ctx)
	if err != nil {
		return nil, err
	}
	p := w.Parts(ctx, cfg)
	reg := contract.RegistryIn(digestZone)

	mail := ses.New(sesv2.NewFromConfig(cfg), from)
	mail.ConfigurationSet = configurationSet
	var sender email.Sender = mail
	if sesRate > 0 {
		sender, err = email.NewPaced(mail, email.Pacing{
			Slots: sendrate.New(p.DB, w.JobsTable, float64(sesRate)), QuotaWait: w.ParkDelay, Metrics: p.Metrics,
		})
		if err != nil {
			return nil, err
		}
	}
	if smtpAddr != "" {
		sender = smtprelay.New(smtpAddr, from)
	}
	handlers, err := email.Handlers(email.Config{
		Users: users.New(p.DB, usersTable), Sender: sender, BaseURL: baseURL,
	})
	if err != nil {
		return nil, err
	}
	// The jobs a worker makes (a tick's job, the digest fan-out's) are
	// reserved and promoted through the enqueue function's store.
	store := jobs.NewStore(p.DB, w.JobsTable, p.Markers)
	// The schedule sweep deletes the one-time schedules of ended jobs; the
	// worker deletes schedules, never makes one.
	store.Schedules = deletion.New(scheduler.NewFromConfig(cfg), scheduleGroup)
	store.Index = sweepindex.New(p.DB, w.JobsTable)
	fanout, err := digest.Handlers(digest.Config{Directory: users.NewDigestIndex(p.DB, usersTable), Jobs: store, Queue: p.Queues, Metrics: p.Metrics})
	if err != nil {
		return nil, err
	}
	maps.Copy(handlers, fanout)
	sweeps, err := sweep.Handlers(store)
	if err != nil {
		return nil, err
	}
	maps.Copy(handlers, sweeps)
	runcfg := w.Config(cfg, p, reg, handlers, log)
	runcfg.Ticks = jobs.TicksForEngine(store)
	return runner.New(runcfg)
}
