package memstore_test

import (
	"testing"

	"github.com/runstwice/runstwice/engine"
	"github.com/runstwice/runstwice/engine/enginetest"
	"github.com/runstwice/runstwice/engine/memstore"
)

func TestMemoryConformance(t *testing.T) {
	enginetest.RunStore(t, func(t *testing.T, clock *enginetest.Clock) engine.Store {
		m := memstore.New()
		m.Now = clock.Now
		return m
	})
}
