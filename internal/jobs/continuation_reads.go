package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
	distinct := slices.Compact(slices.Sorted(slices.Values(ids))) // BatchGetItem refuses a key twice
	for chunk := range slices.Chunk(distinct, 100) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = keyAV(JobPK(id))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == 5 {
				return nil, errors.New("jobs: records: keys still unprocessed")
			}
			res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("jobs: records: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				var r record
				if ok, err := ddb.DecodeLive(item, now, &r); err != nil {
					return nil, fmt.Errorf("jobs: %w", err)
				} else if ok {
					out[r.JobID] = r.job()
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// Parents returns those of ids that have continuations (a continuations
// item), in the order of ids: what the chain function releases of the jobs
// a batch of the markers stream shows ended. One consistent BatchGetItem
// per 100 ids.
func (s *Store) Parents(ctx context.Context, ids []string) ([]string, error) {
	has := map[string]bool{}
	distinct := slices.Compact(slices.Sorted(slices.Values(ids))) // BatchGetItem refuses a key twice
	for chunk := range slices.Chunk(distinct, 100) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = keyAV(ContinuationsOfPK(id))
		}
		req := map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String(AttrPK)}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt == 5 {
				return nil, errors.New("jobs: parents: keys still unprocessed")
			}
			res, err := s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("jobs: parents: %w", err)
			}
			for _, item := range res.Responses[s.table] {
				if pk, ok := item[AttrPK].(*types.AttributeValueMemberS); ok {
					has[strings.TrimPrefix(pk.Value, "continuations#")] = true
				}
			}
			req = res.UnprocessedKeys
		}
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
