package main

import (
	"context"
	"fmt"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/internal/toggle"
)

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
	Default   string `json:"default"`
	Effective string `json:"effective"`
}

type unknownRow struct {
	Parameter  string `json:"parameter"`
	Value      string `json:"value"`
	DidYouMean string `json:"didYouMean,omitempty"`
}

func (a *app) togglesList(ctx context.Context, rest []string) error {
	if err := noArgs("toggles list", rest); err != nil {
		return err
	}
	defaults := map[string]bool{}
	for _, t := range a.reg.Types() {
		defaults[t.Name] = t.EnabledByDefault
	}
	src := toggle.NewSource(ssm.NewFromConfig(a.cfg), toggle.Path(a.stage), nil)
	snap, err := src.Read(ctx, defaults)
	if err != nil {
		return err
	}
	var rows []toggleRow
	for _, e := range snap.Entries {
		r := toggleRow{Type: e.Type, Parameter: toggle.ParameterName(a.stage, e.Type), Readable: e.Readable,
			Default: onOff(e.Default), Effective: onOff(e.Effective)}
		if e.HasStored {
			r.Stored = e.Stored
		}
		rows = append(rows, r)
	}
	var unknown []unknownRow
	for name, v := range snap.Unknown {
		u := unknownRow{Parameter: toggle.ParameterName(a.stage, name), Value: v}
		if near, ok := a.reg.Nearest(name); ok {
			u.DidYouMean = near
		}
		unknown = append(unknown, u)
	}
	slices.SortFunc(unknown, func(x, y unknownRow) int { return compare(x.Parameter, y.Parameter) })
	if a.json {
		return a.printJSON(map[string]any{"stage": a.stage, "toggles": rows, "unknown": unknown})
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tSTORED\tDEFAULT\tEFFECTIVE")
	for _, r := range rows {
		stored := "(missing)"
		if s, ok := r.Stored.(string); ok {
			stored = s
			if !r.Readable {
				stored += " (unreadable: default applies)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Type, stored, r.Default, r.Effective)
	}
	if err := tw.Flush(); err != nil {
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

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (a *app) togglesSet(ctx context.Context, rest []string) error {
	if len(rest) != 2 {
		return usagef("toggles set needs TYPE and on|off")
	}
	name, value := rest[0], rest[1]
	jt, err := a.reg.Lookup(name)
	if err != nil {
		if near, ok := a.reg.Nearest(name); ok {
			return usagef("%q is not a registered job type; did you mean %s?", name, near)
		}
		return usagef("%q is not a registered job type; registered: %v", name, a.reg.Names())
	}
	enabled, ok := toggle.Parse(value)
	if !ok {
		return usagef("value %q is not on or off (true/false, 1/0 also accepted)", value)
	}
	param := toggle.ParameterName(a.stage, jt.Name)
	if _, err := ssm.NewFromConfig(a.cfg).PutParameter(ctx, &ssm.PutParameterInput{
		Name: aws.String(param), Value: aws.String(onOff(enabled)), Type: types.ParameterTypeString, Overwrite: aws.Bool(true),
		Description: aws.String("runstwice kill switch for " + jt.Name),
	}); err != nil {
		return fmt.Errorf("set %s: %w", param, err)
	}
	ttl := toggle.DefaultTTL
	if v := a.getenv("TOGGLE_TTL"); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			ttl = d
		}
	}
	if a.json {
		return a.printJSON(map[string]any{"type": jt.Name, "parameter": param, "effective": onOff(enabled), "takesEffectWithin": ttl.String()})
	}
	fmt.Fprintf(a.stdout, "%s is now %s (%s)\ntakes effect within %s (the toggle TTL) in every running worker; no deploy needed\n",
		jt.Name, onOff(enabled), param, ttl)
	if !enabled {
		fmt.Fprintf(a.stdout, "while off, %s jobs are parked (re-queued with a delay), never dropped\n", jt.Name)
	}
	return nil
}
