package ssmswitch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Value is a toggle parameter's value, parsed: a plain on/off, or a JSON object that may
// also carry an expiry and a reason:
//
//	{"enabled":false,"until":"2026-12-01T10:00:00Z","reason":"SES incident 4711"}
//
// Past Until the switch reverts to the type's registered default, never to
// the opposite of what was set: a fail-closed type switched on for an hour
// goes back off by itself.
type Value struct {
	Enabled bool
	// Until is when the value stops applying; zero means never.
	Until time.Time
	// Reason says why the switch was set ("" when none was given).
	Reason string
}

// MaxReason bounds a reason, which SSM stores beside the value (a standard
// parameter holds 4 KB).
const MaxReason = 512

// jsonValue is the JSON form of a Value. Enabled is a pointer so that a
// missing "enabled" is an unreadable value, not "off".
type jsonValue struct {
	Enabled *bool  `json:"enabled"`
	Until   string `json:"until,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// ErrUnreadable is returned (wrapped) by ParseValue for a value that is
// neither a plain on/off value nor a well-formed JSON one.
var ErrUnreadable = errors.New("toggle: unreadable value")

// ParseValue reads a toggle parameter's stored value: a plain value (see Parse), or a
// JSON object with "enabled" (required), "until" (RFC 3339, optional) and
// "reason" (optional). Unknown fields are refused: a misspelt "until" must
// not silently make a time-boxed switch permanent.
func ParseValue(raw string) (Value, error) {
	if enabled, ok := Parse(raw); ok {
		return Value{Enabled: enabled}, nil
	}
	trimmed := strings.TrimSpace(raw)
	if !strings.HasPrefix(trimmed, "{") {
		return Value{}, fmt.Errorf("%w: %q is not on/off/true/false/1/0 or a JSON object", ErrUnreadable, clip(raw))
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.DisallowUnknownFields()
	var jv jsonValue
	if err := dec.Decode(&jv); err != nil {
		return Value{}, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Value{}, fmt.Errorf("%w: trailing data after the JSON object", ErrUnreadable)
	}
	if jv.Enabled == nil {
		return Value{}, fmt.Errorf("%w: JSON value without \"enabled\"", ErrUnreadable)
	}
	v := Value{Enabled: *jv.Enabled, Reason: jv.Reason}
	if jv.Until != "" {
		t, err := time.Parse(time.RFC3339, jv.Until)
		if err != nil {
			return Value{}, fmt.Errorf("%w: \"until\" is not an RFC 3339 time: %q", ErrUnreadable, clip(jv.Until))
		}
		v.Until = t.UTC()
	}
	return v, nil
}

// Encode returns the stored form of v: the plain "on"/"off" when it has no
// expiry and no reason, else the JSON object.
func (v Value) Encode() (string, error) {
	if len(v.Reason) > MaxReason {
		return "", fmt.Errorf("toggle: reason longer than %d bytes", MaxReason)
	}
	if v.Until.IsZero() && v.Reason == "" {
		if v.Enabled {
			return "on", nil
		}
		return "off", nil
	}
	jv := jsonValue{Enabled: &v.Enabled, Reason: v.Reason}
	if !v.Until.IsZero() {
		jv.Until = v.Until.UTC().Format(time.RFC3339)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jv); err != nil {
		return "", fmt.Errorf("toggle: encode: %w", err)
	}
	return strings.TrimSpace(b.String()), nil
}

// Expired reports whether v has an expiry that has passed at now.
func (v Value) Expired(now time.Time) bool {
	return !v.Until.IsZero() && !now.Before(v.Until)
}

// Effective is whether the switch is on at now for a type whose registered
// default is def: v.Enabled until v.Until, def afterwards.
func (v Value) Effective(def bool, now time.Time) bool {
	if v.Expired(now) {
		return def
	}
	return v.Enabled
}

func clip(s string) string {
	const limit = 80
	if len(s) > limit {
		return s[:limit] + "…"
	}
	return s
}
