package state_test

import (
	"testing"

	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

func TestMemory(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.KV { return state.NewMemory(nil) })
}
