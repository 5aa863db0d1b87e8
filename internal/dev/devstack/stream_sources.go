package devstack

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/runstwice/runstwice/internal/dev/stack"
)

// StreamSource is one DynamoDB stream event source mapping of the template,
// with the settings Lambda applies to it.
type StreamSource struct {
	// Function is the function's directory under functions/; FunctionARN
	// its ARN (for the on-failure record).
	Function, FunctionARN string
	StreamARN             string
	// TrimHorizon starts at the oldest record (StartingPosition
	// TRIM_HORIZON) rather than after the newest (LATEST).
	TrimHorizon bool
	// BatchSize is the most records per invocation.
	BatchSize int
	// Window is MaximumBatchingWindowInSeconds.
	Window time.Duration
	// ReportItemFailures: the function reports batch item failures
	// (FunctionResponseTypes ReportBatchItemFailures).
	ReportItemFailures bool
	// Bisect splits a batch in two on a function error
	// (BisectBatchOnFunctionError).
	Bisect bool
	// MaxRetries is MaximumRetryAttempts (-1: until the record expires).
	MaxRetries int
	// MaxRecordAge is MaximumRecordAgeInSeconds (0: no limit).
	MaxRecordAge time.Duration
	// OnFailureURL is the queue URL of the on-failure destination ("" for
	// none: a batch given up on is only logged).
	OnFailureURL string
	// Filters are the FilterCriteria's filters (nil: no filter, every
	// record): Lambda drops the records none lets through before it
	// invokes, as read, never retried.
	Filters []StreamFilter
}

// Lambda's defaults for a stream event source.
const (
	defaultStreamBatch = 100
	// streamPollInterval is how often an idle shard is read (Lambda reads
	// each shard four times a second).
	streamPollInterval = 250 * time.Millisecond
	// describeInterval is how often the stream is described for new
	// shards.
	describeInterval = 10 * time.Second
	// StreamRetryDelay is the local stack's pause before a stream batch is
	// retried.
	StreamRetryDelay = time.Second
)

// StreamSources reads the DynamoDB events of every function in the
// provisioned template, so the local stream pollers use the template's
// settings. The stream and the on-failure queue must have been provisioned.
func StreamSources(st *stack.Stack) ([]StreamSource, error) {
	return sourcesOf(st, "DynamoDB", func(e functionEvent, byARN map[string]stack.Physical) (StreamSource, error) {
		id, name, props, p := e.id, e.name, e.props, e.p
		src, err := streamSettings(p)
		if err != nil {
			return StreamSource{}, fmt.Errorf("devstack: %s event %s: %w", id, name, err)
		}
		src.Function = functionDir(props)
		if src.StreamARN, err = st.ResolveString(p["Stream"]); err != nil {
			return StreamSource{}, fmt.Errorf("devstack: %s event %s: %w", id, name, err)
		}
		fnName := src.Function
		if v, ok := props["FunctionName"]; ok {
			if fnName, err = st.ResolveString(v); err != nil {
				return StreamSource{}, fmt.Errorf("devstack: %s FunctionName: %w", id, err)
			}
		}
		if src.FunctionARN, err = st.ResolveString(map[string]any{"Fn::Sub": "arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:function:" + fnName}); err != nil {
			return StreamSource{}, fmt.Errorf("devstack: %s: %w", id, err)
		}
		dest, _ := p["DestinationConfig"].(map[string]any)
		onFailure, _ := dest["OnFailure"].(map[string]any)
		if d, ok := onFailure["Destination"]; ok {
			arn, err := st.ResolveString(d)
			if err != nil {
				return StreamSource{}, fmt.Errorf("devstack: %s event %s: on-failure destination: %w", id, name, err)
			}
			q, ok := byARN[arn]
			if !ok || q.URL == "" {
				return StreamSource{}, fmt.Errorf("devstack: %s event %s: on-failure destination %s is no provisioned queue", id, name, arn)
			}
			src.OnFailureURL = q.URL
		}
		return src, nil
	})
}

// streamSettings reads the settings of a DynamoDB event's properties, with
// Lambda's defaults.
func streamSettings(p map[string]any) (StreamSource, error) {
	src := StreamSource{BatchSize: defaultStreamBatch, MaxRetries: -1}
	switch pos := fmt.Sprint(p["StartingPosition"]); pos {
	case "TRIM_HORIZON":
		src.TrimHorizon = true
	case "LATEST":
	default:
		return src, fmt.Errorf("StartingPosition %q is not TRIM_HORIZON or LATEST", pos)
	}
	ints := []struct {
		key string
		set func(int)
	}{
		{"BatchSize", func(n int) { src.BatchSize = n }},
		{"MaximumBatchingWindowInSeconds", func(n int) { src.Window = time.Duration(n) * time.Second }},
		{"MaximumRetryAttempts", func(n int) { src.MaxRetries = n }},
		{"MaximumRecordAgeInSeconds", func(n int) {
			if n > 0 {
				src.MaxRecordAge = time.Duration(n) * time.Second
			}
		}},
	}
	for _, f := range ints {
		v, ok := p[f.key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(fmt.Sprint(v))
		if err != nil {
			return src, fmt.Errorf("%s %v: %w", f.key, v, err)
		}
		f.set(n)
	}
	filters, err := streamFilters(p["FilterCriteria"])
	if err != nil {
		return src, err
	}
	src.Filters = filters
	src.Bisect = fmt.Sprint(p["BisectBatchOnFunctionError"]) == "true"
	types, _ := p["FunctionResponseTypes"].([]any)
	for _, t := range types {
		src.ReportItemFailures = src.ReportItemFailures || t == "ReportBatchItemFailures"
	}
	return src, nil
}

// functionDir is the directory under functions/ of a function's CodeUri.
func functionDir(props map[string]any) string {
	return strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(props["CodeUri"]), "functions/"), "/")
}

// physicalByARN indexes the provisioned resources by ARN.
func physicalByARN(st *stack.Stack) map[string]stack.Physical {
	byARN := map[string]stack.Physical{}
	for _, p := range st.Resources() {
		if p.ARN != "" {
			byARN[p.ARN] = p
		}
	}
	return byARN
}
