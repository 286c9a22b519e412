package redisstate

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/artifacts/artifactstest"
	"github.com/quiver-mcp/quiver/internal/redistest"
	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

// failFast bounds a call to a dead or hung server: not a performance
// figure but the client's timeouts (dial, then read) with ample slack, so
// that a missing timeout (a call that hangs) is caught.
const failFast = DialTimeout + ReadTimeout + 3*time.Second

func testCtx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// freshPrefix gives a backend a key prefix of its own, so tests can share
// one server.
func freshPrefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + ":"
}

// open opens a backend on srv with a fresh key prefix (unless mod sets one)
// and closes it when t ends.
func open(t testing.TB, srv *redistest.Server, mod func(*Options)) *Backend {
	t.Helper()
	o := Options{URL: srv.URL(), Password: srv.Password(), KeyPrefix: freshPrefix()}
	if mod != nil {
		mod(&o)
	}
	b, err := OpenBackend(testCtx(t), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func TestKVConformance(t *testing.T) {
	srv := redistest.Start(t)
	statetest.Run(t, func(t *testing.T) state.KV { return open(t, srv, nil).KV() })
}

func TestArtifactsConformance(t *testing.T) {
	srv := redistest.Start(t)
	artifactstest.Run(t, func(t *testing.T, o artifacts.Options) artifacts.Store {
		return open(t, srv, func(ro *Options) { ro.Artifacts = o }).Artifacts()
	})
}

func TestName(t *testing.T) {
	srv := redistest.Start(t)
	var b state.Backend = open(t, srv, nil)
	if b.Name() != "redis" {
		t.Fatalf("Name = %q", b.Name())
	}
}

func checkOneLine(t *testing.T, err error, secret string) {
	t.Helper()
	if err == nil {
		t.Fatal("Open succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	if secret != "" && strings.Contains(msg, secret) {
		t.Errorf("error shows the password: %q", msg)
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := testCtx(t)
	for _, u := range []string{
		"", "localhost:6379", "http://localhost:6379", "redis://", "redis://u:hunter2@[::1",
		"redis://u:hunter2@localhost:6379/notanumber", "redis://localhost:6379/0?dial_timeout=x",
	} {
		t.Run("malformed "+u, func(t *testing.T) {
			_, err := Open(ctx, Options{URL: u})
			checkOneLine(t, err, "hunter2")
			if !errors.Is(err, state.ErrInvalid) {
				t.Fatalf("Open(%q) = %v, want ErrInvalid", u, err)
			}
		})
	}

	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		start := time.Now()
		_, err = Open(ctx, Options{URL: "redis://u:hunter2@" + addr + "/0"})
		checkOneLine(t, err, "hunter2")
		if !errors.Is(err, state.ErrUnavailable) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("Open(unreachable) = %v, want ErrUnavailable saying refused", err)
		}
		if d := time.Since(start); d > failFast {
			t.Fatalf("Open(unreachable) took %v", d)
		}
		t.Log(err)
	})

	srv := redistest.Start(t, redistest.WithPassword("s3cret-pw"))
	for _, tc := range []struct {
		name, password, want string
		err                  error
	}{
		{"no password", "", "NOAUTH", state.ErrInvalid},
		{"wrong password", "wrong-pw", "WRONGPASS", state.ErrInvalid},
		{"right password", "s3cret-pw", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Open(ctx, Options{URL: srv.URL(), Password: tc.password})
			if tc.err == nil {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer b.Close()
				if err := b.KV().Set(ctx, "k", []byte("v"), 0); err != nil {
					t.Fatalf("Set: %v", err)
				}
				return
			}
			checkOneLine(t, err, "s3cret-pw")
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want %v mentioning %s", err, tc.err, tc.want)
			}
			t.Log(err)
		})
	}
	// The password may come in the URL too.
	b, err := Open(ctx, Options{URL: "redis://:s3cret-pw@" + srv.Addr()})
	if err != nil {
		t.Fatalf("Open with the password in the URL: %v", err)
	}
	b.Close()
}

// TestFull fills a server capped at 1 MB (noeviction): writes then fail
// with ErrTooLarge, and nothing stored before is lost.
func TestFull(t *testing.T) {
	srv := redistest.Start(t, redistest.WithMaxMemory("1mb"))
	b := open(t, srv, nil)
	ctx := testCtx(t)
	kv := b.KV()
	val := make([]byte, 1<<10)
	var stored []string
	var full error
	for i := range 5000 {
		k := fmt.Sprintf("fill/%04d", i)
		if full = kv.Set(ctx, k, val, 0); full != nil {
			break
		}
		stored = append(stored, k)
	}
	if !errors.Is(full, state.ErrTooLarge) || !strings.Contains(full.Error(), "no room") {
		t.Fatalf("writing past maxmemory = %v, want ErrTooLarge (no room)", full)
	}
	t.Logf("%d values stored before: %v", len(stored), full)
	if len(stored) < 10 {
		t.Fatalf("only %d values fit", len(stored))
	}
	checks := map[string]error{
		"create": second(kv.Create(ctx, "x", val, 0)),
		"swap":   second(kv.Swap(ctx, "x", nil, val, 0)),
		"admit":  second(kv.Admit(ctx, state.AdmitRequest{Keys: []string{"w"}, Limits: []int{5}, Window: time.Minute, Take: true})),
	}
	for name, err := range checks {
		if !errors.Is(err, state.ErrTooLarge) {
			t.Errorf("%s at maxmemory = %v, want ErrTooLarge", name, err)
		}
	}
	_, err := b.Artifacts().Put(ctx, "alice", artifacts.PutInput{Data: val})
	if !errors.Is(err, artifacts.ErrTooLarge) || !errors.Is(err, state.ErrTooLarge) {
		t.Errorf("artifact Put at maxmemory = %v, want ErrTooLarge", err)
	}
	for _, k := range stored {
		if got, err := kv.Get(ctx, k); err != nil || len(got) != len(val) {
			t.Fatalf("%s after the store filled up: %d bytes, %v", k, len(got), err)
		}
	}
	// Deletes still work at maxmemory (the server does not promise that
	// deleting a few small values brings it back under it).
	for _, k := range stored {
		if err := kv.Delete(ctx, k); err != nil {
			t.Fatalf("Delete at maxmemory: %v", err)
		}
	}
}

// TestServerDown stops the server mid-run: calls fail closed and fast with
// ErrUnavailable; after a restart the same backend works again.
func TestServerDown(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv, nil)
	ctx := testCtx(t)
	kv, art := b.KV(), b.Artifacts()
	if err := kv.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	m, err := art.Put(ctx, "alice", artifacts.PutInput{Data: []byte("content")})
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	calls := map[string]func() error{
		"get":    func() error { return second(kv.Get(ctx, "k")) },
		"set":    func() error { return kv.Set(ctx, "k", []byte("v"), 0) },
		"create": func() error { return second(kv.Create(ctx, "c", []byte("v"), 0)) },
		"swap":   func() error { return second(kv.Swap(ctx, "k", []byte("v"), []byte("w"), 0)) },
		"delete": func() error { return kv.Delete(ctx, "k") },
		"scan":   func() error { return second(kv.Scan(ctx, "", 10)) },
		"admit": func() error {
			return second(kv.Admit(ctx, state.AdmitRequest{Keys: []string{"w"}, Limits: []int{1}, Window: time.Second, Take: true}))
		},
		"artifact put":  func() error { return second(art.Put(ctx, "alice", artifacts.PutInput{Data: []byte("x")})) },
		"artifact stat": func() error { return second(art.Stat(ctx, "alice", m.Handle)) },
		"artifact read": func() error { return second(art.ReadAt(ctx, "alice", m.Handle, 0, 1)) },
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if !errors.Is(err, state.ErrUnavailable) {
			t.Errorf("%s with the server down = %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > failFast {
			t.Errorf("%s with the server down took %v", name, d)
		}
	}
	t.Log(second(kv.Get(ctx, "k")))

	srv.Restart() // nothing persisted: the data is gone, the backend is not
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := kv.Get(ctx, "k")
		if errors.Is(err, state.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend did not recover after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, call := range map[string]func() error{
		"set":    func() error { return kv.Set(ctx, "k", []byte("v2"), 0) },
		"swap":   func() error { return errOnFalse(kv.Swap(ctx, "s", nil, []byte("v3"), 0)) },
		"create": func() error { return errOnFalse(kv.Create(ctx, "c", []byte("v"), 0)) },
		"admit": func() error {
			return second(kv.Admit(ctx, state.AdmitRequest{Keys: []string{"w"}, Limits: []int{1}, Window: time.Second, Take: true}))
		},
		"artifact put": func() error { return second(art.Put(ctx, "alice", artifacts.PutInput{Data: []byte("x")})) },
	} {
		if err := call(); err != nil {
			t.Errorf("%s after recovery: %v", name, err)
		}
	}
}

// TestServerHung freezes the server (a hang or a partition): calls give up
// after the read timeout with ErrUnavailable, or at the caller's deadline
// with the context's error, and work again once it answers.
func TestServerHung(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv, nil)
	ctx := testCtx(t)
	kv := b.KV()
	if err := kv.Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	srv.Freeze()
	start := time.Now()
	_, err := kv.Get(ctx, "k")
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("Get from a hung server = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > failFast {
		t.Fatalf("Get from a hung server took %v", d)
	}
	t.Log(err)
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := kv.Admit(short, state.AdmitRequest{Keys: []string{"w"}, Limits: []int{1}, Window: time.Second, Take: true}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Admit with a 200ms deadline = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > failFast-ReadTimeout {
		t.Fatalf("Admit with a 200ms deadline took %v", d)
	}
	srv.Thaw()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := kv.Get(ctx, "k")
		if err == nil && string(got) == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("backend did not recover after the server thawed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func errOnFalse(ok bool, err error) error {
	if err == nil && !ok {
		return errors.New("returned false")
	}
	return err
}

// replicas opens n backends sharing one server and key prefix: n quiver
// replicas.
func replicas(t *testing.T, n int) []*Backend {
	srv := redistest.Start(t)
	prefix := freshPrefix()
	var bs []*Backend
	for range n {
		bs = append(bs, open(t, srv, func(o *Options) { o.KeyPrefix = prefix }))
	}
	return bs
}

func TestReplicasCreate(t *testing.T) {
	bs := replicas(t, 3)
	statetest.RaceCreate(t, bs[0].KV(), bs[1].KV(), bs[2].KV())
}

func TestReplicasAdmit(t *testing.T) {
	bs := replicas(t, 3)
	statetest.RaceAdmit(t, func(i int) state.AdmitRequest {
		// Each replica's clock is off by minutes: the server's clock
		// decides.
		skew := time.Duration(i%3-1) * 5 * time.Minute
		return state.AdmitRequest{Keys: []string{"global", fmt.Sprintf("user%d", i%2)}, Limits: []int{10, 100},
			Window: time.Minute, Now: time.Now().Add(skew), Take: true}
	}, 10, bs[0].KV(), bs[1].KV(), bs[2].KV())
}

// TestReplicasArtifacts checks the quota is shared: what one replica
// stores, another reads, and the accounting stays exact under concurrent
// Puts, evictions and Deletes from three replicas.
func TestReplicasArtifacts(t *testing.T) {
	srv := redistest.Start(t)
	prefix := freshPrefix()
	clk := artifactstest.NewClock()
	var stores []*Store
	for range 3 {
		b := open(t, srv, func(o *Options) {
			o.KeyPrefix = prefix
			o.Artifacts = artifacts.Options{MaxBytes: 6 << 20, Now: clk.Now}
		})
		stores = append(stores, b.art)
	}
	ctx := testCtx(t)
	var wg sync.WaitGroup
	var stored atomic.Int32
	for i := range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			size := 256<<10 + i // one script
			if i%2 == 1 {
				size = 1<<20 + i // reserved, written in chunks, committed
			}
			want := artifactstest.Content(uint64(i), size)
			m, err := stores[i%3].Put(ctx, "alice", artifacts.PutInput{Data: want})
			if errors.Is(err, artifacts.ErrTooLarge) {
				return // reservations in flight held the rest of the quota
			}
			if err != nil {
				t.Error(err)
				return
			}
			stored.Add(1)
			got, err := stores[(i+1)%3].ReadAt(ctx, "alice", m.Handle, 0, 10)
			if err != nil && !errors.Is(err, artifacts.ErrNotFound) { // evicted meanwhile
				t.Error(err)
			} else if err == nil && string(got) != string(want[:10]) {
				t.Error("read another replica's artifact wrongly")
			}
			if i%4 == 0 {
				if err := stores[(i+2)%3].Delete(ctx, "alice", m.Handle); err != nil && !errors.Is(err, artifacts.ErrNotFound) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if stored.Load() < 24 { // every Put of one chunk, at least
		t.Fatalf("only %d of 48 Puts stored", stored.Load())
	}
	checkInvariants(t, stores[0], 6<<20)
}

// checkInvariants verifies, on a quiescent store, that the usage counter is
// the sum of the live artifacts' sizes, every artifact is indexed and has
// all its chunks, no reservation is left, and no chunk outlives its
// artifact by more than the grace period.
func checkInvariants(t *testing.T, s *Store, quota int64) {
	t.Helper()
	ctx := testCtx(t)
	rdb := s.c.rdb
	var sum int64
	chunks := map[string]bool{}
	metas, err := rdb.Keys(ctx, globEscape(s.prefix)+"m:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, mk := range metas {
		b, err := rdb.Get(ctx, mk).Bytes()
		if err != nil {
			t.Fatal(err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		sum += rec.Size
		r := strings.TrimPrefix(mk, s.prefix+"m:")
		if _, err := rdb.ZScore(ctx, s.keys[0], member(r, rec.Blob, rec.Size, rec.chunks())).Result(); err != nil {
			t.Errorf("artifact %s is not indexed: %v", r, err)
		}
		for i := range rec.chunks() {
			k := s.chunkKey(rec.Blob, i)
			chunks[k] = true
			if n, _ := rdb.Exists(ctx, k).Result(); n != 1 {
				t.Errorf("artifact %s lacks chunk %d", r, i)
			}
		}
	}
	if n, _ := rdb.ZCard(ctx, s.keys[0]).Result(); n != int64(len(metas)) {
		t.Errorf("%d indexed, %d artifacts", n, len(metas))
	}
	if n, _ := rdb.ZCard(ctx, s.keys[1]).Result(); n != 0 {
		t.Errorf("%d reservations left", n)
	}
	used, err := s.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if used != sum {
		t.Errorf("usage %d, artifacts sum to %d", used, sum)
	}
	if used > quota {
		t.Errorf("usage %d over the quota %d", used, quota)
	}
	all, err := rdb.Keys(ctx, globEscape(s.prefix)+"c:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range all {
		if chunks[k] {
			continue
		}
		if ttl, _ := rdb.PTTL(ctx, k).Result(); ttl < 0 || ttl > grace {
			t.Errorf("orphan chunk %s lives %v", k, ttl)
		}
	}
}

// TestAbandonedReservation checks that the bytes reserved by a Put whose
// replica died before committing are reclaimed after pendingTTL.
func TestAbandonedReservation(t *testing.T) {
	srv := redistest.Start(t)
	clk := artifactstest.NewClock()
	b := open(t, srv, func(o *Options) { o.Artifacts = artifacts.Options{MaxBytes: 1 << 20, Now: clk.Now} })
	s := b.art
	ctx := testCtx(t)
	now := clk.Now()
	pend := member("", "00ff", 1<<20, 1)
	if err := reserveScript.Run(ctx, s.c.rdb, s.keys, s.prefix, ms(now), 1<<20, s.maxBytes, pend,
		ms(now.Add(pendingTTL)), grace.Milliseconds(), reclaimBatch).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.c.rdb.Set(ctx, s.chunkKey("00ff", 0), "partial", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "alice", artifacts.PutInput{Data: []byte("x")}); !errors.Is(err, artifacts.ErrTooLarge) {
		t.Fatalf("Put while a reservation holds the quota = %v, want ErrTooLarge", err)
	}
	clk.Add(pendingTTL + time.Second)
	if _, err := s.Put(ctx, "alice", artifacts.PutInput{Data: []byte("x")}); err != nil {
		t.Fatalf("Put after the reservation expired: %v", err)
	}
	if used, _ := s.Usage(ctx); used != 1 {
		t.Fatalf("usage %d, want 1", used)
	}
	if n, _ := s.c.rdb.Exists(ctx, s.chunkKey("00ff", 0)).Result(); n != 0 {
		t.Fatal("the abandoned Put's chunk was not deleted")
	}
}

// TestCorruptChunk checks the stream's sha256 check and ReadAt's chunk
// checks.
func TestCorruptChunk(t *testing.T) {
	srv := redistest.Start(t)
	b := open(t, srv, nil)
	s := b.art
	ctx := testCtx(t)
	want := artifactstest.Content(1, 2<<20+5)
	m, err := s.Put(ctx, "alice", artifacts.PutInput{Data: want})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.get(ctx, "test", "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte{want[1<<20] ^ 1}, want[1<<20+1:2<<20]...)
	if err := s.c.rdb.Set(ctx, s.chunkKey(rec.Blob, 1), bad, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := artifactstest.ReadAll(ctx, s, "alice", m.Handle); !errors.Is(err, artifacts.ErrCorrupt) {
		t.Fatalf("stream of altered content = %v, want ErrCorrupt", err)
	}
	if err := s.c.rdb.Set(ctx, s.chunkKey(rec.Blob, 1), "short", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAt(ctx, "alice", m.Handle, 1<<20, 10); !errors.Is(err, artifacts.ErrCorrupt) {
		t.Fatalf("ReadAt of a short chunk = %v, want ErrCorrupt", err)
	}
	if err := s.c.rdb.Del(ctx, s.chunkKey(rec.Blob, 2)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadAt(ctx, "alice", m.Handle, 2<<20, 1); !errors.Is(err, artifacts.ErrCorrupt) {
		t.Fatalf("ReadAt of a missing chunk = %v, want ErrCorrupt", err)
	}
	// Chunks before the damage still read.
	if got, err := s.ReadAt(ctx, "alice", m.Handle, 0, 10); err != nil || string(got) != string(want[:10]) {
		t.Fatalf("ReadAt of an intact chunk: %v", err)
	}
}

// TestStreamSurvivesDelete checks the grace period of deleted content.
func TestStreamSurvivesDelete(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, nil).art
	ctx := testCtx(t)
	want := artifactstest.Content(2, 3<<20)
	m, err := s.Put(ctx, "alice", artifacts.PutInput{Data: want})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := s.Open(ctx, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	first := make([]byte, 10)
	if _, err := rc.Read(first); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "alice", m.Handle); err != nil {
		t.Fatal(err)
	}
	if used, _ := s.Usage(ctx); used != 0 {
		t.Fatalf("usage %d after Delete", used)
	}
	buf := make([]byte, 0, len(want))
	buf = append(buf, first...)
	for {
		p := make([]byte, 64<<10)
		n, err := rc.Read(p)
		buf = append(buf, p[:n]...)
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("stream after Delete: %v", err)
			}
			break
		}
	}
	if string(buf) != string(want) {
		t.Fatal("stream after Delete read wrong content")
	}
}

// TestKeyPrefix checks every key carries the prefix, glob metacharacters in
// it match only themselves, and windows do not show up in Scan.
func TestKeyPrefix(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	a := open(t, srv, func(o *Options) { o.KeyPrefix = "q*[a]?\\:" })
	b := open(t, srv, func(o *Options) { o.KeyPrefix = "qx[a]y\\:" })
	for _, be := range []*Backend{a, b} {
		if err := be.KV().Set(ctx, "p/1", []byte(be.conn.prefix), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := be.KV().Admit(ctx, state.AdmitRequest{Keys: []string{"p/w"}, Limits: []int{5}, Window: time.Minute, Take: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := be.Artifacts().Put(ctx, "alice", artifacts.PutInput{Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for _, be := range []*Backend{a, b} {
		es, err := be.KV().Scan(ctx, "p", 100)
		if err != nil || len(es) != 1 || es[0].Key != "p/1" || string(es[0].Value) != be.conn.prefix {
			t.Fatalf("Scan under %q = %v, %v", be.conn.prefix, es, err)
		}
		if _, err := be.KV().Get(ctx, "p/w"); err == nil || errors.Is(err, state.ErrUnavailable) {
			t.Fatalf("Get of a window = %v, want a wrong-type error", err)
		}
	}
	keys, err := a.conn.rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, a.conn.prefix) && !strings.HasPrefix(k, b.conn.prefix) {
			t.Errorf("key %q has neither prefix", k)
		}
	}
	// The default prefix.
	d := open(t, srv, func(o *Options) { o.KeyPrefix = "" })
	if d.conn.prefix != DefaultKeyPrefix {
		t.Fatalf("default prefix %q", d.conn.prefix)
	}
}

// redisError makes a server error reply, as the client returns them.
func redisError(msg string) error {
	v := reflect.New(reflect.TypeOf(redis.ErrNoScript)).Elem()
	v.SetString(msg)
	return v.Interface().(error)
}

func TestMapErr(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		name string
		ctx  context.Context
		err  error
		want error
	}{
		{"loading", live, redisError("LOADING Redis is loading the dataset in memory"), state.ErrUnavailable},
		{"oom", live, redisError("OOM command not allowed when used memory > 'maxmemory'."), state.ErrTooLarge},
		{"readonly", live, redisError("READONLY You can't write against a read only replica."), state.ErrUnavailable},
		{"busy script", live, redisError("BUSY Redis is busy running a script."), state.ErrUnavailable},
		{"auth changed", live, redisError("NOAUTH Authentication required."), state.ErrUnavailable},
		{"closed", live, redis.ErrClosed, state.ErrClosed},
		{"pool timeout", live, redis.ErrPoolTimeout, state.ErrUnavailable},
		{"eof (restarted mid-call)", live, fmt.Errorf("read: %w", errors.New("EOF")), state.ErrUnavailable},
		{"refused", live, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}, state.ErrUnavailable},
		{"client deadline", live, fmt.Errorf("dial: %w", context.DeadlineExceeded), state.ErrUnavailable},
		{"cancelled", cancelled, errors.New("anything"), context.Canceled},
	}
	for _, tc := range cases {
		got := mapErr(tc.ctx, "op", tc.err)
		if !errors.Is(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		if tc.want != context.Canceled && (errors.Is(got, context.Canceled) || errors.Is(got, context.DeadlineExceeded)) {
			t.Errorf("%s: %v looks like the caller's context ended", tc.name, got)
		}
	}
	wrongType := mapErr(live, "get", redisError("WRONGTYPE Operation against a key holding the wrong kind of value"))
	for _, s := range []error{state.ErrUnavailable, state.ErrTooLarge, state.ErrClosed, state.ErrNotFound} {
		if errors.Is(wrongType, s) {
			t.Errorf("WRONGTYPE maps to %v", s)
		}
	}
	if mapErr(live, "op", nil) != nil {
		t.Error("nil maps to an error")
	}
}

func second[T any](_ T, err error) error { return err }

// TestMain silences the client's own logger (dial failures are expected
// here).
func TestMain(m *testing.M) {
	DiscardDriverLogs()
	os.Exit(m.Run())
}

// TestFailedPutsLeaveNothing checks that Puts failing after their
// reservation (a short or failing body, a context cancelled mid-write) give
// the reservation back and leave no chunk behind.
func TestFailedPutsLeaveNothing(t *testing.T) {
	srv := redistest.Start(t)
	s := open(t, srv, func(o *Options) { o.Artifacts = artifacts.Options{MaxBytes: 8 << 20} }).art
	ctx := testCtx(t)
	keep, err := s.Put(ctx, "alice", artifacts.PutInput{Data: []byte("keep")})
	if err != nil {
		t.Fatal(err)
	}
	big := artifactstest.Content(3, 5<<20)
	if _, err := s.Put(ctx, "alice", artifacts.PutInput{Body: bytes.NewReader(big[:4<<20]), Size: 5 << 20}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("short body: %v", err)
	}
	if _, err := s.Put(ctx, "alice", artifacts.PutInput{Body: io.MultiReader(bytes.NewReader(big[:2<<20]), iotest.ErrReader(io.ErrUnexpectedEOF)), Size: 5 << 20}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("failing body: %v", err)
	}
	c, cancel := context.WithCancel(ctx)
	body := &cancelAfter{r: bytes.NewReader(big), n: 3 << 20, cancel: cancel}
	if _, err := s.Put(c, "alice", artifacts.PutInput{Body: body, Size: 5 << 20}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled mid-write: %v", err)
	}
	checkInvariants(t, s, 8<<20)
	if n, _ := s.c.rdb.Keys(ctx, globEscape(s.prefix)+"c:*").Result(); len(n) != 1 {
		t.Fatalf("%d chunk keys, want the one of the kept artifact", len(n))
	}
	if used, _ := s.Usage(ctx); used != 4 {
		t.Fatalf("usage %d, want 4", used)
	}
	if _, err := s.Stat(ctx, "alice", keep.Handle); err != nil {
		t.Fatal(err)
	}
}

// cancelAfter cancels a context once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	if c.n -= k; c.n <= 0 {
		c.cancel()
	}
	return k, err
}

// TestOpenWarnings checks Open's warnings about a server that may lose
// state.
func TestOpenWarnings(t *testing.T) {
	srv := redistest.Start(t)
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	b := open(t, srv, func(o *Options) { o.Logger = log })
	if err := b.conn.rdb.ConfigSet(testCtx(t), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	open(t, srv, func(o *Options) { o.Logger = log })
	mu.Lock()
	defer mu.Unlock()
	out := buf.String()
	if !strings.Contains(out, "no append-only file") || !strings.Contains(out, "maxmemory_policy=allkeys-lru") {
		t.Fatalf("warnings:\n%s", out)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestOpenRestrictedUser opens the backend as an ACL user that may run the
// commands it needs but not INFO.
func TestOpenRestrictedUser(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testCtx(t)
	admin := open(t, srv, nil)
	if err := admin.conn.rdb.Do(ctx, "ACL", "SETUSER", "quiver", "on", ">pw-quiver", "~*", "+@all", "-info").Err(); err != nil {
		t.Fatal(err)
	}
	u := strings.Replace(srv.URL(), "redis://", "redis://quiver@", 1)
	b, err := Open(ctx, Options{URL: u, Password: "pw-quiver", KeyPrefix: freshPrefix()})
	if err != nil {
		t.Fatalf("Open as a user without INFO: %v", err)
	}
	defer b.Close()
	if ok, err := b.KV().Create(ctx, "k", []byte("v"), time.Minute); err != nil || !ok {
		t.Fatalf("Create = %v, %v", ok, err)
	}
	if _, err := b.Artifacts().Put(ctx, "alice", artifacts.PutInput{Data: []byte("x")}); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := Open(ctx, Options{URL: u, Password: "wrong"}); !errors.Is(err, state.ErrInvalid) || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("Open as the user with a wrong password = %v", err)
	}
}

// TestTLS opens the backend over TLS: with the server's CA (the server name
// defaults to the URL's host), and without it (a one-line error).
func TestTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.WithTLS())
	ctx := testCtx(t)
	b, err := Open(ctx, Options{URL: srv.URL(), TLS: &tls.Config{RootCAs: srv.CertPool(), MinVersion: tls.VersionTLS12}, KeyPrefix: freshPrefix()})
	if err != nil {
		t.Fatalf("Open over TLS: %v", err)
	}
	defer b.Close()
	if err := b.KV().Set(ctx, "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Artifacts().Put(ctx, "alice", artifacts.PutInput{Data: artifactstest.Content(1, 2<<20)}); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, Options{URL: srv.URL()}) // the system roots do not know the server
	checkOneLine(t, err, "")
	if !errors.Is(err, state.ErrInvalid) || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Open with an unknown certificate = %v", err)
	}
	t.Log(err)
	_, err = Open(ctx, Options{URL: strings.Replace(srv.URL(), "rediss://", "redis://", 1)})
	checkOneLine(t, err, "")
	if !errors.Is(err, state.ErrUnavailable) || !strings.Contains(err.Error(), "rediss://") {
		t.Fatalf("Open in plain text against TLS = %v", err)
	}
	t.Log(err)
}
