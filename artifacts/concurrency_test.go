package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrent runs puts (shared content, both input kinds), slices, streams,
// stats, deletes, sweeps and cross-owner probes from many goroutines against a
// small quota, then checks every invariant on the quiescent store.
func TestConcurrent(t *testing.T) {
	s, clk := newMemStore(t, func(o *Options) { o.MaxBytes = 48 * testChunk; o.TTL = time.Hour })
	ctx := context.Background()
	const (
		workers = 16
		ops     = 150
		seeds   = 10
	)
	sizeOf := func(seed uint64) int {
		return []int{0, 10, 500, testChunk, testChunk + 1, 2500, 4 * testChunk, 5000, 6 * testChunk, 3}[seed]
	}
	type entry struct {
		owner, handle string
		seed          uint64
	}
	var (
		mu       sync.Mutex
		handles  []entry
		tooLarge atomic.Int64
		puts     atomic.Int64
	)
	pick := func(r *rand.Rand) (entry, bool) {
		mu.Lock()
		defer mu.Unlock()
		if len(handles) == 0 {
			return entry{}, false
		}
		return handles[r.IntN(len(handles))], true
	}
	check := func(what string, err error, allowed ...error) {
		if err == nil {
			return
		}
		for _, a := range allowed {
			if errors.Is(err, a) {
				return
			}
		}
		t.Errorf("%s: %v", what, err)
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 42))
			owner := fmt.Sprintf("principal-%d", w%4)
			for range ops {
				clk.Add(time.Minute)
				switch op := r.IntN(100); {
				case op < 35:
					seed := r.Uint64N(seeds)
					data := content(seed, sizeOf(seed))
					in := PutInput{MediaType: "text/plain", Label: fmt.Sprint(seed)}
					if r.IntN(2) == 0 {
						in.Data = data
					} else {
						in.Body, in.Size = bytes.NewReader(data), int64(len(data))
					}
					m, err := s.Put(ctx, owner, in)
					if errors.Is(err, ErrTooLarge) {
						tooLarge.Add(1)
						continue
					}
					check("put", err)
					if err == nil {
						puts.Add(1)
						if m.ContentHash != sha(data) || m.SizeBytes != int64(len(data)) {
							t.Errorf("put meta %+v for seed %d", m, seed)
						}
						mu.Lock()
						handles = append(handles, entry{owner, m.Handle, seed})
						mu.Unlock()
					}
				case op < 60:
					e, ok := pick(r)
					if !ok {
						continue
					}
					want := content(e.seed, sizeOf(e.seed))
					off := r.Int64N(int64(len(want)) + 1)
					n := r.Int64N(3 * testChunk)
					got, err := s.ReadAt(ctx, e.owner, e.handle, off, n)
					check("readat", err, ErrNotFound)
					if err == nil && !bytes.Equal(got, want[off:min(off+n, int64(len(want)))]) {
						t.Errorf("readat %s [%d,+%d): wrong bytes", e.handle, off, n)
					}
				case op < 75:
					e, ok := pick(r)
					if !ok {
						continue
					}
					got, err := readAll(ctx, s, e.owner, e.handle)
					check("stream", err, ErrNotFound)
					if err == nil && !bytes.Equal(got, content(e.seed, sizeOf(e.seed))) {
						t.Errorf("stream %s: wrong bytes", e.handle)
					}
				case op < 85:
					e, ok := pick(r)
					if !ok {
						continue
					}
					m, err := s.Stat(ctx, e.owner, e.handle)
					check("stat", err, ErrNotFound)
					if err == nil && (m.Owner != e.owner || m.Label != fmt.Sprint(e.seed)) {
						t.Errorf("stat %s: %+v", e.handle, m)
					}
				case op < 93:
					e, ok := pick(r)
					if !ok {
						continue
					}
					check("delete", s.Delete(ctx, e.owner, e.handle), ErrNotFound)
				case op < 98:
					e, ok := pick(r)
					if !ok {
						continue
					}
					if _, err := s.ReadAt(ctx, e.owner+"-other", e.handle, 0, 1); !errors.Is(err, ErrNotFound) {
						t.Errorf("cross-owner read: %v", err)
					}
				default:
					_, err := s.Sweep(ctx)
					check("sweep", err)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d puts, %d refused for quota", puts.Load(), tooLarge.Load())
	if puts.Load() == 0 {
		t.Fatal("no put succeeded")
	}
	checkInvariants(t, s)
	for _, e := range handles {
		check("final delete", s.Delete(ctx, e.owner, e.handle), ErrNotFound)
	}
	st := checkInvariants(t, s)
	if len(st.metas)+len(st.blobs)+len(st.chunks) != 0 || s.Usage() != 0 {
		t.Fatalf("store not empty after deleting every handle: %d metas, %d blobs, %d chunk sets, usage %d",
			len(st.metas), len(st.blobs), len(st.chunks), s.Usage())
	}
}
