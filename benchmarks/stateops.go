package benchmarks

import (
	"context"
	"io"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// countedBackend counts the state operations a runtime makes, so that a
// report can say how many a call costs.
type countedBackend struct {
	state.Backend
	kv  countedKV
	art countedArtifacts
}

// countBackend wraps b.
func countBackend(b state.Backend) *countedBackend {
	c := &countedBackend{Backend: b}
	c.kv = countedKV{KV: b.KV(), n: &c.kv.ops}
	c.art = countedArtifacts{Store: b.Artifacts(), n: &c.kv.ops}
	return c
}

// KV implements state.Backend.
func (c *countedBackend) KV() state.KV { return &c.kv }

// Artifacts implements state.Backend.
func (c *countedBackend) Artifacts() artifacts.Store { return &c.art }

// Ops is the number of operations so far.
func (c *countedBackend) Ops() uint64 { return c.kv.ops.Load() }

type countedKV struct {
	state.KV
	ops atomic.Uint64
	n   *atomic.Uint64
}

func (c *countedKV) Get(ctx context.Context, key string) ([]byte, error) {
	c.n.Add(1)
	return c.KV.Get(ctx, key)
}

func (c *countedKV) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	c.n.Add(1)
	return c.KV.Set(ctx, key, val, ttl)
}

func (c *countedKV) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	c.n.Add(1)
	return c.KV.Create(ctx, key, val, ttl)
}

func (c *countedKV) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error) {
	c.n.Add(1)
	return c.KV.Swap(ctx, key, old, val, ttl)
}

func (c *countedKV) Delete(ctx context.Context, key string) error {
	c.n.Add(1)
	return c.KV.Delete(ctx, key)
}

func (c *countedKV) Scan(ctx context.Context, prefix string, limit int) ([]state.Entry, error) {
	c.n.Add(1)
	return c.KV.Scan(ctx, prefix, limit)
}

func (c *countedKV) Admit(ctx context.Context, req state.AdmitRequest) (state.AdmitResult, error) {
	c.n.Add(1)
	return c.KV.Admit(ctx, req)
}

type countedArtifacts struct {
	artifacts.Store
	n *atomic.Uint64
}

func (c *countedArtifacts) Put(ctx context.Context, owner string, in artifacts.PutInput) (artifacts.Meta, error) {
	c.n.Add(1)
	return c.Store.Put(ctx, owner, in)
}

func (c *countedArtifacts) Stat(ctx context.Context, owner, handle string) (artifacts.Meta, error) {
	c.n.Add(1)
	return c.Store.Stat(ctx, owner, handle)
}

func (c *countedArtifacts) ReadAt(ctx context.Context, owner, handle string, off, n int64) ([]byte, error) {
	c.n.Add(1)
	return c.Store.ReadAt(ctx, owner, handle, off, n)
}

func (c *countedArtifacts) Open(ctx context.Context, owner, handle string) (io.ReadCloser, error) {
	c.n.Add(1)
	return c.Store.Open(ctx, owner, handle)
}

func (c *countedArtifacts) Delete(ctx context.Context, owner, handle string) error {
	c.n.Add(1)
	return c.Store.Delete(ctx, owner, handle)
}
