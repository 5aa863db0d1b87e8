// Package snapshot is the operator's view of the kill switches: every
// type's stored value, default, effective state, expiry, reason, and who
// changed it last (SSM's DescribeParameters, which only operators call: the
// workers' role is never granted it, so this package is never linked into a
// function).
package switchview

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/ssmswitch"
)

// SSMAPI is the part of the SSM client Read uses: the values, and who last
// changed each parameter, and when.
type SSMAPI interface {
	ssmswitch.API
	DescribeParameters(ctx context.Context, in *ssm.DescribeParametersInput, optFns ...func(*ssm.Options)) (*ssm.DescribeParametersOutput, error)
}

// Entry is one kill switch as an operator sees it.
type Entry struct {
	Type      string
	Stored    string // the raw parameter value, "" when missing
	HasStored bool
	Readable  bool // Stored parses as a toggle parameter's value
	// Problem says why Stored is unreadable ("" when it is readable).
	Problem string
	Default bool
	// Enabled is the stored value's own setting (meaningful when Readable).
	Enabled   bool
	Effective bool
	// Until is the stored value's expiry (zero: none).
	Until time.Time
	// Expired: Until has passed, so the default applies again.
	Expired bool
	// Reason is the stored value's reason, "" when none.
	Reason string
	// LastModifiedUser and LastModified are SSM's record of the last change
	// (empty when the client cannot describe parameters).
	LastModifiedUser string
	LastModified     time.Time
}

// Snapshot is every toggle parameter under the path, for `jobctl toggles list`.
type Snapshot struct {
	// At is when the snapshot was evaluated.
	At      time.Time
	Entries []Entry
	// Unknown lists parameters under the path that name no registered type.
	Unknown map[string]string
	// Parameters counts every parameter found under the path.
	Parameters int
}

// Read fetches the toggle parameters under path (see contract.SwitchPath) now and evaluates
// them at now for the given types and defaults, with who changed each last.
// It returns SSM errors: an operator must see them.
func Read(ctx context.Context, client SSMAPI, path string, defaults map[string]bool, now time.Time) (Snapshot, error) {
	path = strings.TrimSuffix(path, "/")
	values, err := ssmswitch.ReadAll(ctx, client, path)
	if err != nil {
		return Snapshot{}, err
	}
	meta := map[string]types.ParameterMetadata{}
	if len(values) > 0 {
		if meta, err = describe(ctx, client, path); err != nil {
			return Snapshot{}, err
		}
	}
	snap := Snapshot{At: now, Unknown: map[string]string{}, Parameters: len(values)}
	names := make([]string, 0, len(defaults))
	for n := range defaults {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e := Entry{Type: n, Default: defaults[n], Effective: defaults[n]}
		e.Stored, e.HasStored = values[n]
		if e.HasStored {
			v, err := ssmswitch.ParseValue(e.Stored)
			if e.Readable = err == nil; e.Readable {
				e.Enabled, e.Until, e.Reason = v.Enabled, v.Until, v.Reason
				e.Expired, e.Effective = v.Expired(now), v.Effective(e.Default, now)
			} else {
				e.Problem = err.Error()
			}
		}
		if m, ok := meta[n]; ok {
			e.LastModifiedUser = aws.ToString(m.LastModifiedUser)
			e.LastModified = aws.ToTime(m.LastModifiedDate)
		}
		snap.Entries = append(snap.Entries, e)
	}
	for n, v := range values {
		if _, ok := defaults[n]; !ok {
			snap.Unknown[n] = v
		}
	}
	return snap, nil
}

// describe reads the metadata of every parameter directly under path.
func describe(ctx context.Context, client SSMAPI, path string) (map[string]types.ParameterMetadata, error) {
	out := map[string]types.ParameterMetadata{}
	p := ssm.NewDescribeParametersPaginator(client, &ssm.DescribeParametersInput{
		ParameterFilters: []types.ParameterStringFilter{{
			Key: aws.String("Path"), Option: aws.String("OneLevel"), Values: []string{path},
		}},
		MaxResults: aws.Int32(50),
	})
	for page := 0; p.HasMorePages(); page++ {
		if page == 100 {
			return nil, fmt.Errorf("snapshot: more than 100 pages of metadata under %s", path)
		}
		res, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("snapshot: describe %s: %w", path, err)
		}
		for _, m := range res.Parameters {
			out[strings.TrimPrefix(aws.ToString(m.Name), path+"/")] = m
		}
	}
	return out, nil
}
