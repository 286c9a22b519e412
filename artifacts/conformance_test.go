package artifacts_test

import (
	"testing"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/artifacts/artifactstest"
)

// TestConformance runs the Store conformance suite against the in-memory
// Badger store.
func TestConformance(t *testing.T) {
	artifactstest.Run(t, func(t *testing.T, o artifacts.Options) artifacts.Store {
		o.InMemory, o.SweepInterval = true, -1
		s, err := artifacts.OpenBadger(o)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
