package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	smithytime "github.com/aws/smithy-go/time"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/contract"
	"github.com/runstwice/runstwice/internal/dev/devstack"
	"github.com/runstwice/runstwice/internal/dev/moto"
	"github.com/runstwice/runstwice/internal/jobs"
	"github.com/runstwice/runstwice/internal/marker"
)

// Chain measures continuations and batches on the running local stack l:
// how soon a continuation is released, and runs, after its parent's claim
// (chains parent-child pairs, all at once, on an idle stack), then how long
// the API takes to accept a batch of 100 jobs (batches of them, each once
// the jobs of the one before have run).
func Chain(ctx context.Context, l *devstack.Local, batches, chains int) ([]Row, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	parents, children := make([]string, chains), make([]string, chains)
	for i := range chains {
		p, err := post(ctx, l.APIURL+"/v1/jobs/"+contract.WebhookDeliver.Name, fmt.Sprintf("bench-%s-parent-%d", run, i),
			map[string]any{"args": map[string]string{"eventId": fmt.Sprintf("p-%s-%d", run, i)}})
		if err != nil {
			return nil, err
		}
		c, err := post(ctx, l.APIURL+"/v1/jobs/"+contract.WebhookDeliver.Name, fmt.Sprintf("bench-%s-child-%d", run, i),
			map[string]any{"args": map[string]string{"eventId": fmt.Sprintf("c-%s-%d", run, i)}, "after": p})
		if err != nil {
			return nil, err
		}
		parents[i], children[i] = p, c
	}
	released, ran, err := chainLatencies(ctx, l, parents, children)
	if err != nil {
		return nil, err
	}
	var accepts []time.Duration
	jobQueues := slices.DeleteFunc(l.WorkQueueURLs(), func(u string) bool { return strings.HasSuffix(u, "-"+string(contract.QueueChain)) })
	for b := range batches {
		jobsOf := make([]map[string]any, jobs.MaxBatch)
		for i := range jobsOf {
			jobsOf[i] = map[string]any{"type": contract.WebhookDeliver.Name, "args": map[string]string{"eventId": fmt.Sprintf("b-%s-%d-%d", run, b, i)}}
		}
		// Each batch on a quiet stack: moto is one Python process, and the
		// workers running the last batch's 100 jobs would hold it. (Its
		// finisher waits a minute on the chain queue, and finds it done.)
		if _, err := waitQuiet(ctx, l, jobQueues, drainLimit); err != nil {
			return nil, err
		}
		start := time.Now()
		if _, err := post(ctx, l.APIURL+"/v1/batches", fmt.Sprintf("bench-%s-batch-%d", run, b), map[string]any{"jobs": jobsOf}); err != nil {
			return nil, err
		}
		accepts = append(accepts, time.Since(start))
	}
	p50, p99 := percentiles(accepts)
	rp50, rp99 := percentiles(released)
	sp50, sp99 := percentiles(ran)
	return []Row{
		{"chain", fmt.Sprintf("a batch of %d jobs accepted (%d batches): p50 / p99", jobs.MaxBatch, batches), ms(p50) + " / " + ms(p99), "p99 ≤ 1 s", p99 <= time.Second},
		{"chain", fmt.Sprintf("a continuation released after its parent's claim (%d): p50 / p99", chains), ms(rp50) + " / " + ms(rp99), "p99 ≤ 1 s", rp99 <= time.Second},
		{"chain", fmt.Sprintf("a continuation claimed after its parent's claim (%d): p50 / p99", chains), ms(sp50) + " / " + ms(sp99), "", true},
	}, nil
}

// chainLatencies waits until every child has been claimed (2 minutes at
// most) and returns, per pair, how long after the parent's claim the child
// was released, and claimed.
func chainLatencies(ctx context.Context, l *devstack.Local, parents, children []string) (released, ran []time.Duration, err error) {
	jobsTable, _ := l.Stack.Physical("JobsTable")
	markersTable, _ := l.Stack.Physical("MarkersTable")
	db := dynamodb.NewFromConfig(moto.Config(l.Endpoint, moto.Region))
	markers := marker.NewStore(db, markersTable.Name)
	claimed := func(id string) (time.Time, bool, error) {
		m, ok, err := markers.Peek(ctx, engine.Key{Type: contract.WebhookDeliver.Name, JobID: id})
		if err != nil || !ok || m.State != engine.StateDone {
			return time.Time{}, false, err
		}
		return m.ProcessedAt, true, nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for i := range children {
		var parentAt, childAt time.Time
		for {
			var okP, okC bool
			if parentAt, okP, err = claimed(parents[i]); err != nil {
				return nil, nil, err
			}
			if childAt, okC, err = claimed(children[i]); err != nil {
				return nil, nil, err
			}
			if okP && okC {
				break
			}
			if time.Now().After(deadline) {
				return nil, nil, fmt.Errorf("bench: continuation %s not run within 2 minutes of its parent", children[i])
			}
			if err := smithytime.SleepWithContext(ctx, 200*time.Millisecond); err != nil {
				return nil, nil, err
			}
		}
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(jobsTable.Name), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{jobs.AttrPK: &types.AttributeValueMemberS{Value: jobs.JobPK(children[i])}}})
		if err != nil {
			return nil, nil, err
		}
		rel, _ := out.Item["releasedAt"].(*types.AttributeValueMemberN)
		if rel == nil {
			return nil, nil, fmt.Errorf("bench: continuation %s ran without a release", children[i])
		}
		at, _ := strconv.ParseInt(rel.Value, 10, 64)
		released = append(released, max(time.UnixMilli(at).Sub(parentAt), 0))
		ran = append(ran, max(childAt.Sub(parentAt), 0))
	}
	return released, ran, nil
}

// post POSTs body as JSON under key and returns the answer's jobId (or
// batchId); anything but a 2xx is an error.
func post(ctx context.Context, url, key string, body any) (string, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("bench: POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	var a struct {
		JobID   string `json:"jobId"`
		BatchID string `json:"batchId"`
	}
	var raw bytes.Buffer
	_, _ = raw.ReadFrom(resp.Body)
	if resp.StatusCode/100 != 2 || json.Unmarshal(raw.Bytes(), &a) != nil {
		return "", fmt.Errorf("bench: POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(raw.String()))
	}
	return a.JobID + a.BatchID, nil
}

// percentiles are the median and the 99th percentile of d (nearest rank).
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(d))
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return rank(0.50), rank(0.99)
}
