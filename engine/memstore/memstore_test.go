package memstore_test

import (
	"testing"

	"github.com/runstwice/runstwice/engine/memstore"
	"github.com/runstwice/runstwice/internal/marker/markertest"
)

func TestMemoryConformance(t *testing.T) {
	markertest.Run(t, func(t *testing.T, clock *markertest.Clock) markertest.Store {
		m := memstore.New()
		m.Now = clock.Now
		return m
	})
}
