package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/runstwice/runstwice/client"
	"github.com/runstwice/runstwice/internal/awsx"
	"github.com/runstwice/runstwice/internal/dev/localapi"
)

// enqueueUsage is the synopsis of `jobctl enqueue`.
const enqueueUsage = "enqueue (TYPE key=value… [--key K] [--policy P] [--delay S | --run-at TIME | --after JOB_ID [--after-policy P]] | --batch FILE) [--idempotency-key K] [--api URL] [--caller NAME]"

// enqueueHelp is what `jobctl enqueue --help` says: every flag.
const enqueueHelp = "Enqueue a job through the API with the producer client, as a program would: signed with SigV4\n" +
	"from the AWS configuration chain (an API on this machine: as the local stack's test identity).\n" +
	"key=value pairs are the job's args (docs/job-types.md lists each type's), e.g. userId=u-demo-2.\n" +
	"  --key K              the job's natural key (deduplication); default: derived from the args\n" +
	"  --policy P           what happens when the key's last job has ended: AllowAfterFailed (default;\n" +
	"                       a new job after any that ended), RejectIfFailed (refused after a Failed job),\n" +
	"                       RejectAlways (refused after any job that ended); a refusal exits with 4\n" +
	"  --delay S            postpone the job: seconds (0-900) or a whole-second duration (90s, 5m);\n" +
	"                       the job reads Scheduled until then\n" +
	"  --run-at TIME        run the job at TIME, at most 365 days ahead: an RFC 3339 time with Z or an\n" +
	"                       offset (2026-12-03T09:00:00Z, 2026-12-03T10:00:00+01:00) or a duration from\n" +
	"                       now (90m, 2h, 3d); it reads Scheduled until then. Beyond 15 minutes it waits\n" +
	"                       in a one-time schedule, precise to about a minute. Not with --delay\n" +
	"  --after JOB_ID       make the job a continuation: it waits (AwaitingContinuation) for the job\n" +
	"                       JOB_ID, one of the caller's, to end, and is sent then; not with --delay/--run-at\n" +
	"  --after-policy P     which ends of JOB_ID run it: OnSucceeded (default; it is cancelled, with the\n" +
	"                       reason, if JOB_ID is cancelled, expires or fails for good) or OnAnyEnd\n" +
	"  --batch FILE         enqueue a batch instead, all or nothing: FILE (- for stdin) holds the body of\n" +
	"                       POST /v1/batches, {\"jobs\":[{\"type\":…,\"args\":{…},…},…]} with 1-100 jobs, each with\n" +
	"                       the fields of a single enqueue; \"after\":\"#0\" names an earlier job of the batch.\n" +
	"                       A refused batch lists each job's problem and made no job (exit 2)\n" +
	"  --idempotency-key K  the request's Idempotency-Key, to repeat an earlier call safely (the API\n" +
	"                       answers it again instead of making a second job); default: a new one\n" +
	"  --api URL            the API's base URL (default $RUNSTWICE_API_URL; for stage local, the running\n" +
	"                       local stack's API from .devstack/stack.json, whatever its port; with none\n" +
	"                       running, " + localapi.DefaultURL + ")\n" +
	"  --caller NAME        send the request unsigned, naming the caller in X-Caller (a name or an\n" +
	"                       IAM ARN; the local stack only)\n" +
	"Args the API rejects exit with 2."

// enqueueRequest is a parsed `jobctl enqueue` command line.
type enqueueRequest struct {
	jobType   string
	args      map[string]string
	opts      client.EnqueueOptions
	api       string
	caller    string
	hasCaller bool
	// batch is the --batch file ("-" for stdin); then there is no type.
	batch string
}

func parseEnqueue(rest []string, getenv func(string) string, now time.Time) (enqueueRequest, error) {
	r := enqueueRequest{args: map[string]string{}, api: getenv("RUNSTWICE_API_URL")}
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		if !strings.HasPrefix(arg, "--") {
			if r.jobType == "" {
				r.jobType = arg
				continue
			}
			k, v, ok := strings.Cut(arg, "=")
			if !ok || k == "" {
				return r, usagef("enqueue: %q is not key=value", arg)
			}
			if _, dup := r.args[k]; dup {
				return r, usagef("enqueue: argument %q given twice", k)
			}
			r.args[k] = v
			continue
		}
		name, value, inline := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		if !inline {
			if i+1 >= len(rest) {
				return r, usagef("enqueue: --%s needs a value", name)
			}
			i++
			value = rest[i]
		}
		switch name {
		case "key":
			r.opts.Key = value
		case "idempotency-key":
			r.opts.IdempotencyKey = value
		case "policy":
			p, err := parsePolicy(value)
			if err != nil {
				return r, err
			}
			r.opts.DuplicatePolicy = p
		case "delay":
			d, err := parseDelay(value)
			if err != nil {
				return r, err
			}
			r.opts.DelaySeconds = d
		case "run-at":
			at, err := parseRunAt(value, now)
			if err != nil {
				return r, err
			}
			r.opts.RunAt = at
		case "after":
			r.opts.After = value
		case "after-policy":
			p, err := parseAfterPolicy(value)
			if err != nil {
				return r, err
			}
			r.opts.AfterPolicy = p
		case "batch":
			r.batch = value
		case "api":
			r.api = value
		case "caller":
			r.caller, r.hasCaller = value, true
		default:
			return r, usagef("enqueue: unknown flag --%s", name)
		}
	}
	if r.batch != "" {
		if r.jobType != "" || len(r.args) > 0 || r.opts.Key != "" || r.opts.DuplicatePolicy != "" || r.opts.DelaySeconds != 0 ||
			!r.opts.RunAt.IsZero() || r.opts.After != "" || r.opts.AfterPolicy != "" {
			return r, usagef("enqueue: --batch takes its jobs from the file: no type, args, --key, --policy, --delay, --run-at or --after")
		}
		return r, nil
	}
	if r.jobType == "" {
		return r, usagef("enqueue needs a job type, e.g. jobctl enqueue email.welcome.v1 userId=u-123 (or --batch FILE)")
	}
	if !r.opts.RunAt.IsZero() && r.opts.DelaySeconds != 0 {
		return r, usagef("enqueue: give --delay or --run-at, not both")
	}
	if r.opts.After != "" && (!r.opts.RunAt.IsZero() || r.opts.DelaySeconds != 0) {
		return r, usagef("enqueue: a continuation (--after) is sent when its parent ends: not with --delay or --run-at")
	}
	if r.opts.AfterPolicy != "" && r.opts.After == "" {
		return r, usagef("enqueue: --after-policy needs --after")
	}
	return r, nil
}

// parseRunAt reads --run-at: an RFC 3339 time, or a duration from now
// (90m, 2h, 3d).
func parseRunAt(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	if d, err := parseDuration(v); err == nil && d >= 0 {
		return now.Add(d), nil
	}
	return time.Time{}, usagef("enqueue: --run-at %q is neither an RFC 3339 time with Z or an offset (2026-12-03T09:00:00Z) nor a duration from now (90m, 2h, 3d)", v)
}

func parseAfterPolicy(v string) (client.AfterPolicy, error) {
	for _, p := range []client.AfterPolicy{client.OnSucceeded, client.OnAnyEnd} {
		if strings.EqualFold(v, string(p)) {
			return p, nil
		}
	}
	return "", usagef("enqueue: --after-policy %q is not OnSucceeded or OnAnyEnd", v)
}

func parsePolicy(v string) (client.DuplicatePolicy, error) {
	for _, p := range []client.DuplicatePolicy{client.AllowAfterFailed, client.RejectIfFailed, client.RejectAlways} {
		if strings.EqualFold(v, string(p)) {
			return p, nil
		}
	}
	return "", usagef("enqueue: --policy %q is not AllowAfterFailed, RejectIfFailed or RejectAlways", v)
}

// parseDelay reads whole seconds or a duration (90s, 5m).
func parseDelay(v string) (int, error) {
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return s, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 && d%time.Second == 0 {
		return int(d / time.Second), nil
	}
	return 0, usagef("enqueue: --delay %q is not a number of seconds or a whole-second duration", v)
}

// enqueue is `jobctl enqueue`: it enqueues a job through the API with the
// producer client, signed with SigV4 (the AWS configuration chain; the local
// stack's test identity for an API on this machine). key=value pairs are the
// job's args. --key sets the dedup key, --policy the duplicate policy
// (AllowAfterFailed, RejectIfFailed, RejectAlways), --delay seconds (or a
// duration such as 5m), --run-at a time (RFC 3339, or a duration from now). --idempotency-key repeats an earlier call safely.
// --api is the API's base URL (default $RUNSTWICE_API_URL; for stage local
// the running local stack's, from .devstack/stack.json). --caller sends the request unsigned, naming the
// caller (a name or an IAM ARN; the local stack only). Exit codes: 4 when the
// API refuses the job (duplicate policy, unknown type), 2 when it rejects
// the args or the command line is wrong, 1 for any other failure.
func (a *app) enqueue(ctx context.Context, rest []string) error {
	r, err := parseEnqueue(rest, a.getenv, a.now())
	if err != nil {
		return err
	}
	if err := a.resolveAPI(&r, "enqueue"); err != nil {
		return err
	}
	c, how, err := a.producer(ctx, r)
	if err != nil {
		return err
	}
	if r.batch != "" {
		return a.enqueueBatch(ctx, c, r, how)
	}
	res, err := c.Enqueue(ctx, r.jobType, r.args, r.opts)
	if err := a.refused(err); err != nil {
		return err
	}
	if a.json {
		return a.printJSON(res)
	}
	outcome := "new job"
	if res.Deduplicated {
		outcome = "deduplicated onto an active job"
	}
	if res.Replayed {
		outcome += " (replayed answer)"
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"jobId", res.JobID}, {"type", res.Type}, {"state", string(res.State)}, {"key", res.Key},
		{"outcome", fmt.Sprintf("%s, HTTP %d", outcome, res.StatusCode)}, {"location", strings.TrimSuffix(r.api, "/") + res.Location},
		{"idempotencyKey", res.IdempotencyKey}, {"correlationId", res.CorrelationID}, {"caller", how},
	} {
		if row[1] != "" {
			fmt.Fprintf(tw, "%s\t%s\n", row[0], row[1])
		}
	}
	return tw.Flush()
}

// refused maps an API's answer to an enqueue to jobctl's exit codes: a
// duplicate policy, an unknown type or a parent with too many
// continuations is 4, a parent that is not the caller's 3, rejected args
// 2; with --json the problem is printed too.
func (a *app) refused(err error) error {
	var p *client.Problem
	switch {
	case errors.As(err, &p) && (errors.Is(p, client.ErrDuplicateRejected) || p.Type == client.ProblemUnknownType ||
		p.Type == client.ProblemTooManyContinuations):
		if a.json {
			_ = a.printJSON(p)
		}
		return &refusedError{p.Detail}
	case errors.As(err, &p) && p.Status == http.StatusNotFound: // the job --after names is not the caller's
		if a.json {
			_ = a.printJSON(p)
		}
		return &notFoundError{p.Detail}
	case errors.As(err, &p) && p.Status == http.StatusBadRequest:
		if a.json {
			_ = a.printJSON(p)
		}
		return usagef("enqueue: the API rejected the request: %v", p)
	}
	return err
}

// resolveAPI fills in r's API when --api was not given: for stage local
// the running local stack's, whatever its port.
func (a *app) resolveAPI(r *enqueueRequest, cmd string) error {
	if r.api != "" {
		return nil
	}
	if a.stage != "local" {
		return usagef("%s: --api URL is needed for stage %s (the stack's ApiUrl output)", cmd, a.stage)
	}
	r.api = localapi.DefaultURL
	if a.stateDir == "" {
		a.stateDir = findStateDir()
	}
	if info, ok, err := localStack(a.stateDir); err == nil && ok && info.APIURL != "" {
		r.api = info.APIURL // the running local stack's API, whatever its port
	}
	return nil
}

// isLocal tells an API on this machine (the local stack); tests replace it.
var isLocal = localapi.IsLocal

// producer is the client for r and how it authenticates: unsigned with
// --caller; signed as the local test identity for the local stack (whose
// gateway refuses real AWS credentials); else signed with the standard AWS
// configuration chain.
func (a *app) producer(ctx context.Context, r enqueueRequest) (*client.Client, string, error) {
	switch {
	case r.hasCaller:
		c, err := client.New(r.api, client.WithCaller(r.caller))
		return c, "unsigned, X-Caller " + r.caller, err
	case isLocal(r.api):
		c, err := client.New(r.api, client.WithCredentials(localapi.Credentials(), localapi.Region))
		return c, "signed (SigV4) as the local stack's test identity", err
	}
	cfg, err := awsx.Load(ctx)
	if err != nil {
		return nil, "", err
	}
	c, err := client.New(r.api, client.WithAWSConfig(cfg))
	return c, "signed (SigV4) with the AWS configuration chain", err
}
