package marker_test

import (
	"testing"

	"github.com/runstwice/runstwice/internal/marker"
	"github.com/runstwice/runstwice/internal/marker/markertest"
)

func TestMemoryConformance(t *testing.T) {
	markertest.Run(t, func(t *testing.T, clock *markertest.Clock) markertest.Store {
		m := marker.NewMemory()
		m.Now = clock.Now
		return m
	})
}
