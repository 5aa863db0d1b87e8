package scalemodel

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/runstwice/runstwice/engine"
)

// Markers is a simulated markers table as the jobs store reads it
// (jobs.Markers and jobs.BatchPeeker): a marker per job, which the model
// settles as a worker's claim would. Every call takes Latency first.
type Markers struct {
	Latency time.Duration

	mu sync.Mutex
	m  map[engine.Key]engine.Record
}

// NewMarkers returns an empty markers table.
func NewMarkers() *Markers { return &Markers{m: map[engine.Key]engine.Record{}} }

// Table names the table.
func (*Markers) Table() string { return "markers" }

func (s *Markers) wait() {
	if s.Latency > 0 {
		time.Sleep(s.Latency)
	}
}

// Peek reads the marker of k.
func (s *Markers) Peek(_ context.Context, k engine.Key) (engine.Record, bool, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[k]
	return r, ok, nil
}

// PeekBatch reads the markers of keys in one call.
func (s *Markers) PeekBatch(_ context.Context, keys []engine.Key) (map[engine.Key]engine.Record, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[engine.Key]engine.Record{}
	for _, k := range keys {
		if r, ok := s.m[k]; ok {
			out[k] = r
		}
	}
	return out, nil
}

// Decode is not simulated: the model reads markers by Peek alone.
func (*Markers) Decode(map[string]types.AttributeValue) (engine.Record, bool, error) {
	return engine.Record{}, false, errors.New("scalemodel: markers are read by Peek")
}

// Tombstone writes a cancel's marker.
func (s *Markers) Tombstone(_ context.Context, k engine.Key, due time.Time) (engine.Record, error) {
	s.wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := engine.Record{Key: k, State: engine.StateCancelled, ProcessedAt: time.Now(), ExpiresAt: due.Add(30 * 24 * time.Hour)}
	s.m[k] = r
	return r, nil
}

// Settle writes k's marker in state, as its worker's claim (DONE) does.
func (s *Markers) Settle(k engine.Key, state engine.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = engine.Record{Key: k, State: state, Owner: "worker", ProcessedAt: time.Now(), ExpiresAt: time.Now().Add(30 * 24 * time.Hour)}
}

// Len is how many markers the table holds.
func (s *Markers) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// Drop deletes the markers of keys (the model's checked chains).
func (s *Markers) Drop(keys ...engine.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.m, k)
	}
}
