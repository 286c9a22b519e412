package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/quiver-mcp/quiver/artifacts"
)

// EmbeddedOptions configures OpenEmbedded.
type EmbeddedOptions struct {
	// Dir is the state directory's "state" subdirectory; created 0700.
	// Required.
	Dir string
	// Artifacts configures the artifact store (TTL, MaxBytes, Logger...);
	// its Dir is set to Dir/artifacts.
	Artifacts artifacts.Options
	// Logger receives the backend's and Badger's warnings and errors.
	// Discarded when nil.
	Logger *slog.Logger
}

// Backoff of a call waiting for an owner to appear.
const (
	minBackoff = 2 * time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// sunPathMax is the usable length of a unix socket path on Linux (108
// bytes with the terminating NUL).
const sunPathMax = 107

// OpenEmbedded opens the embedded backend in o.Dir, shared by every quiver
// process of the machine that uses the same directory.
//
// One process, the owner, holds an exclusive flock on Dir/owner.lock, opens
// the Badger KV (Dir/kv) and artifact store (Dir/artifacts), and serves
// them to the others on a unix socket (Dir/state.sock, 0600, same uid
// only). The others are clients and reach the stores over the socket. When
// the owner goes away (Close, crash, kill -9) a client's next call that was
// not yet sent runs the election again: the winner opens the stores and
// serves, the rest reconnect. A call that was sent when the connection
// broke is not repeated (it may have been applied) and fails with an error
// matching ErrUnavailable. The Backend returned is stable across these
// changes. A call whose ctx ends while it waits for the owner's answer
// returns ctx's error; like with any remote store, the owner may still
// apply it. A graceful Close of the owner loses no call: it tells the
// clients to go away, answers everything they sent before acknowledging,
// and the calls they had not sent run on the next owner. ctx bounds the
// wait for an owner at open.
func OpenEmbedded(ctx context.Context, o EmbeddedOptions) (Backend, error) {
	if o.Dir == "" {
		return nil, errInvalid("embedded: Dir is required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: create state dir: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Artifacts.Logger == nil {
		o.Artifacts.Logger = o.Logger
	}
	o.Artifacts.Dir, o.Artifacts.InMemory = filepath.Join(dir, "artifacts"), false
	uid := os.Getuid()
	sock, err := socketPath(dir, uid)
	if err != nil {
		return nil, err
	}
	e := &embedded{
		o:     o,
		dir:   dir,
		sock:  sock,
		lock:  filepath.Join(dir, "owner.lock"),
		uid:   uid,
		log:   o.Logger,
		elect: make(chan struct{}, 1),
	}
	if _, _, err := e.route(ctx); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// socketPath returns Dir/state.sock, or when that is longer than a unix
// socket path may be, a path in a private directory under os.TempDir()
// named from a hash of dir and uid (every process on the same dir finds
// the same one). The directory must be ours and 0700.
func socketPath(dir string, uid int) (string, error) {
	p := filepath.Join(dir, "state.sock")
	if len(p) <= sunPathMax {
		return p, nil
	}
	sum := sha256.Sum256([]byte(strconv.Itoa(uid) + "\x00" + dir))
	d := filepath.Join(os.TempDir(), "quiver-state-"+hex.EncodeToString(sum[:12]))
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("state: socket dir: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(d, &st); err != nil {
		return "", fmt.Errorf("state: socket dir: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != uid || st.Mode&0o077 != 0 {
		return "", fmt.Errorf("state: socket dir %s is not a private directory of uid %d", d, uid)
	}
	p = filepath.Join(d, "state.sock")
	if len(p) > sunPathMax {
		return "", fmt.Errorf("state: socket path %s too long (TMPDIR too deep)", p)
	}
	return p, nil
}

// peerAllowed decides whether a peer running as uid may talk to a
// process running as self: only the same user may.
func peerAllowed(uid uint32, self int) error {
	if int64(uid) != int64(self) {
		return fmt.Errorf("state: peer runs as uid %d, not %d", uid, self)
	}
	return nil
}

// checkPeer reads the peer's credentials (SO_PEERCRED) and applies
// peerAllowed.
func checkPeer(c *net.UnixConn, self int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("state: peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("state: peer credentials: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("state: peer credentials: %w", cerr)
	}
	return peerAllowed(cred.Uid, self)
}

// embedded is the backend OpenEmbedded returns. It is the owner (own set)
// or a client (cc set, possibly broken) and changes role on takeover.
type embedded struct {
	o    EmbeddedOptions
	dir  string
	sock string
	lock string
	uid  int
	log  *slog.Logger

	// hook is passed to the server of an owner (tests).
	hook atomic.Pointer[func(op byte)]

	// elect serialises elections and dials (a channel, so waiting honours
	// ctx).
	elect chan struct{}

	mu     sync.Mutex
	closed bool
	own    *owner
	cc     *clientConn
	// draining are connections to an owner that is closing, kept until it
	// has answered the requests in flight on them.
	draining []*clientConn

	kvClosed, artClosed atomic.Bool
}

// owner is what the owner holds: the lock, the stores and the server.
type owner struct {
	lockf *os.File
	kv    *BadgerKV
	art   *artifacts.BadgerStore
	srv   *server
}

func (o *owner) close() error {
	o.srv.close()
	err := o.kv.Close()
	if aerr := o.art.Close(); err == nil {
		err = aerr
	}
	unix.Flock(int(o.lockf.Fd()), unix.LOCK_UN)
	o.lockf.Close()
	return err
}

// kill is a crash of the owner (tests): connections break unanswered.
func (o *owner) kill() {
	o.srv.kill()
	o.kv.Close()
	o.art.Close()
	o.lockf.Close()
}

// Name implements Backend.
func (e *embedded) Name() string { return "embedded" }

// KV implements Backend.
func (e *embedded) KV() KV { return (*embeddedKV)(e) }

// Artifacts implements Backend.
func (e *embedded) Artifacts() artifacts.Store { return (*embeddedArtifacts)(e) }

// Close implements Backend: an owner stops serving (requests in flight
// finish or fail cleanly), closes its stores and releases the lock; a
// client closes its connection.
func (e *embedded) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	own, cc, draining := e.own, e.cc, e.draining
	e.own, e.cc, e.draining = nil, nil, nil
	e.mu.Unlock()
	for _, d := range draining {
		d.close()
	}
	// Wait for an election under way: it sees closed and undoes itself.
	e.elect <- struct{}{}
	<-e.elect
	if cc != nil {
		cc.close()
	}
	if own != nil {
		return own.close()
	}
	return nil
}

// isOwner reports whether this process is the owner now.
func (e *embedded) isOwner() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.own != nil
}

// current returns the owner or a live connection, if there is one.
func (e *embedded) current() (*owner, *clientConn, bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, false, ErrClosed
	}
	if e.own != nil {
		return e.own, nil, true, nil
	}
	if e.cc != nil && e.cc.alive() {
		return nil, e.cc, true, nil
	}
	return nil, nil, false, nil
}

// route returns this process's stores when it owns them, or a connection
// to the owner, running the election and dialling (with backoff, as long
// as ctx allows) when there is neither.
func (e *embedded) route(ctx context.Context) (*owner, *clientConn, error) {
	if own, cc, ok, err := e.current(); ok || err != nil {
		return own, cc, err
	}
	select {
	case e.elect <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, unavailable(ctx.Err())
	}
	defer func() { <-e.elect }()
	backoff := minBackoff
	for {
		own, cc, ok, err := e.current()
		if ok || err != nil {
			return own, cc, err
		}
		if own, err = e.tryOwn(); err != nil {
			return nil, nil, err
		}
		if own != nil {
			e.mu.Lock()
			if e.closed {
				e.mu.Unlock()
				own.close()
				return nil, nil, ErrClosed
			}
			old := e.cc
			e.own, e.cc = own, nil
			e.mu.Unlock()
			e.retire(old)
			e.log.Info("state: this process now owns the embedded store", "dir", e.dir)
			return own, nil, nil
		}
		cc, err = dialOwner(ctx, e.sock, e.uid)
		if err == nil {
			e.mu.Lock()
			if e.closed {
				e.mu.Unlock()
				cc.close()
				return nil, nil, ErrClosed
			}
			old := e.cc
			e.cc = cc
			e.mu.Unlock()
			e.retire(old)
			return nil, cc, nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, unavailable(fmt.Errorf("no owner reachable (%v): %w", err, ctx.Err()))
		case <-t.C:
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func unavailable(err error) error {
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// tryOwn takes the owner lock if it is free and then opens the stores and
// serves them. It returns nil, nil when another process owns them.
func (e *embedded) tryOwn() (*owner, error) {
	f, err := os.OpenFile(e.lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state: owner lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("state: owner lock: %w", err)
	}
	fail := func(err error) (*owner, error) {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
		return nil, err
	}
	kv, err := OpenBadgerKV(BadgerOptions{Dir: filepath.Join(e.dir, "kv"), Logger: e.log})
	if err != nil {
		return fail(err)
	}
	art, err := artifacts.OpenBadger(e.o.Artifacts)
	if err != nil {
		kv.Close()
		return fail(fmt.Errorf("state: open artifacts: %w", err))
	}
	// The lock is ours, so a socket file left here is a dead owner's.
	if err := os.Remove(e.sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		kv.Close()
		art.Close()
		return fail(fmt.Errorf("state: remove stale socket: %w", err))
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: e.sock, Net: "unix"})
	if err == nil {
		if err = os.Chmod(e.sock, 0o600); err != nil {
			ln.Close()
		}
	}
	if err != nil {
		kv.Close()
		art.Close()
		return fail(fmt.Errorf("state: listen: %w", err))
	}
	return &owner{lockf: f, kv: kv, art: art, srv: newServer(kv, art, ln, e.uid, e.log, &e.hook)}, nil
}

// drop forgets a connection that is broken or draining. A draining one
// still carries answers to requests in flight: it is kept (and closed by
// Close) until the owner closes it.
func (e *embedded) drop(cc *clientConn) {
	e.mu.Lock()
	if e.cc == cc {
		e.cc = nil
		if !cc.broken() {
			e.keepDraining(cc)
			cc = nil
		}
	} else {
		cc = nil
	}
	e.mu.Unlock()
	if cc != nil {
		cc.close()
	}
}

// retire puts aside the connection being replaced by route.
func (e *embedded) retire(old *clientConn) {
	if old == nil {
		return
	}
	e.mu.Lock()
	if old.broken() || e.closed {
		e.mu.Unlock()
		old.close()
		return
	}
	e.keepDraining(old)
	e.mu.Unlock()
}

// keepDraining adds cc to the draining connections and forgets those the
// owner has closed since. Called with mu held.
func (e *embedded) keepDraining(cc *clientConn) {
	kept := e.draining[:0]
	for _, d := range e.draining {
		if !d.broken() {
			kept = append(kept, d)
		}
	}
	e.draining = append(kept, cc)
}

// do runs one call: locally on the owner, or remotely, electing or
// redialling while the request has not been sent.
func (e *embedded) do(ctx context.Context, closedErr error, local func(*owner) error, remote func(*clientConn) error) error {
	for retry := false; ; retry = true {
		if err := ctx.Err(); err != nil {
			if retry {
				return unavailable(err) // the owner went away meanwhile
			}
			return err
		}
		own, cc, err := e.route(ctx)
		if errors.Is(err, ErrClosed) {
			return closedErr
		}
		if err != nil {
			return err
		}
		if own != nil {
			return local(own)
		}
		err = remote(cc)
		switch {
		case errors.Is(err, errNotSent):
			e.drop(cc)
			continue
		case errors.Is(err, errLost):
			e.drop(cc)
			if _, _, _, cerr := e.current(); cerr != nil {
				return closedErr
			}
			return unavailable(err)
		}
		return err
	}
}

// embeddedKV is the KV of an embedded backend.
type embeddedKV embedded

func (k *embeddedKV) e() *embedded { return (*embedded)(k) }

func (k *embeddedKV) do(ctx context.Context, local func(*BadgerKV) error, remote func(*clientConn) error) error {
	if k.kvClosed.Load() {
		return ErrClosed
	}
	return k.e().do(ctx, ErrClosed, func(o *owner) error { return local(o.kv) }, remote)
}

// Get implements KV.
func (k *embeddedKV) Get(ctx context.Context, key string) (v []byte, err error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	err = k.do(ctx,
		func(s *BadgerKV) (err error) { v, err = s.Get(ctx, key); return },
		func(c *clientConn) (err error) { v, err = c.get(ctx, key); return })
	return v, err
}

// Set implements KV.
func (k *embeddedKV) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := CheckWrite(key, val, ttl); err != nil {
		return err
	}
	return k.do(ctx,
		func(s *BadgerKV) error { return s.Set(ctx, key, val, ttl) },
		func(c *clientConn) error { return c.set(ctx, key, val, ttl) })
}

// Create implements KV.
func (k *embeddedKV) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (ok bool, err error) {
	if err := CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	err = k.do(ctx,
		func(s *BadgerKV) (err error) { ok, err = s.Create(ctx, key, val, ttl); return },
		func(c *clientConn) (err error) {
			ok, err = c.boolCall(ctx, opCreate, &kvRequest{key: key, val: val, ttl: ttl})
			return
		})
	return ok, err
}

// Swap implements KV.
func (k *embeddedKV) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (ok bool, err error) {
	if err := CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	if len(old) > MaxValueBytes {
		return false, nil // no stored value can equal it
	}
	err = k.do(ctx,
		func(s *BadgerKV) (err error) { ok, err = s.Swap(ctx, key, old, val, ttl); return },
		func(c *clientConn) (err error) {
			ok, err = c.boolCall(ctx, opSwap, &kvRequest{key: key, old: old, val: val, ttl: ttl})
			return
		})
	return ok, err
}

// Delete implements KV.
func (k *embeddedKV) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	return k.do(ctx,
		func(s *BadgerKV) error { return s.Delete(ctx, key) },
		func(c *clientConn) error { return c.del(ctx, key) })
}

// Scan implements KV. Through a client, a scan longer than one answer
// (scanBudget bytes of values) is read in pages, each a snapshot of its own.
func (k *embeddedKV) Scan(ctx context.Context, prefix string, limit int) (es []Entry, err error) {
	if err := CheckScan(prefix, limit); err != nil {
		return nil, err
	}
	err = k.do(ctx,
		func(s *BadgerKV) (err error) { es, err = s.Scan(ctx, prefix, limit); return },
		func(c *clientConn) (err error) { es, err = c.scan(ctx, prefix, limit); return })
	return es, err
}

// Admit implements KV.
func (k *embeddedKV) Admit(ctx context.Context, req AdmitRequest) (res AdmitResult, err error) {
	if err := CheckAdmit(req); err != nil {
		return AdmitResult{}, err
	}
	err = k.do(ctx,
		func(s *BadgerKV) (err error) { res, err = s.Admit(ctx, req); return },
		func(c *clientConn) (err error) { res, err = c.admit(ctx, req); return })
	return res, err
}

// Close implements KV: later KV calls return ErrClosed. The backend's
// resources are released by Backend.Close.
func (k *embeddedKV) Close() error {
	k.kvClosed.Store(true)
	return nil
}

// embeddedArtifacts is the artifact store of an embedded backend.
type embeddedArtifacts embedded

func (a *embeddedArtifacts) e() *embedded { return (*embedded)(a) }

func (a *embeddedArtifacts) do(ctx context.Context, local func(*artifacts.BadgerStore) error, remote func(*clientConn) error) error {
	if a.artClosed.Load() {
		return artifacts.ErrClosed
	}
	return a.e().do(ctx, artifacts.ErrClosed, func(o *owner) error { return local(o.art) }, remote)
}

// Put implements artifacts.Store. Through a client the body is streamed
// on a connection of its own.
func (a *embeddedArtifacts) Put(ctx context.Context, owner string, in artifacts.PutInput) (m artifacts.Meta, err error) {
	switch {
	case in.Body != nil && in.Data != nil:
		return m, fmt.Errorf("%w: set Data or Body, not both", artifacts.ErrInvalid)
	case in.Body != nil && in.Size < 0:
		return m, fmt.Errorf("%w: negative Size", artifacts.ErrInvalid)
	}
	err = a.do(ctx,
		func(s *artifacts.BadgerStore) (err error) { m, err = s.Put(ctx, owner, in); return },
		func(*clientConn) error {
			cc, err := dialOwner(ctx, a.sock, a.uid)
			if err != nil {
				return fmt.Errorf("%w: %w", errNotSent, err)
			}
			defer cc.close()
			m, err = cc.put(ctx, owner, in)
			return err
		})
	return m, err
}

// Stat implements artifacts.Store.
func (a *embeddedArtifacts) Stat(ctx context.Context, owner, handle string) (m artifacts.Meta, err error) {
	err = a.do(ctx,
		func(s *artifacts.BadgerStore) (err error) { m, err = s.Stat(ctx, owner, handle); return },
		func(c *clientConn) (err error) { m, err = c.stat(ctx, owner, handle); return })
	return m, err
}

// ReadAt implements artifacts.Store.
func (a *embeddedArtifacts) ReadAt(ctx context.Context, owner, handle string, off, n int64) (b []byte, err error) {
	err = a.do(ctx,
		func(s *artifacts.BadgerStore) (err error) { b, err = s.ReadAt(ctx, owner, handle, off, n); return },
		func(c *clientConn) (err error) { b, err = c.readAt(ctx, owner, handle, off, n); return })
	return b, err
}

// Open implements artifacts.Store. Through a client the stream is tied to
// the connection: if the owner goes away mid-stream, reads fail with an
// error matching ErrUnavailable.
func (a *embeddedArtifacts) Open(ctx context.Context, owner, handle string) (rc io.ReadCloser, err error) {
	err = a.do(ctx,
		func(s *artifacts.BadgerStore) (err error) { rc, err = s.Open(ctx, owner, handle); return },
		func(c *clientConn) error {
			r, err := c.open(ctx, owner, handle)
			if err == nil {
				rc = r
			}
			return err
		})
	return rc, err
}

// Delete implements artifacts.Store.
func (a *embeddedArtifacts) Delete(ctx context.Context, owner, handle string) error {
	return a.do(ctx,
		func(s *artifacts.BadgerStore) error { return s.Delete(ctx, owner, handle) },
		func(c *clientConn) error { return c.deleteArtifact(ctx, owner, handle) })
}

// Close implements artifacts.Store: later calls return ErrClosed. The
// backend's resources are released by Backend.Close.
func (a *embeddedArtifacts) Close() error {
	a.artClosed.Store(true)
	return nil
}
