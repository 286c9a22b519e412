package state

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestMemorySweeps: expired entries that are never read again are dropped
// by the writes that follow.
func TestMemorySweeps(t *testing.T) {
	now := time.Unix(0, 0)
	kv := NewMemory(func() time.Time { return now })
	ctx := context.Background()
	for i := range sweepEvery {
		if err := kv.Set(ctx, fmt.Sprint("old/", i), []byte{1}, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	now = now.Add(time.Minute)
	for i := range sweepEvery {
		if err := kv.Set(ctx, fmt.Sprint("new/", i), []byte{1}, 0); err != nil {
			t.Fatal(err)
		}
	}
	kv.mu.Lock()
	n := len(kv.m)
	kv.mu.Unlock()
	if n > sweepEvery+1 {
		t.Fatalf("%d entries kept", n)
	}
}
