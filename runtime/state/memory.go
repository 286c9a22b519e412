package state

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

// Memory is a KV held in one process's memory: for unit tests, and for a
// runtime without a state directory. Expired entries are dropped lazily.
type Memory struct {
	now    func() time.Time
	mu     sync.Mutex
	m      map[string]memItem
	closed bool
	// puts counts writes since the last sweep of expired entries.
	puts int
}

// sweepEvery is how many writes pass between two sweeps of the expired
// entries, so that keys written once and never read again (redeemed
// nonces, windows of principals gone quiet) do not pile up.
const sweepEvery = 4096

type memItem struct {
	val []byte
	exp time.Time // zero: never
}

// NewMemory returns an empty in-memory KV; now is its clock (time.Now when
// nil).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, m: map[string]memItem{}}
}

// live returns key's item when it exists and has not expired. Called with
// mu held.
func (s *Memory) live(key string) (memItem, bool) {
	it, ok := s.m[key]
	if !ok {
		return it, false
	}
	if !it.exp.IsZero() && !s.now().Before(it.exp) {
		delete(s.m, key)
		return it, false
	}
	return it, true
}

func (s *Memory) put(key string, val []byte, ttl time.Duration) {
	if s.puts++; s.puts >= sweepEvery {
		s.puts = 0
		now := s.now()
		for k, it := range s.m {
			if !it.exp.IsZero() && !now.Before(it.exp) {
				delete(s.m, k)
			}
		}
	}
	it := memItem{val: bytes.Clone(val)}
	if ttl > 0 {
		it.exp = s.now().Add(ttl)
	}
	s.m[key] = it
}

func (s *Memory) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Get implements KV.
func (s *Memory) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	it, ok := s.live(key)
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(it.val), nil
}

// Set implements KV.
func (s *Memory) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := CheckWrite(key, val, ttl); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.put(key, val, ttl)
	return nil
}

// Create implements KV.
func (s *Memory) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	if err := CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if _, ok := s.live(key); ok {
		return false, nil
	}
	s.put(key, val, ttl)
	return true, nil
}

// Swap implements KV.
func (s *Memory) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error) {
	if err := CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	it, ok := s.live(key)
	switch {
	case old == nil && ok, old != nil && (!ok || !bytes.Equal(it.val, old)):
		return false, nil
	}
	if val == nil {
		delete(s.m, key)
	} else {
		s.put(key, val, ttl)
	}
	return true, nil
}

// Delete implements KV.
func (s *Memory) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.m, key)
	return nil
}

// Scan implements KV.
func (s *Memory) Scan(ctx context.Context, prefix string, limit int) ([]Entry, error) {
	if err := CheckScan(prefix, limit); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, prefix) {
			if _, ok := s.live(k); ok {
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	if len(keys) > limit {
		keys = keys[:limit]
	}
	out := make([]Entry, len(keys))
	for i, k := range keys {
		out[i] = Entry{Key: k, Value: bytes.Clone(s.m[k].val)}
	}
	return out, nil
}

// Admit implements KV.
func (s *Memory) Admit(ctx context.Context, req AdmitRequest) (AdmitResult, error) {
	if err := CheckAdmit(req); err != nil {
		return AdmitResult{}, err
	}
	if err := s.enter(ctx); err != nil {
		return AdmitResult{}, err
	}
	defer s.mu.Unlock()
	logs := make([][]int64, len(req.Keys))
	for i, k := range req.Keys {
		if it, ok := s.live(k); ok {
			logs[i] = DecodeWindow(it.val)
		}
	}
	res, next := AdmitLogs(req, logs)
	for i, l := range next {
		s.put(req.Keys[i], EncodeWindow(l), req.Window)
	}
	return res, nil
}

// Close implements KV.
func (s *Memory) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.m = nil
	return nil
}

// memoryBackend is a Memory KV with an in-memory artifact store.
type memoryBackend struct {
	kv  *Memory
	art artifacts.Store
}

// OpenMemory returns a backend held in this process's memory: nothing is
// shared with another process and nothing survives Close.
func OpenMemory(o artifacts.Options) (Backend, error) {
	o.InMemory, o.Dir = true, ""
	art, err := artifacts.OpenBadger(o)
	if err != nil {
		return nil, err
	}
	return &memoryBackend{kv: NewMemory(o.Now), art: art}, nil
}

func (b *memoryBackend) Name() string               { return "memory" }
func (b *memoryBackend) KV() KV                     { return b.kv }
func (b *memoryBackend) Artifacts() artifacts.Store { return b.art }
func (b *memoryBackend) Close() error {
	err := b.art.Close()
	b.kv.Close()
	return err
}
