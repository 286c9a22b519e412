package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// fakeClock is an injectable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testChunk is the chunk size most tests use, so small inputs span chunks.
const testChunk = 1024

// newMemStore opens an in-memory store with small chunks and no background loop;
// mod adjusts the options.
func newMemStore(t testing.TB, mod func(*Options)) (*BadgerStore, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	o := Options{InMemory: true, SweepInterval: -1, Now: clk.Now, chunkSize: testChunk}
	if mod != nil {
		mod(&o)
	}
	s, err := OpenBadger(o)
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, clk
}

// content returns size deterministic bytes for seed.
func content(seed uint64, size int) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24), 0x51}))
	b := make([]byte, size)
	for i := 0; i < size; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func mustPut(t testing.TB, s Store, owner string, data []byte) Meta {
	t.Helper()
	m, err := s.Put(context.Background(), owner, PutInput{MediaType: "text/plain", Label: "t", Data: data})
	if err != nil {
		t.Fatalf("Put(%d bytes): %v", len(data), err)
	}
	return m
}

// readAll streams an artifact through Open.
func readAll(ctx context.Context, s Store, owner, handle string) ([]byte, error) {
	rc, err := s.Open(ctx, owner, handle)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	return b, err
}

func mustReadAll(t testing.TB, s Store, owner, handle string, want []byte) {
	t.Helper()
	got, err := readAll(context.Background(), s, owner, handle)
	if err != nil {
		t.Fatalf("Open/read %s: %v", handle, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Open/read %s: got %d bytes (sha %s), want %d (sha %s)", handle, len(got), sha(got)[:8], len(want), sha(want)[:8])
	}
}

// dbState is a decoded snapshot of every key in the store.
type dbState struct {
	metas   map[string]metaRecord // by meta key
	expiry  map[string]bool       // x/ keys
	blobs   map[string]blobRecord // by hex sha256
	chunks  map[blobID]map[int64]int
	garbage map[blobID]bool
	other   []string
}

func scanState(t testing.TB, s *BadgerStore) dbState {
	t.Helper()
	st := dbState{
		metas: map[string]metaRecord{}, expiry: map[string]bool{}, blobs: map[string]blobRecord{},
		chunks: map[blobID]map[int64]int{}, garbage: map[blobID]bool{},
	}
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().KeyCopy(nil)
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			switch string(k[:2]) {
			case prefixMeta:
				rec, err := decodeMetaRecord(v)
				if err != nil {
					return err
				}
				st.metas[string(k)] = rec
			case prefixExpiry:
				st.expiry[string(k)] = true
			case prefixHash:
				br, err := decodeBlobRecord(v)
				if err != nil {
					return err
				}
				st.blobs[hex.EncodeToString(k[2:])] = br
			case prefixChunk:
				var id blobID
				copy(id[:], k[2:2+blobIDLen])
				if st.chunks[id] == nil {
					st.chunks[id] = map[int64]int{}
				}
				idx := int64(k[2+blobIDLen])<<24 | int64(k[3+blobIDLen])<<16 | int64(k[4+blobIDLen])<<8 | int64(k[5+blobIDLen])
				st.chunks[id][idx] = len(v)
			case prefixGarbage:
				var id blobID
				copy(id[:], k[2:])
				st.garbage[id] = true
			default:
				st.other = append(st.other, string(k))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	return st
}

// checkInvariants verifies, on a quiescent store, every invariant listed in
// keys.go, that every stored blob hashes to its key, and the quota accounting.
func checkInvariants(t testing.TB, s *BadgerStore) dbState {
	t.Helper()
	st := scanState(t, s)
	refs := map[string]int64{}
	for mk, rec := range st.metas {
		if !st.expiry[string(expiryKey(rec.Expires, []byte(mk)))] {
			t.Errorf("meta %x has no expiry entry", mk)
		}
		br, ok := st.blobs[rec.Hash]
		if !ok {
			t.Errorf("meta %x: no content record for %s", mk, rec.Hash)
			continue
		}
		if hex.EncodeToString(br.blob[:]) != rec.Blob || br.size != rec.Size || br.chunkSize != rec.ChunkSize {
			t.Errorf("meta %x disagrees with its content record", mk)
		}
		refs[rec.Hash]++
	}
	for xk := range st.expiry {
		_, mk, ok := parseExpiryKey([]byte(xk))
		if _, found := st.metas[string(mk)]; !ok || !found {
			t.Errorf("expiry entry %x has no meta", xk)
		}
	}
	live := map[blobID]bool{}
	var used int64
	for h, br := range st.blobs {
		if refs[h] != br.refs {
			t.Errorf("content %s: refs %d, %d meta records", h[:8], br.refs, refs[h])
		}
		live[br.blob] = true
		used += br.size
		chunks := st.chunks[br.blob]
		n := (br.size + br.chunkSize - 1) / br.chunkSize
		if int64(len(chunks)) != n {
			t.Errorf("content %s: %d chunks, want %d", h[:8], len(chunks), n)
		}
		hh := sha256.New()
		for i := range n {
			want := min(br.chunkSize, br.size-i*br.chunkSize)
			if int64(chunks[i]) != want {
				t.Errorf("content %s chunk %d: %d bytes, want %d", h[:8], i, chunks[i], want)
			}
			err := s.db.View(func(txn *badger.Txn) error {
				item, err := txn.Get(chunkKey(br.blob, i))
				if err != nil {
					return err
				}
				return item.Value(func(v []byte) error { hh.Write(v); return nil })
			})
			if err != nil {
				t.Errorf("content %s chunk %d: %v", h[:8], i, err)
			}
		}
		if got := hex.EncodeToString(hh.Sum(nil)); got != h {
			t.Errorf("content %s hashes to %s", h[:8], got[:8])
		}
	}
	for id := range st.chunks {
		if !live[id] {
			t.Errorf("chunks of blob %x belong to no content record (garbage mark: %v)", id[:4], st.garbage[id])
		}
	}
	if len(st.garbage) > 0 {
		t.Errorf("%d garbage marks left", len(st.garbage))
	}
	if len(st.other) > 0 {
		t.Errorf("unexpected keys: %q", st.other)
	}
	s.lockAlways()
	defer s.unlock()
	if s.used != used {
		t.Errorf("used = %d, content records sum to %d", s.used, used)
	}
	if s.reserved != 0 {
		t.Errorf("reserved = %d on a quiescent store", s.reserved)
	}
	if len(s.holds) != 0 {
		t.Errorf("holds = %v on a quiescent store", s.holds)
	}
	if s.used > s.maxBytes {
		t.Errorf("used %d exceeds quota %d", s.used, s.maxBytes)
	}
	return st
}
