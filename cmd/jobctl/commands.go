package main

import (
	"context"
	"fmt"
	"strings"
)

// command is one jobctl command.
type command struct {
	name  string // one or two words: "dlq redrive"
	usage string // its synopsis, one line, starting with name
	help  string // what it does, a few lines
	run   func(a *app, ctx context.Context, args []string) error
}

const filterFlags = "[--type T] [--since D] [--reason TEXT]"

// globalUsage is the synopsis of the whole command line.
const globalUsage = "jobctl [--stage S] [--endpoint URL] [--json] COMMAND"

// commands is every command, in the order help lists them. A command added
// in its own file registers here with one line. A command checks its
// arguments first, then calls a.connect for AWS, so a usage error never
// waits on AWS.
var commands = []*command{
	{name: "toggles list", usage: "toggles list", run: (*app).togglesList,
		help: "Every job type's kill switch: stored value, registered default, effective state,\n" +
			"until (and time left), reason, who changed it last; parameters that name no type are flagged."},
	{name: "toggles set", usage: "toggles set TYPE on|off [--for DURATION] [--reason TEXT]", run: (*app).togglesSet,
		help: "Flip a kill switch. --for time-boxes it (e.g. 30m, 2h): past it the switch reverts to the\n" +
			"type's registered default by itself. --reason says why (shown by toggles list).\n" +
			"A type not in the registry is refused, with the nearest name suggested."},
	{name: "dlq list", usage: "dlq list " + filterFlags + " [--status dead|redriven|succeeded|dropped|all]", run: (*app).dlqList,
		help: "Dead letters (status dead unless --status), with counts per type and per reason first.\n" +
			"--since takes a duration (2h, 3d) or an RFC 3339 time and keeps letters last seen since then;\n" +
			"--reason keeps letters whose reason contains TEXT (any case)."},
	{name: "dlq redrive", usage: "dlq redrive ID|--all " + filterFlags + " [--rate N/s] [--dry-run] [--force]", run: (*app).dlqRedrive,
		help: "Send dead letters back to their queue under the same messageId; each job becomes active again.\n" +
			"--all takes every dead letter the filters select. --rate bounds sends per second (default 10;\n" +
			"0: no limit). --dry-run says what would happen and changes nothing. A letter whose key a newer job\n" +
			"has taken is reported superseded and left alone unless --force."},
	{name: "dlq drop", usage: "dlq drop ID|--all " + filterFlags + " [--dry-run] --yes", run: (*app).dlqDrop,
		help: "Give up on dead letters: each is kept with its reason (status dropped) and its job reads Failed.\n" +
			"Without --yes nothing is dropped: it says what would be."},
	{name: "jobs get", usage: "jobs get ID", run: (*app).jobsGet,
		help: "A job: its state (as GET shows it) and every field of its job record."},
	{name: "jobs list", usage: "jobs list [--type T] [--state S] [--since D] [--internal]", run: (*app).jobsList,
		help: "Jobs, newest first, with their states. --since keeps jobs created since then. runstwice's own\n" +
			"jobs (its sweeps' ticks, a batch's finisher) are left out, and counted, unless --internal or\n" +
			"--type names one."},
	{name: "jobs trace", usage: "jobs trace ID [--api URL]", run: (*app).jobsTrace,
		help: "A job's trace as the local stack's OTLP receiver holds it: every span, nested under its parent,\n" +
			"with its service, kind, start, duration, a bar on the trace's time line and the spans it links to\n" +
			"(--json: the traces API's answer). A deployed stage keeps no spans of its own: they are in the\n" +
			"collector its OtlpEndpoint names."},
	{name: "jobs cancel", usage: "jobs cancel ID", run: (*app).jobsCancel,
		help: "Cancel a job that has not run, whoever enqueued it: it never runs, even if its message is\n" +
			"delivered later. A job waiting in a one-time schedule (due later than 15 minutes) loses its\n" +
			"schedule too. A job that already ran (or is running) is refused with its state."},
	{name: "jobs run-now", usage: "jobs run-now ID", run: (*app).jobsRunNow,
		help: "Run a Scheduled job at once: its one-time schedule is deleted and its message sent to its queue\n" +
			"under its id; it then reads Enqueued. Running it twice sends one job: the second run finds it\n" +
			"already sent and sends nothing. A job in any other state is refused with its state (4)."},
	{name: "schedules list", usage: "schedules list", run: (*app).schedulesList,
		help: "The stage's schedules: the recurring ones (group runstwice-<stage>-recurring) and the one-time\n" +
			"schedules of jobs run at a time (runstwice-<stage>-jobs), each with its expression, time zone, state,\n" +
			"next fire, the job type it makes and that type's kill switch."},
	{name: "schedules trigger", usage: schedulesTriggerUsage, run: (*app).schedulesTrigger,
		help: "Send a recurring schedule's tick now, for the scheduled time --at (RFC 3339; default now, to the\n" +
			"minute), as the scheduler would. The job id comes from the schedule's name and that time: the same\n" +
			"time twice is one job. A missed or dropped tick is sent again this way."},
	{name: "users set-email", usage: "users set-email USER_ID ADDRESS", run: (*app).usersSetEmail,
		help: "Store ADDRESS as the user's e-mail address, the fix for a dead letter \"stored e-mail address is\n" +
			"not a plain address\" before its redrive. ADDRESS must be one plain address (ada@example.com, no\n" +
			"display name); whether the address is confirmed stays as it was. An unknown user is not found (3)."},
	{name: "demo signup", usage: "demo signup USER_ID EMAIL [--name NAME] [--role CODE] [--country CC]", run: (*app).demoSignup,
		help: "An application's signup through the outbox: one DynamoDB transaction writes the new user\n" +
			"(unconfirmed) and the outbox item of its partner verification mail (role city-partner and country\n" +
			"BD unless given); the outbox relay then enqueues the job, and the mail goes out. The user existing\n" +
			"already fails the transaction: nothing is written and no job is made (4)."},
	{name: "enqueue", usage: enqueueUsage, run: (*app).enqueue, help: enqueueHelp},
	{name: "batches get", usage: batchesGetUsage, run: (*app).batchesGet,
		help: "A batch of the caller's through the API (GET /v1/batches/{batchId}): its state (Accepted, or Accepting\n" +
			"while an accept cut short completes by itself) and each job's id and state now, with the count per\n" +
			"state. --api and --caller as for enqueue. Another caller's batch, or none, is not found (3)."},
}

// find returns the command args name, and the rest of args.
func find(args []string, help bool) (*command, []string, error) {
	if len(args) == 0 {
		if help {
			return nil, nil, nil
		}
		return nil, nil, usagef("no command given")
	}
	for _, words := range []int{2, 1} {
		if len(args) < words {
			continue
		}
		name := strings.Join(args[:words], " ")
		for _, c := range commands {
			if c.name == name {
				return c, args[words:], nil
			}
		}
	}
	if help && isGroup(args[0]) {
		return &command{name: args[0]}, nil, nil
	}
	given := strings.Join(args[:min(2, len(args))], " ")
	if isGroup(args[0]) {
		return nil, nil, usagef("unknown command %q (%s: %s)", given, args[0], strings.Join(groupCommands(args[0]), ", "))
	}
	return nil, nil, usagef("unknown command %q", given)
}

func isGroup(word string) bool { return len(groupCommands(word)) > 0 }

// groupCommands lists the commands whose first word is word.
func groupCommands(word string) []string {
	var out []string
	for _, c := range commands {
		if first, _, _ := strings.Cut(c.name, " "); first == word {
			out = append(out, c.name)
		}
	}
	return out
}

// printHelp writes the help of c (every command when nil; a group's
// commands when c names a group) to stdout.
func (a *app) printHelp(c *command) {
	if c == nil {
		fmt.Fprint(a.stdout, usage())
		return
	}
	for _, cmd := range commands {
		if cmd.name == c.name || strings.HasPrefix(cmd.name, c.name+" ") {
			fmt.Fprintf(a.stdout, "usage: jobctl %s\n\n%s\n\n", cmd.usage, indent(cmd.help))
		}
	}
	fmt.Fprint(a.stdout, globalHelp)
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

const globalHelp = `global flags (anywhere on the line):
  --stage S      the stage (default $RUNSTWICE_STAGE, else $STAGE, else "local")
  --endpoint URL the AWS endpoint (default $AWS_ENDPOINT_URL; for stage local, the running
                 local stack from .devstack/stack.json)
  --json         machine-readable output
  -h, --help     help, on stdout

exit codes:
  0 success
  1 an AWS or runtime error (no credentials, no endpoint, a failed call)
  2 usage: the command line is wrong
  3 not found: no such job, dead letter or user
  4 refused: understood and not done (a type not in the registry, a superseded letter
    without --force, a drop without --yes, a letter that cannot be redriven)
`

func usage() string {
	var b strings.Builder
	b.WriteString("jobctl: the on-call tool for runstwice (kill switches, dead letters, jobs)\n\nusage: " + globalUsage + "\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "  %s\n", c.usage)
	}
	b.WriteString("\n`jobctl COMMAND --help` tells more of each.\n\n")
	b.WriteString(globalHelp)
	return b.String()
}

// cmdArgs is a command's own arguments, parsed.
type cmdArgs struct {
	pos  []string
	vals map[string]string
	set  map[string]bool
}

// parseN is parseArgs for a command that takes exactly n positionals: any
// other count is a usage error saying that cmd takes what ("no arguments",
// "one job ID").
func parseN(args []string, spec map[string]bool, n int, cmd, what string) (cmdArgs, error) {
	p, err := parseArgs(args, spec)
	if err == nil && len(p.pos) != n {
		err = usagef("%s takes %s, got %q", cmd, what, strings.Join(p.pos, " "))
	}
	return p, err
}

// parseArgs parses a command's arguments: flags (--name, --name=value,
// --name value) anywhere among positionals. spec maps each flag the
// command takes to whether it takes a value.
func parseArgs(args []string, spec map[string]bool) (cmdArgs, error) {
	p := cmdArgs{vals: map[string]string{}, set: map[string]bool{}}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			p.pos = append(p.pos, arg)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		takesValue, known := spec[name]
		switch {
		case !known:
			return p, usagef("unknown flag %s", arg)
		case takesValue && !hasValue:
			if i+1 >= len(args) {
				return p, usagef("--%s needs a value", name)
			}
			i++
			value = args[i]
		case !takesValue && hasValue:
			return p, usagef("--%s takes no value", name)
		}
		p.vals[name], p.set[name] = value, true
	}
	return p, nil
}
