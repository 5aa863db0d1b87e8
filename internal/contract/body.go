package contract

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/runstwice/runstwice/internal/lifetime"
	"github.com/runstwice/runstwice/message"
)

// MaxDelaySeconds is the largest delaySeconds (the SQS maximum).
const MaxDelaySeconds = 900

// MaxRunAhead is how far ahead runAt may be: the guards' lives are
// derived from the same constant (internal/lifetime).
const MaxRunAhead = lifetime.MaxRunAhead

// RunNowWithin is how close to now a runAt runs now: one in the past, or
// less than this ahead, is no delay at all.
const RunNowWithin = time.Second

// Body is a decoded, validated job request body: what POST /v1/jobs/{type}
// carries and what an outbox item stands for (docs/api.md).
type Body struct {
	// Args are the job's arguments, valid for its type.
	Args map[string]string
	// Key is the natural idempotency key: the body's "key", or the type's
	// derivation from Args.
	Key string
	// Delay is delaySeconds: how long SQS hides the message.
	Delay time.Duration
	// RunAt is runAt, in UTC; zero when the body has none. The body never
	// has both (a runAt and a delaySeconds).
	RunAt time.Time
	// Policy is duplicatePolicy (AllowAfterFailed when absent).
	Policy DuplicatePolicy
	// After is the job id of the job this one waits for (a continuation):
	// it runs once that job ended as AfterPolicy allows. "" for none. In a
	// batch it may be "#<index>", an earlier job of the same batch.
	After string
	// AfterPolicy is afterPolicy (OnSucceeded when absent); only with After.
	AfterPolicy AfterPolicy
}

// Continuation reports whether the body waits for another job.
func (b Body) Continuation() bool { return b.After != "" }

// bodyFields are the fields a request body may have.
var bodyFields = []string{"args", "key", "delaySeconds", "runAt", "duplicatePolicy", "after", "afterPolicy"}

// DecodeBody is DecodeBodyAt the current time.
func DecodeBody(t message.JobType, body []byte) (Body, error) {
	return DecodeBodyAt(t, body, time.Now())
}

// DecodeBodyAt parses and validates a request body for job type t at now:
// one JSON object of valid UTF-8 with only the fields args (a flat object of
// string IDs valid for t), key, delaySeconds (an integer 0–900) or runAt (an
// RFC 3339 time with Z or an offset, at most MaxRunAhead after now; not
// both), duplicatePolicy, after and afterPolicy. A body that says two
// things is refused before it is read (CheckMembers: a member twice, or
// two names that differ only in case, at any depth), and so is a name that
// differs only in case from a field or an arg of t ("Args", "UserId").
// Every error it returns is a *message.ValidationError naming each bad
// field.
func DecodeBodyAt(t message.JobType, body []byte, now time.Time) (Body, error) {
	top, err := decodeObject(body)
	if err != nil {
		return Body{}, invalid("body", err.Error())
	}
	if err := CheckMembers(body, ""); err != nil {
		return Body{}, err
	}
	verr := &message.ValidationError{}
	add := func(field, reason string) {
		verr.Fields = append(verr.Fields, message.FieldError{Field: field, Reason: reason})
	}
	unknown := make([]string, 0)
	for name := range top {
		if !slices.Contains(bodyFields, name) {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		if known, ok := CaseVariant(name, bodyFields); ok {
			add(Printable(name), CaseReason(known))
			continue
		}
		add(Printable(name), "is not a field of the body; the fields are args, key, delaySeconds, runAt, duplicatePolicy, after and afterPolicy")
	}

	req := Body{Policy: AllowAfterFailed}
	argsOK := false
	if raw, ok := top["args"]; !ok {
		add("args", "is required: an object of string IDs, e.g. "+exampleArgs(t))
	} else if args, fields := decodeArgs(t, raw); len(fields) > 0 {
		verr.Fields = append(verr.Fields, fields...)
	} else if err := t.ValidateArgs(args); err != nil {
		var ve *message.ValidationError
		if !errors.As(err, &ve) {
			return Body{}, fmt.Errorf("contract: validate args: %w", err)
		}
		verr.Fields = append(verr.Fields, ve.Fields...)
	} else {
		req.Args, argsOK = args, true
	}

	if raw, ok := top["key"]; ok {
		var k string
		if json.Unmarshal(raw, &k) != nil || !isJSONString(raw) {
			add("key", "must be a string")
		} else if !message.ValidKey(k) {
			add("key", "must be 1-255 printable ASCII characters without spaces or '@' (keys are stored in plaintext: no e-mail addresses)")
		} else {
			req.Key = k
		}
	} else if argsOK {
		req.Key = t.DeriveKey(req.Args)
	}

	if raw, ok := top["delaySeconds"]; ok {
		n, err := strconv.Atoi(string(raw))
		switch {
		case err != nil:
			add("delaySeconds", "must be an integer number of seconds")
		case n < 0 || n > MaxDelaySeconds:
			add("delaySeconds", fmt.Sprintf("must be between 0 and %d", MaxDelaySeconds))
		default:
			req.Delay = time.Duration(n) * time.Second
		}
	}

	if raw, ok := top["runAt"]; ok {
		if at, reason := parseRunAt(raw, now); reason != "" {
			add("runAt", reason)
		} else {
			req.RunAt = at
		}
		if _, both := top["delaySeconds"]; both {
			add("runAt", "cannot be given together with delaySeconds: give one of them")
		}
	}

	if raw, ok := top["duplicatePolicy"]; ok {
		var s string
		p, valid := DuplicatePolicy(""), false
		if isJSONString(raw) && json.Unmarshal(raw, &s) == nil {
			p, valid = ParsePolicy(s)
		}
		if !valid || s == "" {
			add("duplicatePolicy", "must be one of AllowAfterFailed, RejectIfFailed, RejectAlways")
		} else {
			req.Policy = p
		}
	}
	decodeAfter(top, &req, add)
	if len(verr.Fields) > 0 {
		return Body{}, verr
	}
	return req, nil
}

// decodeAfter reads after and afterPolicy into req: after is a job id (a
// canonical UUID) or, in a batch, "#<index>" (checked by the batch); it
// cannot come with runAt or delaySeconds (a continuation runs when its
// parent ends), and afterPolicy needs it.
func decodeAfter(top map[string]json.RawMessage, req *Body, add func(field, reason string)) {
	raw, ok := top["after"]
	if ok {
		var s string
		switch {
		case !isJSONString(raw) || json.Unmarshal(raw, &s) != nil:
			add("after", "must be a string: the jobId of the job this one waits for")
		case strings.HasPrefix(s, "#"):
			req.After = s
		case !message.CanonicalUUID(s):
			add("after", "must be a jobId (a lowercase UUID, as the 202 answer gave it)")
		default:
			req.After = s
		}
		for _, f := range []string{"runAt", "delaySeconds"} {
			if _, both := top[f]; both {
				add("after", "cannot be given together with "+f+": a continuation runs as soon as the job it waits for ends")
			}
		}
	}
	rawPolicy, hasPolicy := top["afterPolicy"]
	if !hasPolicy {
		if ok {
			req.AfterPolicy = OnSucceeded
		}
		return
	}
	var s string
	p, valid := AfterPolicy(""), false
	if isJSONString(rawPolicy) && json.Unmarshal(rawPolicy, &s) == nil {
		p, valid = ParseAfterPolicy(s)
	}
	switch {
	case !valid || s == "":
		add("afterPolicy", "must be one of OnSucceeded, OnAnyEnd")
	case !ok:
		add("afterPolicy", "needs after: the jobId of the job this one waits for")
	default:
		req.AfterPolicy = p
	}
}

// parseRunAt reads runAt: an RFC 3339 time (Z or an offset), at most
// MaxRunAhead after now, returned in UTC; or the reason it is invalid.
func parseRunAt(raw json.RawMessage, now time.Time) (time.Time, string) {
	var v string
	if !isJSONString(raw) || json.Unmarshal(raw, &v) != nil {
		return time.Time{}, `must be an RFC 3339 time as a string, e.g. "2026-12-01T09:00:00Z"`
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, `must be an RFC 3339 time with Z or an offset, e.g. "2026-12-01T09:00:00Z" or "2026-12-01T10:00:00+01:00"`
	}
	if at.Sub(now) > MaxRunAhead {
		return time.Time{}, "must be at most 365 days ahead"
	}
	return at.UTC(), ""
}

// decodeObject parses body as exactly one JSON object of valid UTF-8.
func decodeObject(body []byte) (map[string]json.RawMessage, error) {
	if !utf8.Valid(body) {
		return nil, errors.New("is not valid UTF-8")
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return nil, errors.New("is empty (want a JSON object)")
	}
	if trimmed[0] != '{' {
		return nil, errors.New("must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var top map[string]json.RawMessage
	if err := dec.Decode(&top); err != nil {
		// Say where, as the worker's reason does: the byte offset in the
		// body, counted from 1, and what the parser found there.
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("is not valid JSON: %s at byte %d", syn.Error(), syn.Offset+int64(len(body)-len(bytes.TrimLeft(body, " \t\r\n"))))
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("is not valid JSON: it ends early, at byte %d", len(body))
		}
		return nil, fmt.Errorf("is not valid JSON: %s", err.Error())
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("has data after the JSON object")
	}
	return top, nil
}

// decodeArgs parses args as a flat object of strings, none of whose names
// differs only in case from an argument of t.
func decodeArgs(t message.JobType, raw json.RawMessage) (map[string]string, []message.FieldError) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, []message.FieldError{{Field: "args", Reason: "must be an object of string IDs"}}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return nil, []message.FieldError{{Field: "args", Reason: "must be an object of string IDs"}}
	}
	args := make(map[string]string, len(m))
	var fields []message.FieldError
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	argNames := make([]string, len(t.Args))
	for i, a := range t.Args {
		argNames[i] = a.Name
	}
	for _, name := range names {
		if known, ok := CaseVariant(name, argNames); ok {
			fields = append(fields, message.FieldError{Field: "args." + Printable(name), Reason: CaseReason(known)})
			continue
		}
		v := m[name]
		var s string
		if !isJSONString(v) || json.Unmarshal(v, &s) != nil {
			fields = append(fields, message.FieldError{Field: "args." + Printable(name), Reason: "must be a string ID, not " + jsonKind(v)})
			continue
		}
		args[name] = s
	}
	return args, fields
}

func isJSONString(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) >= 2 && t[0] == '"'
}

func jsonKind(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// Printable keeps an attacker-chosen name short and printable in errors.
func Printable(s string) string {
	const limit = 40
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == limit {
			b.WriteString("…")
			break
		}
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			r = '?'
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

func invalid(field, reason string) *message.ValidationError {
	return &message.ValidationError{Fields: []message.FieldError{{Field: field, Reason: reason}}}
}

// exampleArgs shows the args of t as a JSON object, for error details.
func exampleArgs(t message.JobType) string {
	parts := make([]string, len(t.Args))
	for i, a := range t.Args {
		parts[i] = fmt.Sprintf("%q:%q", a.Name, a.Format.Example())
	}
	return "{" + strings.Join(parts, ",") + "}"
}
