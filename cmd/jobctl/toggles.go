package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/ssmswitch"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/switchview"
)

// ttlNote says when a flip is seen: within the workers' cache of a
// switch's value, the stack's ToggleTtl — the running local stack's (what
// its workers were given), else TOGGLE_TTL when the environment names it
// (as a function's does), else
// the template's default, which a deployed stack may have changed.
func (a *app) ttlNote() string {
	switch {
	case a.toggleTTL != "":
		return "within " + a.toggleTTL + " (the local stack's ToggleTtl, how long workers cache a switch)"
	case a.getenv("TOGGLE_TTL") != "":
		return "within " + a.getenv("TOGGLE_TTL") + " (TOGGLE_TTL, how long workers cache a switch)"
	}
	return "within " + ssmswitch.DefaultTTL.String() + " (the stack's ToggleTtl by default, how long workers cache a switch; a stack deployed with another ToggleTtl takes that long)"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

type toggleRow struct {
	Type      string `json:"type"`
	Parameter string `json:"parameter"`
	Stored    any    `json:"stored"` // the raw value, or null when missing
	Readable  bool   `json:"readable"`
	Problem   string `json:"problem,omitempty"`
	Default   string `json:"default"`
	Effective string `json:"effective"`
	// Until is the expiry of a time-boxed value; Expired says it passed.
	Until            *time.Time `json:"until,omitempty"`
	TimeLeft         string     `json:"timeLeft,omitempty"`
	Expired          bool       `json:"expired,omitempty"`
	Reason           string     `json:"reason,omitempty"`
	LastModifiedUser string     `json:"lastModifiedUser,omitempty"`
	LastModified     *time.Time `json:"lastModified,omitempty"`
	// Internal marks a type of runstwice's own (contract.Own): its
	// sweeps' ticks and a batch's finisher, which no user enqueues.
	Internal bool `json:"internal,omitempty"`
}

type unknownRow struct {
	Parameter  string `json:"parameter"`
	Value      string `json:"value"`
	DidYouMean string `json:"didYouMean,omitempty"`
}

func (a *app) defaults() map[string]bool {
	defaults := map[string]bool{}
	for _, t := range a.reg.Types() {
		defaults[t.Name] = t.EnabledByDefault
	}
	return defaults
}

func (a *app) togglesList(ctx context.Context, args []string) error {
	if _, err := parseN(args, nil, 0, "toggles list", "no arguments"); err != nil {
		return err
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	snap, err := switchview.Read(ctx, ssm.NewFromConfig(a.cfg), contract.SwitchPath(a.stage), a.defaults(), a.now())
	if err != nil {
		return err
	}
	if snap.Parameters == 0 {
		a.warnNoParameters()
	}
	rows := make([]toggleRow, 0, len(snap.Entries))
	for _, e := range snap.Entries {
		rows = append(rows, a.toggleRow(e, snap.At))
	}
	unknown := []unknownRow{}
	for name, v := range snap.Unknown {
		u := unknownRow{Parameter: contract.SwitchParameter(a.stage, name), Value: v}
		if near, ok := a.reg.Nearest(name); ok {
			u.DidYouMean = near
		}
		unknown = append(unknown, u)
	}
	slices.SortFunc(unknown, func(x, y unknownRow) int { return strings.Compare(x.Parameter, y.Parameter) })
	if a.json {
		return a.printJSON(map[string]any{"stage": a.stage, "toggles": rows, "unknown": unknown})
	}
	if err := writeToggles(a.stdout, rows); err != nil {
		return err
	}
	for _, u := range unknown {
		hint := ""
		if u.DidYouMean != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", u.DidYouMean)
		}
		fmt.Fprintf(a.stdout, "WARNING: %s = %q names no registered job type%s; it has no effect\n", u.Parameter, u.Value, hint)
	}
	return nil
}

// writeToggles is the table of toggles list: the user's types first, then
// runstwice's own, marked "(internal)"; "(missing)" for a switch with no
// parameter, and "-" for a column with nothing set (SSM's LastModifiedUser
// of a value an emulator wrote, "N/A", included).
func writeToggles(w io.Writer, rows []toggleRow) error {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(x, y toggleRow) int {
		if x.Internal != y.Internal {
			if x.Internal {
				return 1
			}
			return -1
		}
		return strings.Compare(x.Type, y.Type)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tSTORED\tDEFAULT\tEFFECTIVE\tUNTIL\tREASON\tWHO")
	for _, r := range rows {
		name := r.Type
		if r.Internal {
			name += " (internal)"
		}
		stored := "(missing)"
		if s, ok := r.Stored.(string); ok {
			stored = shorten(s, 24)
			if !r.Readable {
				stored += " (unreadable: default applies)"
			}
		}
		until := "-"
		switch {
		case r.Expired:
			until = r.Until.Format(time.RFC3339) + " (expired: default applies)"
		case r.Until != nil:
			until = r.Until.Format(time.RFC3339) + " (" + r.TimeLeft + " left)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, stored, r.Default, r.Effective, until, dash(r.Reason), dash(r.LastModifiedUser))
	}
	return tw.Flush()
}

// noUser is what SSM's LastModifiedUser reads when it knows no user (an
// emulator's answer): none, as a missing parameter's.
const noUser = "N/A"

func (a *app) toggleRow(e switchview.Entry, at time.Time) toggleRow {
	r := toggleRow{Type: e.Type, Parameter: contract.SwitchParameter(a.stage, e.Type), Readable: e.Readable, Problem: e.Problem,
		Default: onOff(e.Default), Effective: onOff(e.Effective), Expired: e.Expired, Reason: e.Reason,
		LastModifiedUser: e.LastModifiedUser, Internal: contract.Own(e.Type)}
	if r.LastModifiedUser == noUser {
		r.LastModifiedUser = ""
	}
	if e.HasStored {
		r.Stored = e.Stored
	}
	if !e.Until.IsZero() {
		until := e.Until
		r.Until = &until
		if !e.Expired {
			r.TimeLeft = until.Sub(at).Round(time.Second).String()
		}
	}
	if !e.LastModified.IsZero() {
		lm := e.LastModified.UTC()
		r.LastModified = &lm
	}
	return r
}

// warnNoParameters says that the stage has no toggle parameters at all,
// which a deployed or local stack always has (the fail-closed types').
func (a *app) warnNoParameters() {
	a.warnf("no parameters under %s at %s: is the stage right? (a running stack has at least the fail-closed types' switches)",
		contract.SwitchPath(a.stage), a.endpointName())
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func shorten(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func (a *app) togglesSet(ctx context.Context, args []string) error {
	p, err := parseN(args, map[string]bool{"for": true, "reason": true}, 2, "toggles set", "a TYPE and on|off")
	if err != nil {
		return err
	}
	name, value := p.pos[0], p.pos[1]
	enabled, ok := ssmswitch.Parse(value)
	if !ok {
		return usagef("value %q is not on or off (true/false, 1/0 also accepted)", value)
	}
	v := ssmswitch.Value{Enabled: enabled, Reason: p.vals["reason"]}
	if p.set["for"] {
		d, err := parseDuration(p.vals["for"])
		if err != nil || d <= 0 {
			return usagef("--for %q is not a positive duration (e.g. 30m, 2h, 1d)", p.vals["for"])
		}
		v.Until = a.now().Add(d).UTC().Truncate(time.Second)
	}
	if p.set["reason"] && strings.TrimSpace(v.Reason) == "" {
		return usagef("--reason is empty")
	}
	jt, err := a.reg.Lookup(name)
	if err != nil {
		if near, ok := a.reg.Nearest(name); ok {
			return refusedf("%q is not a registered job type; did you mean %s?", name, near)
		}
		return refusedf("%q is not a registered job type; registered: %s", name, strings.Join(a.reg.Names(), ", "))
	}
	stored, err := v.Encode()
	if err != nil {
		return usagef("%v", err)
	}
	if err := a.connect(ctx); err != nil {
		return err
	}
	client := ssm.NewFromConfig(a.cfg)
	existing, err := client.GetParametersByPath(ctx, &ssm.GetParametersByPathInput{Path: aws.String(contract.SwitchPath(a.stage)), MaxResults: aws.Int32(1)})
	if err != nil {
		return fmt.Errorf("read %s: %w", contract.SwitchPath(a.stage), err)
	}
	if len(existing.Parameters) == 0 {
		a.warnNoParameters()
	}
	param := contract.SwitchParameter(a.stage, jt.Name)
	if _, err := client.PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(param), Value: aws.String(stored), Type: types.ParameterTypeString, Overwrite: aws.Bool(true),
		Description: aws.String("runstwice kill switch for " + jt.Name),
	}); err != nil {
		return fmt.Errorf("set %s: %w", param, err)
	}
	if a.json {
		out := map[string]any{"type": jt.Name, "parameter": param, "value": stored, "enabled": onOff(enabled),
			"default": onOff(jt.EnabledByDefault), "takesEffect": a.ttlNote()}
		if !v.Until.IsZero() {
			out["until"] = v.Until
		}
		if v.Reason != "" {
			out["reason"] = v.Reason
		}
		return a.printJSON(out)
	}
	fmt.Fprintf(a.stdout, "%s is now %s (%s = %s)\n", jt.Name, onOff(enabled), param, stored)
	if !v.Until.IsZero() {
		fmt.Fprintf(a.stdout, "until %s (in %s); then it reverts to its default, %s, by itself\n",
			v.Until.Format(time.RFC3339), v.Until.Sub(a.now()).Round(time.Second), onOff(jt.EnabledByDefault))
	}
	fmt.Fprintf(a.stdout, "takes effect %s in every running worker; no deploy needed\n", a.ttlNote())
	if !enabled {
		fmt.Fprintf(a.stdout, "while off, %s jobs are parked (re-queued with a delay), never dropped\n", jt.Name)
	}
	return nil
}
