package benchmarks

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/internal/redistest"
)

// TestStateOverheadSmoke runs the state comparison briefly on every
// backend: each serves reads and writes without an error, a read costs at
// least one state operation (the incident state) and a write at least two
// more (its idempotency record reserved, then completed).
func TestStateOverheadSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four runtimes")
	}
	rs := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunStateOverhead(ctx, StateOverheadOptions{Backends: StateBackends, RedisURL: rs.URL(), Calls: 20, Clients: 2, Duration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(StateBackends) {
		t.Fatalf("rows %+v", rep.Rows)
	}
	for _, r := range rep.Rows {
		if r.Errors != 0 || r.OpsPerRead < 1 || r.OpsPerWrite < r.OpsPerRead+2 || r.CallsPerSec <= 0 || r.ReadP50Ms <= 0 {
			t.Fatalf("%s: %+v", r.Backend, r)
		}
	}
	var b bytes.Buffer
	if err := WriteStateTable(&b, rep); err != nil || !strings.Contains(b.String(), "embedded-client") {
		t.Fatalf("table: %v\n%s", err, b.String())
	}
	if _, err := RunStateOverhead(ctx, StateOverheadOptions{Backends: []string{"nope"}, Calls: 1}); err == nil || !strings.Contains(err.Error(), "unknown backend") {
		t.Fatalf("an unknown backend: %v", err)
	}
}
