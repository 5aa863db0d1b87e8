package toggle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// MetadataAPI is what an operator's client also offers: who last changed a
// parameter, and when. Workers never call it (one GetParametersByPath per
// TTL is all they do); Read uses it when the Source's client has it.
type MetadataAPI interface {
	DescribeParameters(ctx context.Context, in *ssm.DescribeParametersInput, optFns ...func(*ssm.Options)) (*ssm.DescribeParametersOutput, error)
}

// Entry is one toggle as an operator sees it.
type Entry struct {
	Type      string
	Stored    string // the raw parameter value, "" when missing
	HasStored bool
	Readable  bool // Stored parses as a toggle value
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

// Snapshot is every toggle under the path, for `jobctl toggles list`.
type Snapshot struct {
	// At is when the snapshot was evaluated.
	At      time.Time
	Entries []Entry
	// Unknown lists parameters under the path that name no registered type.
	Unknown map[string]string
	// Parameters counts every parameter found under the path.
	Parameters int
}

// Read fetches the toggles now (no cache) and evaluates them for the given
// types and defaults, with who last changed each when the client can
// describe parameters. Unlike IsJobEnabled it returns SSM errors: an operator
// must see them.
func (s *Source) Read(ctx context.Context, defaults map[string]bool) (Snapshot, error) {
	values, err := s.read(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	meta := map[string]types.ParameterMetadata{}
	if describer, ok := s.client.(MetadataAPI); ok && len(values) > 0 {
		if meta, err = s.describe(ctx, describer); err != nil {
			return Snapshot{}, err
		}
	}
	now := s.now()
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
			v, err := ParseValue(e.Stored)
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

// describe reads the metadata of every parameter directly under the path.
func (s *Source) describe(ctx context.Context, client MetadataAPI) (map[string]types.ParameterMetadata, error) {
	out := map[string]types.ParameterMetadata{}
	p := ssm.NewDescribeParametersPaginator(client, &ssm.DescribeParametersInput{
		ParameterFilters: []types.ParameterStringFilter{{
			Key: aws.String("Path"), Option: aws.String("OneLevel"), Values: []string{s.path},
		}},
		MaxResults: aws.Int32(50),
	})
	for page := 0; p.HasMorePages(); page++ {
		if page == 100 {
			return nil, fmt.Errorf("toggle: more than 100 pages of metadata under %s", s.path)
		}
		res, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("toggle: describe %s: %w", s.path, err)
		}
		for _, m := range res.Parameters {
			out[strings.TrimPrefix(aws.ToString(m.Name), s.path+"/")] = m
		}
	}
	return out, nil
}
