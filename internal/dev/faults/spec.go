package faults

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what a fault does to a call.
type Kind string

// The kinds of faults.
const (
	// Throttle answers the call with the service's own throttling error
	// (DynamoDB ProvisionedThroughputExceededException or
	// ThrottlingException, SQS and SSM ThrottlingException, SES v2
	// TooManyRequestsException) without forwarding it. With a Rule.Rate it
	// throttles only the calls past that many per second.
	Throttle Kind = "throttle"
	// Error500 answers HTTP 500 (InternalServerError) without forwarding.
	Error500 Kind = "500"
	// Error503 answers HTTP 503 (ServiceUnavailable) without forwarding.
	Error503 Kind = "503"
	// Reset cuts the connection (TCP reset) without forwarding.
	Reset Kind = "reset"
	// Delay holds the call for Rule.Delay, then forwards it.
	Delay Kind = "delay"
	// Drop forwards the call (it is applied upstream), then cuts the
	// connection: the caller never sees the response.
	Drop Kind = "drop"
	// Drop500 forwards the call (it is applied upstream), then answers
	// HTTP 500 instead of the response.
	Drop500 Kind = "drop500"
	// Down makes the service unreachable: every call it matches is cut
	// before it is forwarded (an outage; give it a window).
	Down Kind = "down"
)

// Kinds lists every kind, in the order a ledger shows them.
var Kinds = []Kind{Throttle, Error500, Error503, Reset, Delay, Drop, Drop500, Down}

// DefaultDelay is how long a Delay holds a call when its rule names no
// duration.
const DefaultDelay = 250 * time.Millisecond

// Rule is one fault: which calls it applies to, what it does and how often.
type Rule struct {
	// Service is the SigV4 signing name ("dynamodb", "sqs", "ssm", "ses")
	// or "*" for any.
	Service string
	// Operation is the API operation ("PutItem", "SendEmail") or "*".
	Operation string
	// Contains, when set, narrows the rule to calls whose request path and
	// body hold every one of these texts (e.g. a table name and "DONE": one
	// kind of write to one table; a job id: the DeleteSchedule of its
	// one-time schedule, named in the path).
	Contains []string
	Kind     Kind
	// P is the probability that a matching call gets the fault (0 < P ≤ 1).
	P float64
	// Delay is how long a Delay holds the call (DefaultDelay when zero).
	Delay time.Duration
	// Rate, for a Throttle, is how many matching calls per second go
	// through: a token bucket of the rule (holding at most Rate calls,
	// rounded up) lets them pass and the rule throttles the others, as a
	// service's own rate limit does. Zero throttles every call it draws.
	Rate float64
	// From and Until bound when the rule applies, measured from the
	// injector's start; Until zero means for ever.
	From, Until time.Duration
	// Limit is the most calls the rule faults (0: no limit).
	Limit int
}

// String returns the rule in the syntax Parse reads.
func (r Rule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%s", r.Service, r.Operation)
	for _, c := range r.Contains {
		b.WriteString("~" + c)
	}
	fmt.Fprintf(&b, ":%s", r.Kind)
	if r.Kind == Delay && r.Delay > 0 {
		fmt.Fprintf(&b, "(%s)", r.Delay)
	}
	if r.Kind == Throttle && r.Rate > 0 {
		fmt.Fprintf(&b, "(%s/s)", strconv.FormatFloat(r.Rate, 'g', -1, 64))
	}
	if r.P != 1 {
		b.WriteString("=" + strconv.FormatFloat(r.P, 'g', -1, 64))
	}
	if r.Limit > 0 {
		fmt.Fprintf(&b, "#%d", r.Limit)
	}
	if r.From > 0 || r.Until > 0 {
		b.WriteString("@" + r.From.String() + "-")
		if r.Until > 0 {
			b.WriteString(r.Until.String())
		}
	}
	return b.String()
}

// matches reports whether the rule applies to a call of service and
// operation with body at elapsed since the start.
func (r Rule) matches(service, operation string, body []byte, elapsed time.Duration) bool {
	if !(r.Service == "*" || strings.EqualFold(r.Service, service)) ||
		!(r.Operation == "*" || r.Operation == operation) ||
		elapsed < r.From || (r.Until != 0 && elapsed >= r.Until) {
		return false
	}
	for _, c := range r.Contains {
		if !bytes.Contains(body, []byte(c)) {
			return false
		}
	}
	return true
}

// ErrSpec is returned (wrapped) for a fault spec Parse cannot read.
var ErrSpec = errors.New("faults: bad spec")

// Parse reads a comma-separated list of rules, each
//
//	SERVICE:OPERATION[~TEXT…]:KIND[(DURATION|RATE/s)][=PROBABILITY][#LIMIT][@FROM-[UNTIL]]
//
// SERVICE and OPERATION may be "*"; each ~TEXT narrows the rule to calls
// whose request body contains TEXT (no ':', ',', '~', '=', '#' or '@');
// KIND is one of Kinds; DURATION is a Go
// duration for delay; RATE is the calls per second a throttle lets through
// (throttle(2/s): SES at 2 mails a second); PROBABILITY defaults to 1; LIMIT caps how many calls
// the rule faults; FROM and UNTIL are Go durations since the start (an
// empty UNTIL: until the end). For example:
//
//	dynamodb:*:throttle=0.02,dynamodb:PutItem:drop=0.02,sqs:SendMessage:500=0.02,
//	ses:*:drop=0.01,dynamodb:*:delay(300ms)=0.05,ssm:*:down@1m-2m,ses:SendEmail:throttle(2/s)
//
// An empty spec is no rules.
func Parse(spec string) ([]Rule, error) {
	var rules []Rule
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		r, err := parseRule(part)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrSpec, part, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseRule(s string) (Rule, error) {
	r := Rule{P: 1}
	if rest, window, ok := strings.Cut(s, "@"); ok {
		s = rest
		from, until, ok := strings.Cut(window, "-")
		if !ok {
			return r, errors.New("a window is @FROM-UNTIL (UNTIL may be empty)")
		}
		var err error
		if r.From, err = time.ParseDuration(from); err != nil {
			return r, fmt.Errorf("window start: %w", err)
		}
		if until != "" {
			if r.Until, err = time.ParseDuration(until); err != nil {
				return r, fmt.Errorf("window end: %w", err)
			}
			if r.Until <= r.From {
				return r, errors.New("the window ends before it starts")
			}
		}
	}
	if rest, limit, ok := strings.Cut(s, "#"); ok {
		s = rest
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 {
			return r, errors.New("a limit is #N with N ≥ 1")
		}
		r.Limit = n
	}
	if rest, p, ok := strings.Cut(s, "="); ok {
		s = rest
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 || f > 1 {
			return r, errors.New("a probability is a number in (0, 1]")
		}
		r.P = f
	}
	fields := strings.Split(s, ":")
	if len(fields) != 3 || fields[0] == "" || fields[1] == "" || fields[2] == "" {
		return r, errors.New("want SERVICE:OPERATION:KIND")
	}
	r.Service = strings.ToLower(fields[0])
	op, texts, narrowed := strings.Cut(fields[1], "~")
	if op == "" {
		return r, errors.New("want SERVICE:OPERATION:KIND")
	}
	r.Operation = op
	if narrowed {
		for t := range strings.SplitSeq(texts, "~") {
			if t == "" {
				return r, errors.New("~ needs a text: OPERATION~TEXT")
			}
			r.Contains = append(r.Contains, t)
		}
	}
	kind := fields[2]
	if name, arg, ok := strings.Cut(kind, "("); ok {
		arg, closed := strings.CutSuffix(arg, ")")
		switch {
		case closed && name == string(Delay):
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return r, errors.New("delay(DURATION) needs a positive Go duration")
			}
			r.Delay = d
		case closed && name == string(Throttle):
			n, perSecond := strings.CutSuffix(arg, "/s")
			f, err := strconv.ParseFloat(n, 64)
			if !perSecond || err != nil || f <= 0 || math.IsInf(f, 0) {
				return r, errors.New("throttle(RATE/s) needs a positive number of calls per second, e.g. throttle(2/s)")
			}
			r.Rate = f
		default:
			return r, errors.New("only delay and throttle take an argument: delay(DURATION), throttle(RATE/s)")
		}
		kind = name
	}
	r.Kind = Kind(strings.ToLower(kind))
	if !slices.Contains(Kinds, r.Kind) {
		return r, fmt.Errorf("unknown kind %q (want one of %s)", kind, strings.Join(KindNames(), ", "))
	}
	return r, nil
}

// KindNames lists the names of Kinds, in their order.
func KindNames() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = string(k)
	}
	return names
}
