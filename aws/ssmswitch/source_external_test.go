package ssmswitch_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/runstwice/runstwice/aws/ssmswitch"
)

// parameters answers GetParametersByPath with its values, or err.
type parameters struct {
	mu     sync.Mutex
	values map[string]string
	err    error
}

func (p *parameters) GetParametersByPath(_ context.Context, in *ssm.GetParametersByPathInput, _ ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	out := &ssm.GetParametersByPathOutput{}
	for name, v := range p.values {
		out.Parameters = append(out.Parameters, types.Parameter{Name: aws.String(aws.ToString(in.Path) + "/" + name), Value: aws.String(v)})
	}
	return out, nil
}

func (p *parameters) fail(err error) { p.mu.Lock(); p.err = err; p.mu.Unlock() }

// What the package doc says a failed read does: it keeps the last values
// read; a source that never read answers the defaults.
func TestAFailedReadKeepsTheLastValuesElseTheDefaults(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	api := &parameters{values: map[string]string{"job.off.v1": "on", "job.on.v1": "off"}}
	s := ssmswitch.New(api, "/p", nil)
	s.Now = clock
	if !s.IsJobEnabled(ctx, "job.off.v1", false) || s.IsJobEnabled(ctx, "job.on.v1", true) {
		t.Fatal("the values read are not the ones in SSM")
	}
	api.fail(errors.New("AccessDeniedException"))
	now = now.Add(ssmswitch.DefaultTTL + time.Second) // the next read fails
	if !s.IsJobEnabled(ctx, "job.off.v1", false) || s.IsJobEnabled(ctx, "job.on.v1", true) {
		t.Fatal("a failed read did not keep the last values read")
	}
	cold := ssmswitch.New(api, "/p", nil) // never read: the defaults
	cold.Now = clock
	if cold.IsJobEnabled(ctx, "job.off.v1", false) || !cold.IsJobEnabled(ctx, "job.on.v1", true) {
		t.Fatal("a source that never read does not answer the defaults")
	}
}
