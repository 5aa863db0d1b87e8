// Package chaos is the chaos campaign of make chaos: the whole local stack
// under faults — its AWS calls throttled, failed, cut, delayed or applied
// with the response lost, SSM down for a while, function processes killed
// at every step boundary (and from outside, the outbox relay and the digest
// fan-out in the middle of their work), deliveries duplicated and
// concurrent, switches flipped, jobs cancelled, letters redriven, part of
// the load enqueued through the outbox in the campaign's own transactions,
// the weekly digest's fan-out ticked while off, twice at once and for
// another week — and then the ledger: what happened to every accepted job
// (and every digest the fan-out owes), read back from ground truth (the
// mail SES holds, the markers, job records and dead letters), with the
// invariants the product promises checked and every breach named by job
// id.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/runstwice/runstwice/aws/sqsqueue"
	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/dev/awsproxy"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/faults"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/envvar"
	"github.com/runstwice/runstwice/internal/killpoint"
	"github.com/runstwice/runstwice/internal/schedule"
	"github.com/runstwice/runstwice/internal/vclock"
)

// DefaultFaults are the faults of make chaos, per AWS call of the functions.
const DefaultFaults = "dynamodb:*:throttle=0.02,dynamodb:*:drop=0.01,dynamodb:*:drop500=0.005,dynamodb:*:500=0.005," +
	"dynamodb:*:reset=0.005,dynamodb:*:delay(200ms)=0.01," +
	"sqs:SendMessage:throttle=0.02,sqs:SendMessage:drop=0.01,sqs:*:503=0.005," +
	"ses:*:throttle=0.02,ses:*:drop=0.01,ses:*:drop500=0.005,ses:*:500=0.005," +
	"ssm:*:throttle=0.05"

// DefaultKillAt is how often a function process is killed at each step
// (RUNSTWICE_KILL_AT): per batch at after-decode and before-response, per
// record at the others; at mid-batch, at each of the three points of a
// batch's accept (the API's, or its finisher's).
const DefaultKillAt = "after-decode=0.01,after-lease=0.005,after-effect=0.01,after-claim=0.005,before-response=0.01,mid-batch=0.1"

// Config is one campaign.
type Config struct {
	// Root is the checkout; StateDir the stack's state directory.
	Root, StateDir string
	// N is how many jobs to enqueue (DefaultN when zero).
	N int
	// Seed draws the plan and the faults.
	Seed uint64
	// Faults is the fault spec (DefaultFaults when empty; "none" for none).
	Faults string
	// KillAt is RUNSTWICE_KILL_AT (DefaultKillAt when empty; "none" for
	// none).
	KillAt string
	// Mutations break the runner on purpose (killpoint.Mutations).
	Mutations []string
	// Concurrency is how many enqueues run at once (16 when zero).
	Concurrency int
	// UsersPerType is how many users each job type mails (3 when zero).
	UsersPerType int
	// WeeklyPartners is how many users of the weekly digest the campaign
	// seeds (DefaultWeeklyPartners when zero): every tick of a week sent
	// while the fan-out is on owes each one digest.
	WeeklyPartners int
	// Mix is how often jobs are delayed, twinned, copied, cancelled and
	// faulted at the front (DefaultMix when zero).
	Mix Mix
	// SESOutage is how long SES is down in the middle of the load
	// (DefaultSESOutage when zero): longer than a critical job's
	// deliveries last, it sends jobs to the DLQ.
	SESOutage time.Duration
	// Timeout bounds the whole campaign (DefaultTimeout when zero): a
	// stack that is not quiet by then is itself a finding.
	Timeout time.Duration
	// NoClock leaves out the clock campaign (the jumps of the virtual
	// clock that follow the load, docs/chaos.md "The clock").
	NoClock bool
	// Progress receives a progress line (rewritten in place once a second
	// on a terminal, else a line every 10 s); Log the stack's own output.
	// Either may be nil.
	Progress, Log io.Writer
}

// Defaults of Config.
const (
	DefaultN         = 300
	DefaultTimeout   = 45 * time.Minute
	DefaultSESOutage = 60 * time.Second
	// functionTimeout is the chaos runs' function timeout: a killed
	// worker's lease lasts until its deadline.
	functionTimeout = 10 * time.Second
	// visibility is the chaos runs' visibility timeout of the polled
	// queues (plus each one's batching window): a little longer than an
	// invocation may last, as the template's is.
	visibility = functionTimeout + 2*time.Second
)

func (c *Config) defaults() error {
	if c.N <= 0 {
		c.N = DefaultN
	}
	if c.Faults == "" {
		c.Faults = DefaultFaults
	}
	if c.KillAt == "" {
		c.KillAt = DefaultKillAt
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.UsersPerType <= 0 {
		c.UsersPerType = 3
	}
	if c.WeeklyPartners <= 0 {
		c.WeeklyPartners = DefaultWeeklyPartners
	}
	if c.Mix == (Mix{}) {
		c.Mix = DefaultMix
	}
	if c.SESOutage <= 0 {
		c.SESOutage = DefaultSESOutage
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if err := checkKillAt(c.KillAt); err != nil {
		return err
	}
	for _, m := range c.Mutations {
		if !slices.Contains(killpoint.Mutations, m) {
			return fmt.Errorf("%w: unknown mutation %q (want one of %s)", ErrConfig, m, strings.Join(killpoint.Mutations, ", "))
		}
	}
	return nil
}

// checkKillAt checks a RUNSTWICE_KILL_AT spec: step=probability pairs of
// known steps (the hook itself ignores what it cannot read).
func checkKillAt(spec string) error {
	if spec == "none" {
		return nil
	}
	for part := range strings.SplitSeq(spec, ",") {
		step, p, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(p, 64)
		if !ok || !slices.Contains(killpoint.Steps, step) || err != nil || f < 0 || f > 1 {
			return fmt.Errorf("%w: kill-at %q: want step=probability with a step of %s", ErrConfig, part, strings.Join(killpoint.Steps, ", "))
		}
	}
	return nil
}

// ErrConfig is returned (wrapped) for a Config that cannot run.
var ErrConfig = errors.New("chaos: bad configuration")

// campaign is a running campaign: the stack and what watches it.
type campaign struct {
	cfg      Config
	stack    *devstack.Local
	aws      aws.Config
	db       *dynamodb.Client // the campaign's own clients, made once
	producer *dynamodb.Client // its writes as a producer, through the faults
	sqs      *sqs.Client
	sender   *sqsqueue.Sender
	faults   *faults.Injector
	obs      *observer
	witness  *witness
	front    *front
	api      *client.Client
	res      resources
	progress *progress
	start    time.Time
	ssmUp    func()         // ends the SSM outage
	sesUp    func()         // ends the SES outage
	redriven map[string]int // letters redriven, by id
	outboxTx atomic.Int64   // outbox transactions written, retries included
	partners []string       // the weekly digest's users, in the fan-out's order
	// The virtual clock: its offset file, the campaign's reader of it, and
	// the faults the clock campaign injects itself (before the load's).
	clockPath   string
	clock       *vclock.Reader
	clockFaults *faults.Injector
	weeks       weeks // the ticks' scheduled times
	// tickInput is the weekly schedule's (its input is a tick's).
	tickInput *schedule.Schedule

	mu       sync.Mutex
	timeline []event
	problems []string   // what went wrong in the campaign itself
	ticks    []tickSent // the ticks sent, in order
}

// Run runs a campaign and returns its ledger. The error is for a campaign
// that could not run; a broken invariant is in the ledger (Ledger.Failed).
func Run(ctx context.Context, cfg Config) (*Ledger, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	rules, err := specRules(cfg.Faults)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	c := &campaign{cfg: cfg, faults: faults.New(rules, cfg.Seed), obs: newObserver(), witness: newWitness(), start: time.Now(),
		redriven: map[string]int{}, clockPath: filepath.Join(cfg.StateDir, "vclock"), clockFaults: faults.New(nil, cfg.Seed)}
	c.clock = &vclock.Reader{Path: c.clockPath}
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, err
	}
	if err := vclock.Write(c.clockPath, 0); err != nil {
		return nil, err
	}
	c.weeks = weeksBefore(c.start)
	c.faults.Pause() // until the load starts
	c.progress = newProgress(cfg.Progress, c)
	defer c.progress.stop()
	if err := c.startStack(ctx); err != nil {
		return nil, err
	}
	defer c.stack.Stop()

	jobs := plan(cfg.N, cfg.UsersPerType, cfg.Mix, cfg.Seed, fmt.Sprint(cfg.Seed))
	c.faults.Resume()
	results := c.load(ctx, jobs)
	c.progress.phase("processing under faults")
	quiet := c.waitQuiet(ctx)
	c.faults.Pause()
	c.mark("faults stopped")
	redriven := 0
	for round := 1; quiet && round <= maxRedriveRounds; round++ {
		c.progress.phase(fmt.Sprintf("redrive round %d", round))
		n, err := c.redrive(ctx)
		if err != nil {
			return nil, err
		}
		redriven += n
		quiet = c.waitQuiet(ctx)
		if n == 0 {
			break
		}
	}
	// Every accepted job sent or decided, by a continuation sweep too,
	// before the ledger judges.
	quiet = quiet && c.waitSettled(ctx, results)
	c.progress.phase("reading the ledger")
	c.mu.Lock()
	fan := fanoutJobs(c.partners, slices.Clone(c.ticks))
	c.mu.Unlock()
	truth, err := c.readTruth(context.WithoutCancel(ctx), results, fan)
	if err != nil {
		return nil, err
	}
	if cfg.NoClock || !quiet {
		return c.ledger(results, fan, truth, redriven, quiet, nil, nil), nil
	}
	run, err := c.runClock(ctx, truth.Mails)
	if err != nil {
		return nil, err
	}
	settled := c.waitSettled(ctx, results) // the moved clock's ends decided too
	c.progress.phase("reading the clock's ledger")
	after, err := c.clockTruth(context.WithoutCancel(ctx))
	if err != nil {
		return nil, err
	}
	return c.ledger(results, fan, truth, redriven, quiet && settled && c.waitQuiet(ctx), run, after), nil
}

// apiAttempts bounds the tries of one request to the API. A kill of the
// process answering it costs two (the 5xx, then a 409 until the dead
// request's lock expires), and a batch's accept meets up to three kill
// points (make test kills at each with probability 0.15): a budget of 10
// once ran out for a batch killed again and again, whose jobs had been
// made. A caller that gave up there would retry the key later and be
// answered; the campaign, as that caller, keeps trying long enough not to
// give up.
const apiAttempts = 24

// clockNow is the campaign's reading of the virtual clock.
func (c *campaign) clockNow() time.Time {
	if c.clock == nil {
		return time.Now()
	}
	return c.clock.Now()
}

// maxRedriveRounds bounds how often the campaign redrives what reached the
// DLQ (a redriven job can be killed into the DLQ again).
const maxRedriveRounds = 5

func specRules(spec string) ([]faults.Rule, error) {
	if spec == "none" {
		return nil, nil
	}
	return faults.Parse(spec)
}

// startStack starts the local stack under faults and kills, and seeds it.
func (c *campaign) startStack(ctx context.Context) error {
	c.progress.phase("starting the stack")
	env := map[string]string{}
	if c.cfg.KillAt != "none" {
		env[killpoint.EnvVar] = c.cfg.KillAt
	}
	if len(c.cfg.Mutations) > 0 {
		env[killpoint.MutateEnvVar] = strings.Join(c.cfg.Mutations, ",")
	}
	log := c.cfg.Log
	if log == nil {
		log = io.Discard
	}
	var killDuring func(string, []byte) time.Duration
	if c.cfg.KillAt != "none" {
		killDuring = newKiller(c.cfg.Seed, func() bool { return !c.when(fanoutOn).IsZero() },
			func(function string) int { return c.obs.killsAt(function + " " + devstack.StepMidInvocation) }).during
	}
	var err error
	c.stack, err = devstack.StartOnFreePorts(ctx, devstack.Options{
		Root: c.cfg.Root, StateDir: c.cfg.StateDir, APIAddr: "127.0.0.1:0",
		ParkDelay: parkDelay, ToggleTTL: toggleTTL, Out: log,
		// Untraced: the campaign's ledger is of AWS calls, and a span
		// export per invocation is no part of what it judges.
		OTLPAddr: "off",
		Chaos: devstack.Chaos{
			ProxyHooks: []awsproxy.Hook{c.clockFaults.Hook, c.faults.Hook, c.witness.Hook}, BuildTags: []string{"chaos"}, Env: env,
			FunctionTimeout: functionTimeout, VisibilityTimeout: visibility, WrapFunction: c.obs.wrap, AppLog: c.obs,
			KillDuring: killDuring, Clock: &devstack.ChaosClock{Path: c.clockPath, Poll: clockPoll},
		},
	})
	if err != nil {
		return fmt.Errorf("chaos: start the stack: %w", err)
	}
	c.aws = moto.Config(c.stack.Endpoint, moto.Region)
	c.aws.Retryer = nil // the SDK's standard retries
	if c.res, err = resolve(c.stack.Stack); err != nil {
		return err
	}
	c.db, c.sqs = dynamodb.NewFromConfig(c.aws), sqs.NewFromConfig(c.aws)
	producer := moto.Config(c.stack.FunctionEndpoint(), moto.Region)
	producer.Retryer = nil
	c.producer = dynamodb.NewFromConfig(producer)
	c.sender = sqsqueue.New(c.sqs, envvar.ByName(c.res.Queues), "")
	c.front = newFront(http.DefaultTransport)
	c.api, err = client.New(c.stack.APIURL, client.WithCaller(Caller),
		client.WithHTTPClient(&http.Client{Transport: c.front, Timeout: time.Minute}),
		client.WithRetry(apiAttempts, 200*time.Millisecond, 3*time.Second))
	if err != nil {
		return err
	}
	var users []devstack.DemoUser
	for _, k := range kinds {
		all, poisoned := usersOf(k, c.cfg.UsersPerType)
		for _, u := range append(all, poisoned) {
			users = append(users, devstack.DemoUser{UserID: u.ID, Email: u.Email(), DisplayName: "Chaos " + u.ID, EmailConfirmed: u.Confirmed})
		}
	}
	weekly := weeklyPartners(c.cfg.WeeklyPartners)
	c.partners = partnersOf(weekly)
	return devstack.SeedUsers(ctx, c.db, c.res.Users, append(users, weekly...))
}

// The local run's park delay and toggle cache.
const (
	parkDelay = 2 * time.Second
	toggleTTL = time.Second
)

// event is a moment of the campaign's script (a switch flipped, an outage).
type event struct {
	What string    `json:"what"`
	Time time.Time `json:"time"`
}

func (c *campaign) mark(what string) { c.markAt(what, time.Now()) }

func (c *campaign) markAt(what string, at time.Time) {
	c.mu.Lock()
	c.timeline = append(c.timeline, event{What: what, Time: at})
	c.mu.Unlock()
}

// problem notes something that went wrong in the campaign itself (not in
// the stack under test); the ledger lists it.
func (c *campaign) problem(err error) {
	c.mu.Lock()
	c.problems = append(c.problems, err.Error())
	c.mu.Unlock()
}

// when returns the time of the script's event what (zero if it never
// happened).
func (c *campaign) when(what string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.timeline {
		if e.What == what {
			return e.Time
		}
	}
	return time.Time{}
}

// errNotQuiet says the stack did not settle before the campaign's timeout.
var errNotQuiet = errors.New("chaos: the stack was not quiet before the timeout")
