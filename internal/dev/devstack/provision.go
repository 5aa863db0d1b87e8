package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/runstwice/runstwice/internal/dev/stack"
)

// provision creates the template's resources with the local stack's
// parameters and more, and writes resources.json.
func (l *Local) provision(ctx context.Context, cfg aws.Config, opts Options, step func(int, string, ...any), out io.Writer, more map[string]string) (*stack.Template, error) {
	tmpl, err := stack.Load(filepath.Join(opts.Root, "template.yaml"))
	if err != nil {
		return nil, err
	}
	// moto's SES has no send rate: the local functions send as fast as
	// they can unless faults throttle them (e.g. ses:SendEmail:throttle(2/s)).
	params := map[string]string{"Stage": Stage, "SesMaxSendRate": strconv.Itoa(LocalSesMaxSendRate)}
	if opts.ParkDelay > 0 {
		params["ParkDelaySeconds"] = strconv.Itoa(int(opts.ParkDelay / time.Second))
	}
	if opts.ToggleTTL > 0 {
		params["ToggleTtl"] = opts.ToggleTTL.String()
	}
	if opts.AllowFederatedUsers {
		params["AllowFederatedUsers"] = "true"
	}
	maps.Copy(params, more)
	step(2, "provisioning template.yaml (stage %s)", Stage)
	if l.Stack, err = stack.Provision(ctx, stack.NewClients(cfg), tmpl, stack.Options{Params: params}); err != nil {
		return nil, err
	}
	refs := l.Stack.Refs()
	ids := stack.SortedIDs(refs)
	for i, id := range ids {
		fmt.Fprintf(out, "      %2d of %d  %-22s %s\n", i+1, len(ids), id, refs[id])
	}
	b, _ := json.MarshalIndent(refs, "", "  ")
	return tmpl, os.WriteFile(filepath.Join(opts.StateDir, ResourcesFile), append(b, '\n'), 0o644)
}

// FunctionDirs returns the template's functions by their directory under
// functions/ (CodeUri functions/<dir>), sorted: every function the local
// stack builds and runs, so a new one needs no list here.
func FunctionDirs(tmpl *stack.Template) []string {
	var out []string
	for _, id := range tmpl.IDs(stack.TypeFunction) {
		if props, err := tmpl.FunctionProperties(id); err == nil {
			out = append(out, functionDir(props))
		}
	}
	slices.Sort(out)
	return out
}

// Webhooks is the local webhook receiver: every event the webhook function
// delivered, by its Idempotency-Key.
func (l *Local) Webhooks() *Receiver { return l.webhooks }
