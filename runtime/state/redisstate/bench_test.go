package redisstate

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/artifacts/artifactstest"
	"github.com/quiver-mcp/quiver/internal/redistest"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// BenchmarkKV measures one call against a local redis-server, serially
// (latency) and from parallel goroutines (throughput of one backend).
func BenchmarkKV(b *testing.B) {
	srv := redistest.Start(b)
	kv := open(b, srv, nil).KV()
	ctx := b.Context()
	val := make([]byte, 256)
	if err := kv.Set(ctx, "hot", val, 0); err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	ops := []struct {
		name string
		fn   func() error
	}{
		{"Get", func() error { _, err := kv.Get(ctx, "hot"); return err }},
		{"Set", func() error { return kv.Set(ctx, "k"+strconv.FormatInt(n.Add(1)%1024, 10), val, time.Minute) }},
		{"Create", func() error {
			_, err := kv.Create(ctx, "c"+strconv.FormatInt(n.Add(1), 10), val, time.Minute)
			return err
		}},
		{"Swap", func() error {
			_, err := kv.Swap(ctx, "hot", val, val, 0)
			return err
		}},
		{"Admit", func() error {
			_, err := kv.Admit(ctx, state.AdmitRequest{
				Keys: []string{"w" + strconv.FormatInt(n.Add(1)%64, 10), "global"}, Limits: []int{1 << 30, 1 << 30},
				Window: time.Second, Take: true,
			})
			return err
		}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			for b.Loop() {
				if err := op.fn(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(op.name+"/parallel", func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := op.fn(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkArtifacts measures Put and ReadAt against a local redis-server.
func BenchmarkArtifacts(b *testing.B) {
	srv := redistest.Start(b)
	s := open(b, srv, func(o *Options) { o.Artifacts = artifacts.Options{MaxBytes: 256 << 20} }).Artifacts()
	ctx := b.Context()
	for _, size := range []int{1 << 10, 1 << 20, 5 << 20} {
		data := artifactstest.Content(1, size)
		b.Run("Put/"+strconv.Itoa(size>>10)+"KiB", func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.Put(ctx, "alice", artifacts.PutInput{Data: data}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	m, err := s.Put(ctx, "alice", artifacts.PutInput{Data: artifactstest.Content(2, 5<<20)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ReadAt/4KiB", func(b *testing.B) {
		b.SetBytes(4 << 10)
		for b.Loop() {
			if _, err := s.ReadAt(ctx, "alice", m.Handle, 3<<20, 4<<10); err != nil {
				b.Fatal(err)
			}
		}
	})
}
