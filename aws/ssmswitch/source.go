// Package ssmswitch is the engine.Switch on SSM Parameter Store: one
// toggle parameter per job type, <path>/<job type>, whose value "true"/"on" or
// "false"/"off" turns the type on or off (an expiry and a reason may
// follow; see the bundle's operations guide).
//
// The parameters under path are read in one GetParametersByPath call and
// cached for the Source's TTL. A read that fails (denied, throttled,
// unreachable, or out of time under the caller's context) keeps the values
// of the last read that succeeded, for another TTL before it asks again; a
// source that has never read (a cold start during an outage) answers each
// type's EnabledByDefault, so a type that is off by default never runs on
// a guess. A kept value with an expiry still reverts to the default once
// it has passed, and a missing or unreadable value is the default. Read
// failures are logged and counted (ToggleReadFailed). The function's role
// needs ssm:GetParametersByPath on the path.
//
// The rules, so that a fail-closed type can never start by accident:
//   - a missing parameter gives the registry default;
//   - an unreadable value gives the default, and is flagged (logged and
//     counted as UnreadableToggle, once per refresh);
//   - SSM unreachable gives the last value read, else the default, and the
//     failed read is logged and counted as ToggleReadFailed (once per
//     refresh), whatever the cause: access denied, throttled, unreachable;
//   - a value with an expiry ("until") gives the default once it has passed,
//     judged at each decision against the clock, so a value read before an
//     SSM outage still expires on time;
//   - a parameter that names no registered type (a typo) is logged and
//     counted as UnknownToggle.
package ssmswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/runstwice/runstwice/engine"
)

// DefaultTTL is how long values read from SSM are trusted.
const DefaultTTL = 30 * time.Second

// Parse reads a toggle parameter's plain value: true/false, on/off, 1/0, yes/no, enabled/
// disabled, case-insensitive and trimmed. ok is false for anything else.
func Parse(raw string) (enabled, ok bool) {
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "on", "1", "yes", "enabled":
		return true, true
	case "false", "off", "0", "no", "disabled":
		return false, true
	}
	return false, false
}

// API is the part of the SSM client the source uses.
type API interface {
	GetParametersByPath(ctx context.Context, in *ssm.GetParametersByPathInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error)
}

// Source reads the kill switches from their toggle parameters in SSM
// Parameter Store and caches them. It is safe
// for concurrent use; concurrent refreshes collapse into one call.
type Source struct {
	client API
	path   string
	known  func(string) bool

	// TTL is how long a read is trusted (DefaultTTL if 0).
	TTL time.Duration
	// Logger receives warnings about typos, unreadable values and SSM errors.
	Logger *slog.Logger
	// Metrics counts UnknownToggle, UnreadableToggle and ToggleReadFailed (the function
	// flushes it at the end of each invocation).
	Metrics *engine.Metrics
	// Now is the clock (time.Now if nil).
	Now func() time.Time

	mu        sync.Mutex
	values    map[string]parsed
	loaded    bool
	fetchedAt time.Time
	lastErr   error
}

// New returns a source for the switches under path. known
// reports whether a type name is registered; parameters naming anything else
// are flagged as unknown.
func New(client API, path string, known func(string) bool) *Source {
	return &Source{client: client, path: strings.TrimSuffix(path, "/"), known: known}
}

func (s *Source) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Source) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return DefaultTTL
}

func (s *Source) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// parsed is one parameter as read: its value, or why it is unreadable.
type parsed struct {
	value Value
	err   error
}

// IsJobEnabled reports whether jobType may run; def is the registry default,
// used when the parameter is missing or unreadable, when its expiry has
// passed, or when SSM has never answered. The expiry is judged now, not when
// the value was read.
func (s *Source) IsJobEnabled(ctx context.Context, jobType string, def bool) bool {
	values := s.current(ctx)
	p, ok := values[jobType]
	if !ok || p.err != nil {
		return def // an unreadable value is flagged once per refresh, in current
	}
	return p.value.Effective(def, s.now())
}

// current returns the cached values, refreshing them when the TTL has passed.
// On an SSM error it keeps the last values read (none, at first).
func (s *Source) current(ctx context.Context) map[string]parsed {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < s.ttl() {
		return s.values
	}
	// Whatever happens, wait a TTL before asking again: SSM errors must not
	// turn every invocation into a call.
	s.fetchedAt = now
	raw, err := s.read(ctx)
	if err != nil {
		s.lastErr = err
		kind := ReadFailure(err)
		s.logger().Warn("toggles unreadable; keeping the last values read, else the defaults",
			"error", err, "failure", kind, "path", s.path, "haveLastValues", s.loaded)
		s.Metrics.Count(engine.ToggleReadFailed, kind, 1)
		return s.values
	}
	values := make(map[string]parsed, len(raw))
	for name, v := range raw {
		p := parsed{}
		p.value, p.err = ParseValue(v)
		values[name] = p
	}
	s.values, s.loaded, s.lastErr = values, true, nil
	for _, name := range sortedKeys(raw) {
		if err := values[name].err; err != nil {
			s.logger().Warn("toggle value unreadable; the registry default applies",
				"type", name, "value", clip(raw[name]), "parameter", s.path+"/"+name, "error", err)
			s.Metrics.Count(engine.UnreadableToggle, name, 1)
		}
	}
	for _, name := range s.unknown(raw) {
		s.logger().Warn("toggle parameter names no registered job type (typo?)", "parameter", s.path+"/"+name)
		s.Metrics.Count(engine.UnknownToggle, name, 1)
	}
	return s.values
}

func (s *Source) unknown(values map[string]string) []string {
	var out []string
	for _, name := range sortedKeys(values) {
		if s.known != nil && !s.known(name) {
			out = append(out, name)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ReadFailure names why reading the switches failed, the type dimension of
// ToggleReadFailed: the error code when AWS answered (AccessDeniedException,
// ThrottlingException, …), "unreachable" when no answer came (the request
// could not be sent, or its time ran out), else "other".
func ReadFailure(err error) string {
	var apiErr smithy.APIError
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.ErrorCode() != "":
		return apiErr.ErrorCode()
	case errors.As(err, &sendErr), errors.As(err, &netErr),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "unreachable"
	}
	return "other"
}

// read fetches every parameter under the path.
func (s *Source) read(ctx context.Context) (map[string]string, error) {
	return ReadAll(ctx, s.client, s.path)
}

// ReadAll fetches the raw value of every parameter directly under path, by
// name relative to it, following pagination.
func ReadAll(ctx context.Context, client API, path string) (map[string]string, error) {
	path = strings.TrimSuffix(path, "/")
	values := map[string]string{}
	in := &ssm.GetParametersByPathInput{Path: aws.String(path), Recursive: aws.Bool(false), WithDecryption: aws.Bool(true), MaxResults: aws.Int32(10)}
	for page := 0; ; page++ {
		if page == 100 {
			return nil, fmt.Errorf("toggle: more than 100 pages under %s", path)
		}
		out, err := client.GetParametersByPath(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("toggle: read %s: %w", path, err)
		}
		for _, p := range out.Parameters {
			name := strings.TrimPrefix(aws.ToString(p.Name), path+"/")
			values[name] = aws.ToString(p.Value)
		}
		if aws.ToString(out.NextToken) == "" {
			return values, nil
		}
		in.NextToken = out.NextToken
	}
}
