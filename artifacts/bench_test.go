package artifacts

import (
	"context"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"testing"
)

var benchSizes = []struct {
	name string
	size int
}{
	{"1KiB", 1 << 10},
	{"1MiB", 1 << 20},
	{"5MiB", 5 << 20},
}

func openBenchStore(b *testing.B, mode syncMode) *BadgerStore {
	b.Helper()
	s, err := OpenBadger(Options{Dir: b.TempDir(), SweepInterval: -1, sync: mode})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkPut stores distinct content (no dedup) on disk, under each
// durability mode: explicit (the default), SyncWrites, none.
func BenchmarkPut(b *testing.B) {
	modes := []struct {
		name string
		mode syncMode
	}{{"explicit", syncExplicit}, {"syncwrites", syncBadgerWrites}, {"nosync", syncNone}}
	for _, sz := range benchSizes {
		for _, m := range modes {
			b.Run(sz.name+"/"+m.name, func(b *testing.B) {
				s := openBenchStore(b, m.mode)
				data := content(1, sz.size)
				ctx := context.Background()
				b.SetBytes(int64(sz.size))
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					binary.LittleEndian.PutUint64(data, uint64(i)) // new content each time
					if _, err := s.Put(ctx, "bench", PutInput{MediaType: "text/plain", Data: data}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkPutDedup stores content that is already present (a reference only).
func BenchmarkPutDedup(b *testing.B) {
	s := openBenchStore(b, syncExplicit)
	data := content(2, 1<<20)
	ctx := context.Background()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := s.Put(ctx, "bench", PutInput{Data: data}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadAt reads a 4 KiB slice (the whole artifact for 1 KiB) at a
// random offset, as tool_view does.
func BenchmarkReadAt(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s := openBenchStore(b, syncExplicit)
			ctx := context.Background()
			m, err := s.Put(ctx, "bench", PutInput{Data: content(3, sz.size)})
			if err != nil {
				b.Fatal(err)
			}
			n := min(int64(4<<10), m.SizeBytes)
			r := rand.New(rand.NewPCG(1, 2))
			b.SetBytes(n)
			b.ResetTimer()
			for b.Loop() {
				off := r.Int64N(m.SizeBytes - n + 1)
				if _, err := s.ReadAt(ctx, "bench", m.Handle, off, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpen streams a whole artifact (with the sha256 check at the end).
func BenchmarkOpen(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			s := openBenchStore(b, syncExplicit)
			ctx := context.Background()
			m, err := s.Put(ctx, "bench", PutInput{Data: content(4, sz.size)})
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(m.SizeBytes)
			b.ResetTimer()
			for b.Loop() {
				rc, err := s.Open(ctx, "bench", m.Handle)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, rc); err != nil {
					b.Fatal(err)
				}
				_ = rc.Close()
			}
		})
	}
}
