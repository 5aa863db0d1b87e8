package jobs

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/internal/ddb"
)

// Records returns the records of ids by id, as stored (no marker read);
// missing or expired ones are left out.
func (s *Store) Records(ctx context.Context, ids []string) (map[string]Job, error) {
	return s.records(ctx, ids)
}

// records reads the records of ids (consistent, 100 keys a call; an id
// given twice is read once) by id; missing or expired ones are left out.
func (s *Store) records(ctx context.Context, ids []string) (map[string]Job, error) {
	out := make(map[string]Job, len(ids))
	now := s.now()
	err := ddb.BatchGet(ctx, s.client.BatchGetItem, s.table, jobKeys(ids, JobPK), "", func(item map[string]types.AttributeValue) error {
		var r record
		ok, err := ddb.DecodeLive(item, now, &r)
		if ok {
			out[r.JobID] = r.job()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: records: %w", err)
	}
	return out, nil
}

// jobKeys returns the keys pk(id) of the distinct ids (BatchGetItem
// refuses a key twice).
func jobKeys(ids []string, pk func(string) string) []map[string]types.AttributeValue {
	distinct := slices.Compact(slices.Sorted(slices.Values(ids)))
	keys := make([]map[string]types.AttributeValue, len(distinct))
	for i, id := range distinct {
		keys[i] = keyAV(pk(id))
	}
	return keys
}

// Parents returns those of ids that have continuations (a continuations
// item), in the order of ids: what the chain function releases of the jobs
// a batch of the markers stream shows ended. One consistent BatchGetItem
// per 100 ids.
func (s *Store) Parents(ctx context.Context, ids []string) ([]string, error) {
	has := map[string]bool{}
	err := ddb.BatchGet(ctx, s.client.BatchGetItem, s.table, jobKeys(ids, ContinuationsOfPK), AttrPK, func(item map[string]types.AttributeValue) error {
		if pk, ok := item[AttrPK].(*types.AttributeValueMemberS); ok {
			has[strings.TrimPrefix(pk.Value, "continuations#")] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: parents: %w", err)
	}
	var out []string
	for _, id := range ids {
		if has[id] && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Continuations returns the ids of the jobs that wait (or waited) for job
// parentID, sorted: the chain an operator's view draws. One GetItem.
func (s *Store) Continuations(ctx context.Context, parentID string) ([]string, error) {
	var list continuationsItem
	if _, err := s.getItem(ctx, ContinuationsOfPK(parentID), &list); err != nil {
		return nil, err
	}
	return slices.Sorted(slices.Values(list.IDs)), nil
}

// Views returns the jobs of keys with their derived states, in the order
// of keys. A job whose record is gone (it ended and was kept its days)
// reads what its marker says (Succeeded, Failed, Cancelled) or, with no
// marker either, Expired: never a state it never had. One BatchGetItem of
// the records and one of their markers per 100 jobs.
func (s *Store) Views(ctx context.Context, keys []engine.Key) ([]Job, error) {
	ids := make([]string, len(keys))
	for i, k := range keys {
		ids[i] = k.JobID
	}
	byID, err := s.records(ctx, ids)
	if err != nil {
		return nil, err
	}
	recs := make([]Job, 0, len(keys))
	for _, k := range keys {
		j, ok := byID[k.JobID]
		if !ok {
			j = Job{ID: k.JobID, Type: k.Type, stored: StateExpired, State: StateExpired}
		}
		recs = append(recs, j)
	}
	peeker, _ := s.markers.(BatchPeeker)
	return ViewAll(ctx, peeker, recs, s.now())
}
