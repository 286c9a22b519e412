package state_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

func tctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// open opens an embedded backend on dir and closes it at the end of the
// test.
func open(t testing.TB, dir string) state.Backend {
	t.Helper()
	b, err := state.OpenEmbedded(tctx(t), state.EmbeddedOptions{Dir: dir, Artifacts: artifacts.Options{SweepInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// pair opens an owner and a client on one fresh directory.
func pair(t testing.TB) (owner, client state.Backend) {
	t.Helper()
	dir := t.TempDir()
	owner = open(t, dir)
	client = open(t, dir)
	if !state.IsOwner(owner) || state.IsOwner(client) {
		t.Fatalf("roles: first owner=%v, second owner=%v; want the first only", state.IsOwner(owner), state.IsOwner(client))
	}
	return owner, client
}

func TestBadgerKV(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.KV {
		kv, err := state.OpenBadgerKV(state.BadgerOptions{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		return kv
	})
}

func TestEmbeddedOwner(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.KV {
		b := open(t, t.TempDir())
		if b.Name() != "embedded" || !state.IsOwner(b) {
			t.Fatalf("name %q, owner %v", b.Name(), state.IsOwner(b))
		}
		return b.KV()
	})
}

func TestEmbeddedClient(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.KV {
		_, client := pair(t)
		return client.KV()
	})
}

// TestSharedState: what one process writes, the other reads, both ways.
func TestSharedState(t *testing.T) {
	owner, client := pair(t)
	c := tctx(t)
	if ok, err := client.KV().Create(c, "idem/1", []byte("reserved"), time.Minute); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := owner.KV().Create(c, "idem/1", []byte("again"), time.Minute); ok || err != nil {
		t.Fatalf("owner Create after client = %v, %v", ok, err)
	}
	if err := owner.KV().Set(c, "kill/rule", []byte("deny"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := client.KV().Get(c, "kill/rule"); string(v) != "deny" || err != nil {
		t.Fatalf("client Get = %q, %v", v, err)
	}
}

// TestLargeValues: the largest values cross the socket (a Swap carries
// two of them).
func TestLargeValues(t *testing.T) {
	_, client := pair(t)
	c := tctx(t)
	a := bytes.Repeat([]byte{'a'}, state.MaxValueBytes)
	b := bytes.Repeat([]byte{'b'}, state.MaxValueBytes)
	if err := client.KV().Set(c, "big", a, 0); err != nil {
		t.Fatal(err)
	}
	if ok, err := client.KV().Swap(c, "big", a, b, 0); !ok || err != nil {
		t.Fatalf("Swap = %v, %v", ok, err)
	}
	if v, err := client.KV().Get(c, "big"); err != nil || !bytes.Equal(v, b) {
		t.Fatalf("Get = %d bytes, %v", len(v), err)
	}
}

// TestCloseUnderLoad: calls in flight while the owner closes gracefully
// all succeed, on the old owner or after the takeover, each counted once.
func TestCloseUnderLoad(t *testing.T) {
	dir := t.TempDir()
	c := tctx(t)
	owner := open(t, dir)
	client := open(t, dir)
	var ok, unavailable atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := client.KV().Admit(c, state.AdmitRequest{Keys: []string{"w"}, Limits: []int{1 << 20}, Window: time.Hour, Now: time.Now(), Take: true})
				switch {
				case err == nil && r.Denied == -1:
					ok.Add(1)
				case errors.Is(err, state.ErrUnavailable):
					unavailable.Add(1)
				default:
					t.Error(r, err)
					return
				}
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	v, err := client.KV().Get(c, "w")
	if err != nil {
		t.Fatal(err)
	}
	// A graceful Close answers every request it read before the clients'
	// go-away acks: nothing is lost, nothing is counted twice.
	n := int64(len(state.DecodeWindow(v)))
	if n != ok.Load() || unavailable.Load() != 0 {
		t.Fatalf("window holds %d calls; %d succeeded, %d unavailable", n, ok.Load(), unavailable.Load())
	}
	if !state.IsOwner(client) {
		t.Fatal("no takeover")
	}
	t.Logf("%d admitted, %d unavailable across the owner's Close", ok.Load(), unavailable.Load())
}

// TestScanPages: a client scan larger than one answer is read in pages.
func TestScanPages(t *testing.T) {
	owner, client := pair(t)
	c := tctx(t)
	big := bytes.Repeat([]byte{'v'}, 6<<20)
	for _, k := range []string{"p/a", "p/b", "p/c", "p/d"} {
		if err := owner.KV().Set(c, k, big, 0); err != nil {
			t.Fatal(err)
		}
	}
	es, err := client.KV().Scan(c, "p/", 10)
	if err != nil || len(es) != 4 || es[3].Key != "p/d" || len(es[2].Value) != len(big) {
		t.Fatalf("Scan = %d entries, %v", len(es), err)
	}
	if es, err := client.KV().Scan(c, "p/", 3); err != nil || len(es) != 3 {
		t.Fatalf("Scan limit 3 = %d, %v", len(es), err)
	}
}

func TestClientArtifacts(t *testing.T) {
	owner, client := pair(t)
	c := tctx(t)
	art := client.Artifacts()
	content := []byte(`{"rows":[1,2,3]}`)
	m, err := art.Put(c, "alice", artifacts.PutInput{MediaType: "application/json", Label: "rows", Data: content})
	if err != nil {
		t.Fatal(err)
	}
	if m.SizeBytes != int64(len(content)) || m.MediaType != "application/json" || m.Label != "rows" || m.ContentHash == "" {
		t.Fatalf("meta = %+v", m)
	}
	// Owner and client see the same artifact.
	for _, s := range []artifacts.Store{art, owner.Artifacts()} {
		got, err := s.Stat(c, "alice", m.Handle)
		if err != nil || got.Handle != m.Handle || got.ContentHash != m.ContentHash || !got.CreatedAt.Equal(m.CreatedAt) {
			t.Fatalf("Stat = %+v, %v", got, err)
		}
	}
	// Owner isolation.
	if _, err := art.Stat(c, "bob", m.Handle); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("Stat by another owner = %v", err)
	}
	if _, err := art.ReadAt(c, "bob", m.Handle, 0, 10); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("ReadAt by another owner = %v", err)
	}
	// ReadAt bounds.
	reads := []struct {
		off, n int64
		want   string
		err    error
	}{
		{0, 4, `{"ro`, nil},
		{10, 100, content2(content, 10), nil},
		{int64(len(content)), 5, "", nil},
		{int64(len(content)) + 1, 5, "", artifacts.ErrOutOfRange},
		{-1, 5, "", artifacts.ErrInvalid},
		{0, artifacts.MaxReadBytes + 1, "", artifacts.ErrInvalid},
	}
	for _, r := range reads {
		got, err := art.ReadAt(c, "alice", m.Handle, r.off, r.n)
		if r.err != nil {
			if !errors.Is(err, r.err) {
				t.Errorf("ReadAt(%d, %d) = %v, want %v", r.off, r.n, err, r.err)
			}
			continue
		}
		if err != nil || string(got) != r.want {
			t.Errorf("ReadAt(%d, %d) = %q, %v; want %q", r.off, r.n, got, err, r.want)
		}
	}
	// Open streams and verifies.
	rc, err := art.Open(c, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("Open read = %q, %v", got, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := art.Open(c, "bob", m.Handle); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("Open by another owner = %v", err)
	}
	// Bad input keeps its identity across the socket.
	if _, err := art.Put(c, "", artifacts.PutInput{Data: content}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("Put with no owner = %v", err)
	}
	if _, err := art.Put(c, "alice", artifacts.PutInput{Body: strings.NewReader("short"), Size: 10}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("Put with a short body = %v", err)
	}
	if _, err := art.Put(c, "alice", artifacts.PutInput{Body: strings.NewReader("longer than 3"), Size: 3}); !errors.Is(err, artifacts.ErrInvalid) {
		t.Fatalf("Put with a long body = %v", err)
	}
	if _, err := art.Stat(c, "alice", "art_bogus"); !errors.Is(err, artifacts.ErrInvalid) && !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("Stat bogus handle = %v", err)
	}
	// Delete.
	if err := art.Delete(c, "alice", m.Handle); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Artifacts().Stat(c, "alice", m.Handle); !errors.Is(err, artifacts.ErrNotFound) {
		t.Fatalf("Stat after Delete = %v", err)
	}
}

func content2(b []byte, off int) string { return string(b[off:]) }

// TestClientLargePut streams several MiB through the client in chunks.
func TestClientLargePut(t *testing.T) {
	owner, client := pair(t)
	c := tctx(t)
	data := make([]byte, 9<<20+123)
	rand.Read(data)
	m, err := client.Artifacts().Put(c, "alice", artifacts.PutInput{Body: bytes.NewReader(data), Size: int64(len(data))})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := owner.Artifacts().Open(c, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	rc, err = client.Artifacts().Open(c, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("client read back %d bytes, %v", len(got), err)
	}
	part, err := client.Artifacts().ReadAt(c, "alice", m.Handle, 5<<20, artifacts.MaxReadBytes)
	if err != nil || !bytes.Equal(part, data[5<<20:5<<20+artifacts.MaxReadBytes]) {
		t.Fatalf("ReadAt = %d bytes, %v", len(part), err)
	}
	// A body over the quota is refused before it is sent whole.
	small := t.TempDir()
	o2, err := state.OpenEmbedded(c, state.EmbeddedOptions{Dir: small, Artifacts: artifacts.Options{MaxBytes: 1 << 20, SweepInterval: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer o2.Close()
	c2 := open(t, small)
	if _, err := c2.Artifacts().Put(c, "alice", artifacts.PutInput{Body: bytes.NewReader(data), Size: int64(len(data))}); !errors.Is(err, artifacts.ErrTooLarge) {
		t.Fatalf("Put over quota = %v", err)
	}
}

// TestTakeover: when the owner closes, a client's next call makes it the
// owner, and it finds what the old owner stored.
func TestTakeover(t *testing.T) {
	dir := t.TempDir()
	c := tctx(t)
	first := open(t, dir)
	second := open(t, dir)
	third := open(t, dir)
	if err := first.KV().Set(c, "k", []byte("from the first owner"), 0); err != nil {
		t.Fatal(err)
	}
	m, err := second.Artifacts().Put(c, "alice", artifacts.PutInput{Data: []byte("artifact")})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.KV().Get(c, "k"); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	if _, err := first.Artifacts().Stat(c, "alice", m.Handle); !errors.Is(err, artifacts.ErrClosed) {
		t.Fatalf("Stat after Close = %v", err)
	}
	v, err := second.KV().Get(c, "k")
	if err != nil || string(v) != "from the first owner" {
		t.Fatalf("Get after takeover = %q, %v", v, err)
	}
	if !state.IsOwner(second) {
		t.Fatal("the client that called first did not become the owner")
	}
	// The third redials the new owner.
	if got, err := third.Artifacts().Stat(c, "alice", m.Handle); err != nil || got.Handle != m.Handle {
		t.Fatalf("third Stat = %+v, %v", got, err)
	}
	if state.IsOwner(third) {
		t.Fatal("two owners")
	}
	if ok, err := third.KV().Create(c, "k", []byte("x"), 0); ok || err != nil {
		t.Fatalf("Create on the new owner = %v, %v", ok, err)
	}
}

// TestInFlight: a request the owner ran but never answered (it crashed)
// fails with ErrUnavailable and is not run again by the takeover.
func TestInFlight(t *testing.T) {
	dir := t.TempDir()
	c := tctx(t)
	owner := open(t, dir)
	client := open(t, dir)
	ran := make(chan struct{})
	release := make(chan struct{})
	state.SetHook(owner, func(op byte) {
		if op == state.OpCreate {
			close(ran)
			<-release
		}
	})
	req := state.AdmitRequest{Keys: []string{"w"}, Limits: []int{1}, Window: time.Minute, Now: time.Now(), Take: true}
	errc := make(chan error, 1)
	go func() {
		_, err := client.KV().Create(c, "once", []byte("v"), 0)
		errc <- err
	}()
	<-ran
	crashed := make(chan struct{})
	go func() { state.Crash(owner); close(crashed) }()
	err := <-errc
	close(release)
	<-crashed
	if !errors.Is(err, state.ErrUnavailable) {
		t.Fatalf("in-flight Create = %v, want ErrUnavailable", err)
	}
	// The next call takes over; the Create was applied once, not twice.
	if ok, err := client.KV().Create(c, "once", []byte("again"), 0); ok || err != nil {
		t.Fatalf("Create after takeover = %v, %v (want false: the first one was applied)", ok, err)
	}
	if !state.IsOwner(client) {
		t.Fatal("client did not take over")
	}
	if r, err := client.KV().Admit(c, req); err != nil || r.Denied != -1 {
		t.Fatalf("Admit = %+v, %v", r, err)
	}
}

// TestWaitForOwner: with nobody able to serve, a call waits as long as its
// ctx allows and fails with ErrUnavailable.
func TestWaitForOwner(t *testing.T) {
	dir := t.TempDir()
	owner := open(t, dir)
	client := open(t, dir)
	state.SetHook(owner, func(byte) { time.Sleep(300 * time.Millisecond) })
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := client.KV().Get(c, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get past its deadline = %v", err)
	}
	// A client Close while another owner serves.
	if err := client.Close(); err != nil {
		t.Fatal(err)
	}
	if err := client.KV().Set(tctx(t), "k", nil, 0); !errors.Is(err, state.ErrClosed) {
		t.Fatalf("Set after Close = %v", err)
	}
}

// TestNoGoroutineLeak: opening, using and closing owners and clients
// leaves no goroutine behind.
func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	func() {
		dir := t.TempDir()
		c := tctx(t)
		a, err := state.OpenEmbedded(c, state.EmbeddedOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		b, err := state.OpenEmbedded(c, state.EmbeddedOptions{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		_ = b.KV().Set(c, "k", []byte("v"), 0)
		m, _ := b.Artifacts().Put(c, "o", artifacts.PutInput{Data: []byte("x")})
		rc, err := b.Artifacts().Open(c, "o", m.Handle)
		if err == nil {
			io.ReadAll(rc)
		}
		a.Close()
		_, _ = b.KV().Get(c, "k") // takes over
		rc.Close()
		b.Close()
	}()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLongDir: a state dir too deep for a socket path uses a private
// directory under TMPDIR.
func TestLongDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	owner := open(t, dir)
	client := open(t, dir)
	if state.IsOwner(client) {
		t.Fatal("two owners")
	}
	if err := client.KV().Set(tctx(t), "k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	if v, err := owner.KV().Get(tctx(t), "k"); string(v) != "v" || err != nil {
		t.Fatal(v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.sock")); err == nil {
		t.Fatal("socket in the too-deep dir")
	}
}

func BenchmarkEmbedded(b *testing.B) {
	owner, client := pair(b)
	for _, s := range []struct {
		name string
		b    state.Backend
	}{{"owner", owner}, {"client", client}} {
		kv := s.b.KV()
		c := context.Background()
		_ = kv.Set(c, "bench/get", []byte("a small value, like an idempotency record"), 0)
		b.Run(s.name+"/Get", func(b *testing.B) {
			for b.Loop() {
				if _, err := kv.Get(c, "bench/get"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.name+"/Create", func(b *testing.B) {
			run := strconv.FormatInt(time.Now().UnixNano(), 36)
			i := 0
			for b.Loop() {
				i++
				key := s.name + "/create/" + run + "/" + strconv.Itoa(i)
				if ok, err := kv.Create(c, key, []byte("v"), time.Minute); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
