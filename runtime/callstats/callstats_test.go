package callstats

import (
	"sync"
	"testing"
	"time"
)

func TestSince(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	w := New(8, 2)
	for i := 1; i <= 4; i++ {
		w.Record("a", t0.Add(time.Duration(i)*time.Second), time.Duration(i)*time.Millisecond, i == 4)
	}
	tests := []struct {
		name      string
		server    string
		from      time.Time
		want      Stats
		wantError float64
	}{
		{"all", "a", t0, Stats{Calls: 4, Failed: 1, P50: 2 * time.Millisecond, P99: 4 * time.Millisecond}, 0.25},
		{"window cuts the oldest", "a", t0.Add(3 * time.Second), Stats{Calls: 2, Failed: 1, P50: 3 * time.Millisecond, P99: 4 * time.Millisecond}, 0.5},
		{"nothing since", "a", t0.Add(time.Minute), Stats{}, 0},
		{"unknown server", "b", t0, Stats{}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := w.Since(tt.server, tt.from)
			if got != tt.want {
				t.Fatalf("Since = %+v, want %+v", got, tt.want)
			}
			if got.ErrorRate() != tt.wantError {
				t.Fatalf("ErrorRate = %v, want %v", got.ErrorRate(), tt.wantError)
			}
		})
	}
}

func TestRingWrapsAndBounds(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	w := New(4, 1)
	for i := range 10 {
		w.Record("a", t0.Add(time.Duration(i)*time.Second), time.Duration(i)*time.Millisecond, false)
	}
	got := w.Since("a", t0)
	if got.Calls != 4 || !got.Truncated || got.P50 != 7*time.Millisecond || got.P99 != 9*time.Millisecond {
		t.Fatalf("after wrap: %+v", got)
	}
	// Only the newest calls are kept; a window covering only some of them
	// is not truncated.
	if got := w.Since("a", t0.Add(8*time.Second)); got.Calls != 2 || got.Truncated {
		t.Fatalf("narrow window: %+v", got)
	}
	// The key bound: a second server is not remembered.
	w.Record("b", t0, time.Millisecond, true)
	if got := w.Since("b", t0); got.Calls != 0 {
		t.Fatalf("server past maxKeys was counted: %+v", got)
	}
}

func TestConcurrent(t *testing.T) {
	w := New(0, 0)
	now := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				w.Record("s", now, time.Duration(i), g%2 == 0)
				_ = w.Since("s", now)
			}
		}()
	}
	wg.Wait()
	if got := w.Since("s", now); got.Calls != 2048 || got.Failed == 0 {
		t.Fatalf("after concurrent records: %+v", got)
	}
}

func BenchmarkRecord(b *testing.B) {
	w := New(0, 0)
	now := time.Now()
	for b.Loop() {
		w.Record("server", now, time.Millisecond, false)
	}
}
