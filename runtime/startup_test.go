package runtime

import (
	"errors"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/upstream"
)

// TestUpHealth: an upstream is starting until an attempt ends, failed
// (with its reason) from a failed attempt until it is ready, including
// while it tries again.
func TestUpHealth(t *testing.T) {
	boom := errors.New("connect: no such file")
	for _, c := range []struct {
		name   string
		states []upstream.State
		phase  string
		reason string
	}{
		{"nothing yet", nil, phaseStarting, ""},
		{"connecting", []upstream.State{{Status: upstream.StatusConnecting}}, phaseStarting, ""},
		{"ready", []upstream.State{{Status: upstream.StatusConnecting}, {Status: upstream.StatusReady}}, phaseReady, ""},
		{"failed", []upstream.State{{Status: upstream.StatusConnecting}, {Status: upstream.StatusDown, Err: boom}}, phaseFailed, boom.Error()},
		{"retrying after a failure", []upstream.State{{Status: upstream.StatusDown, Err: boom}, {Status: upstream.StatusConnecting}}, phaseFailed, boom.Error()},
		{"ready after a failure", []upstream.State{{Status: upstream.StatusDown, Err: boom}, {Status: upstream.StatusConnecting}, {Status: upstream.StatusReady}}, phaseReady, ""},
		{"reconnecting after ready", []upstream.State{{Status: upstream.StatusReady}, {Status: upstream.StatusConnecting}}, phaseStarting, ""},
		{"closed", []upstream.State{{Status: upstream.StatusClosed}}, phaseFailed, ""},
	} {
		h := &upHealth{}
		for _, st := range c.states {
			h.observe(st)
		}
		if ph, why := h.get(); ph != c.phase || why != c.reason {
			t.Errorf("%s: %s %q, want %s %q", c.name, ph, why, c.phase, c.reason)
		}
	}
}

func TestPendingText(t *testing.T) {
	for _, c := range []struct {
		notes []upstreamNote
		want  string
	}{
		{[]upstreamNote{{Name: "a", State: phaseStarting}, {Name: "b", State: phaseFailed}, {Name: "c", State: phaseStarting}},
			"(upstreams still starting: a, c; failed: b; their tools are not listed until they come up)"},
		{[]upstreamNote{{Name: "b", State: phaseFailed}}, "(upstreams failed: b; their tools are not listed until they come up)"},
		// Anonymous notes (a policy narrows the caller's view) are counted.
		{[]upstreamNote{{State: phaseStarting}, {State: phaseStarting}}, "(upstreams still starting: 2; their tools are not listed until they come up)"},
	} {
		if got := pendingText(c.notes); got != c.want {
			t.Errorf("pendingText(%v) = %q, want %q", c.notes, got, c.want)
		}
	}
}
