package schedule

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The message attributes EventBridge Scheduler sets on the message it
// sends to a schedule's dead-letter queue when it could not deliver the
// schedule's input to its target (a one-time job's envelope, a recurring
// schedule's tick). The message's body is that input.
const (
	// AttrErrorCode is the scheduler's (or the target's) error code.
	AttrErrorCode = "ERROR_CODE"
	// AttrErrorMessage is the error's free text. runstwice never keeps it
	// (it is a provider's message, which may quote anything).
	AttrErrorMessage = "ERROR_MESSAGE"
	// AttrExhaustedRetryCondition is MaximumRetryAttempts or
	// MaximumEventAgeInSeconds when the retry policy ran out; absent for an
	// error that is not retried.
	AttrExhaustedRetryCondition = "EXHAUSTED_RETRY_CONDITION"
	// AttrRetryAttempts is how many times the delivery was retried after
	// the first try.
	AttrRetryAttempts = "RETRY_ATTEMPTS"
	// AttrScheduleARN is the schedule's ARN.
	AttrScheduleARN = "SCHEDULE_ARN"
	// AttrTargetARN is the target's ARN (for runstwice, a work queue's).
	AttrTargetARN = "TARGET_ARN"
	// AttrScheduledTime is when the firing was due.
	AttrScheduledTime = "SCHEDULED_TIME"
	// AttrExecutionID is the firing's execution id.
	AttrExecutionID = "EXECUTION_ID"
	// AttrPayloadTruncated is "true" when the body was cut to fit.
	AttrPayloadTruncated = "IS_PAYLOAD_TRUNCATED"
)

var (
	// letterCode is an error code or a retry condition as the scheduler
	// writes them (AWS.Scheduler.InternalServerError, MaximumRetryAttempts).
	letterCode = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)
	// queueARN is an SQS queue's ARN.
	queueARN = regexp.MustCompile(`^arn:aws[a-z-]*:sqs:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,80}$`)
	// scheduleARN is a schedule's ARN: …:schedule/<group>/<name>.
	scheduleARN = regexp.MustCompile(`^arn:aws[a-z-]*:scheduler:[a-z0-9-]+:[0-9]{12}:schedule/([0-9A-Za-z._-]{1,64})/([0-9A-Za-z._-]{1,64})$`)
)

// UnknownCode stands for an error code that is absent or not a code.
const UnknownCode = "unknown"

// Letter is what EventBridge Scheduler says of a message it dead-lettered,
// each field checked: only codes, counts and ARNs, never the error's text.
type Letter struct {
	// Code is the error code (UnknownCode when absent or malformed).
	Code string
	// Exhausted is the retry condition that ran out ("" when the error was
	// not retried).
	Exhausted string
	// Retries is how often the delivery was retried after its first try.
	Retries int
	// Group and Schedule name the schedule ("" when its ARN is absent or
	// malformed).
	Group, Schedule string
	// TargetARN is the queue it could not deliver to ("" when absent or not
	// an SQS queue's ARN).
	TargetARN string
	// Truncated says the scheduler cut the message's body to fit the
	// queue (IS_PAYLOAD_TRUNCATED "true"): it is not the whole input.
	Truncated bool
}

// LetterOf reads the scheduler's attributes of a dead letter (attribute
// name to string value). ok is false when the message is not the
// scheduler's: it carries neither ERROR_CODE nor SCHEDULE_ARN.
func LetterOf(attrs map[string]string) (l Letter, ok bool) {
	code, hasCode := attrs[AttrErrorCode]
	arn, hasARN := attrs[AttrScheduleARN]
	if !hasCode && !hasARN {
		return Letter{}, false
	}
	l.Code = UnknownCode
	if letterCode.MatchString(code) {
		l.Code = code
	}
	if c := attrs[AttrExhaustedRetryCondition]; letterCode.MatchString(c) {
		l.Exhausted = c
	}
	if n, err := strconv.Atoi(strings.TrimSpace(attrs[AttrRetryAttempts])); err == nil && n >= 0 {
		l.Retries = n
	}
	if m := scheduleARN.FindStringSubmatch(arn); m != nil {
		l.Group, l.Schedule = m[1], m[2]
	}
	if t := attrs[AttrTargetARN]; queueARN.MatchString(t) {
		l.TargetARN = t
	}
	l.Truncated = strings.EqualFold(strings.TrimSpace(attrs[AttrPayloadTruncated]), "true")
	return l, true
}

// Attempts is how many times the scheduler tried to deliver: the first
// try and its retries.
func (l Letter) Attempts() int { return l.Retries + 1 }

// Reason is the dead letter's reason in words, from codes and counts only:
// "EventBridge Scheduler could not deliver it to its queue: <code> (after
// 3 retries; MaximumRetryAttempts ran out)".
func (l Letter) Reason() string {
	var b strings.Builder
	b.WriteString("EventBridge Scheduler could not deliver it to its queue: " + l.Code)
	switch {
	case l.Exhausted != "":
		fmt.Fprintf(&b, " (after %d %s; %s ran out)", l.Retries, plural(l.Retries, "retry", "retries"), l.Exhausted)
	case l.Retries > 0:
		fmt.Fprintf(&b, " (after %d %s)", l.Retries, plural(l.Retries, "retry", "retries"))
	default:
		b.WriteString(" (not retried)")
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
