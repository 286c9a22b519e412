package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

const (
	// connHandlers caps the requests one connection runs at once; the
	// connection's reader waits for a slot (backpressure).
	connHandlers = 64
	// closeGrace is how long a closing owner lets requests in flight finish
	// before it breaks the connections.
	closeGrace = 5 * time.Second
)

// server is the owner's side of the socket: it serves the owner's stores
// to the client processes. Goroutines: one accept loop, one reader per
// connection, one per request in flight; close ends them all.
type server struct {
	kv   *BadgerKV
	art  artifacts.Store
	ln   *net.UnixListener
	uid  int
	log  *slog.Logger
	hook *atomic.Pointer[func(op byte)] // tests: runs after a request ran, before its answer

	ctx    context.Context // handlers' base context, cancelled by close
	cancel context.CancelFunc

	mu       sync.Mutex
	closing  bool
	conns    map[*serverConn]struct{}
	handlers sync.WaitGroup // requests in flight (Add under mu)
	loops    sync.WaitGroup // accept loop and connection readers
}

func newServer(kv *BadgerKV, art artifacts.Store, ln *net.UnixListener, uid int, log *slog.Logger, hook *atomic.Pointer[func(byte)]) *server {
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{kv: kv, art: art, ln: ln, uid: uid, log: log, hook: hook, ctx: ctx, cancel: cancel, conns: map[*serverConn]struct{}{}}
	s.loops.Add(1)
	go s.accept()
	return s
}

func (s *server) accept() {
	defer s.loops.Done()
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Warn("state: accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err := checkPeer(c, s.uid); err != nil {
			s.log.Warn("state: refused a connection", "err", err)
			c.Close()
			continue
		}
		sc := &serverConn{s: s, c: c, puts: map[uint64]*io.PipeWriter{}, streams: map[uint64]*srvStream{}, sem: make(chan struct{}, connHandlers), acked: make(chan struct{})}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[sc] = struct{}{}
		s.loops.Add(1)
		s.mu.Unlock()
		go sc.read()
	}
}

// close stops serving: no new connections; every connection is told to
// go away, and until its client acknowledges (having written every
// request it started) requests are read and answered codeNotApplied;
// requests in flight finish and answer. After that, or closeGrace, every
// connection is closed. It returns
// when every goroutine of the server has ended.
func (s *server) close() {
	s.mu.Lock()
	s.closing = true
	s.ln.Close() // also removes the socket file
	var acks []chan struct{}
	for c := range s.conns {
		acks = append(acks, c.acked)
		c.write(newFrame(0, respGoAway, 0))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		for _, a := range acks {
			<-a
		}
		s.handlers.Wait()
		close(done)
	}()
	grace := time.NewTimer(closeGrace)
	select {
	case <-done:
	case <-grace.C:
		s.cancel()
	}
	grace.Stop()
	s.mu.Lock()
	for c := range s.conns {
		c.c.Close()
	}
	s.mu.Unlock()
	s.loops.Wait() // every reader ended, so every ack channel is closed
	<-done
	s.cancel()
}

// kill breaks every connection at once without answering, like a crash
// (tests).
func (s *server) kill() {
	s.mu.Lock()
	s.closing = true
	for c := range s.conns {
		c.c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.cancel()
	s.handlers.Wait()
	s.loops.Wait()
}

// serverConn is one client connection.
type serverConn struct {
	s   *server
	c   *net.UnixConn
	wmu sync.Mutex
	sem chan struct{}

	puts map[uint64]*io.PipeWriter // bodies being streamed; reader goroutine only

	smu        sync.Mutex
	streams    map[uint64]*srvStream
	nextStream uint64

	acked chan struct{} // closed on opGoAwayAck or when the reader ends
	ackMu sync.Once
}

func (c *serverConn) ack() { c.ackMu.Do(func() { close(c.acked) }) }

// srvStream is an artifact opened by a client.
type srvStream struct {
	mu     sync.Mutex
	rc     io.ReadCloser
	cancel context.CancelFunc
}

func (c *serverConn) read() {
	defer c.s.loops.Done()
	defer c.cleanup()
	br := bufio.NewReaderSize(c.c, 64<<10)
	for {
		f, err := readFrame(br)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.s.log.Debug("state: connection dropped", "err", err)
			}
			return
		}
		switch f.kind {
		case opPutChunk, opPutEnd, opPutAbort:
			c.body(f)
			continue
		case opGoAwayAck:
			c.ack()
			continue
		}
		if f.kind == 0 || f.kind >= opLast {
			c.respond(f.id, nil, fmt.Errorf("%w: unknown op %d", ErrInvalid, f.kind))
			continue
		}
		var body *io.PipeReader
		c.s.mu.Lock()
		if c.s.closing {
			c.s.mu.Unlock()
			c.respond(f.id, nil, errNotApplied)
			continue
		}
		c.s.handlers.Add(1)
		c.s.mu.Unlock()
		if f.kind == opPutBegin {
			var pw *io.PipeWriter
			body, pw = io.Pipe()
			if old := c.puts[f.id]; old != nil {
				old.CloseWithError(errMalformed)
			}
			c.puts[f.id] = pw
		}
		c.sem <- struct{}{}
		go c.handle(f, body)
	}
}

// body feeds a streamed Put. Chunks for a Put that already ended are
// dropped.
func (c *serverConn) body(f frame) {
	pw := c.puts[f.id]
	if pw == nil {
		return
	}
	d := decoder{b: f.payload}
	switch f.kind {
	case opPutChunk:
		data := d.bytes()
		if d.done() != nil {
			pw.CloseWithError(errMalformed)
			delete(c.puts, f.id)
			return
		}
		if _, err := pw.Write(data); err != nil {
			delete(c.puts, f.id)
		}
	case opPutEnd:
		pw.Close()
		delete(c.puts, f.id)
	case opPutAbort:
		msg := d.str()
		pw.CloseWithError(fmt.Errorf("client could not read the body: %s", msg))
		delete(c.puts, f.id)
	}
}

func (c *serverConn) cleanup() {
	c.ack()
	for id, pw := range c.puts {
		pw.CloseWithError(io.ErrUnexpectedEOF)
		delete(c.puts, id)
	}
	c.c.Close()
	c.smu.Lock()
	for id, st := range c.streams {
		st.cancel()
		st.rc.Close()
		delete(c.streams, id)
	}
	c.smu.Unlock()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

func (c *serverConn) handle(f frame, body *io.PipeReader) {
	defer c.s.handlers.Done()
	defer func() { <-c.sem }()
	ctx := c.s.ctx
	if f.deadline != 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Unix(0, f.deadline))
		defer cancel()
	}
	out := newFrame(f.id, respOK, 0)
	out, err := c.run(ctx, f, body, out)
	if body != nil {
		body.CloseWithError(io.ErrClosedPipe)
	}
	if h := c.s.hook.Load(); h != nil {
		(*h)(f.kind)
	}
	c.respond(f.id, out, err)
}

// respond writes out (a respOK frame), or a respErr frame for err.
func (c *serverConn) respond(id uint64, out []byte, err error) {
	if err == nil {
		out, err = finishFrame(out)
	}
	if err != nil {
		code := errCodeOf(err)
		if code == codeClosed || code == codeArtClosed {
			// The owner's stores close only when the owner does, before
			// running the request.
			code = codeNotApplied
		}
		out = newFrame(id, respErr, 0)
		out = append(out, code)
		out = putStr(out, err.Error())
		out, _ = finishFrame(out)
	}
	c.write(out)
}

// write writes one finished frame; a failed write closes the connection.
func (c *serverConn) write(out []byte) {
	if len(out) >= frameHeader {
		out, _ = finishFrame(out)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.c.Write(out); err != nil {
		c.c.Close()
	}
}

// run executes one request and appends its answer to out.
func (c *serverConn) run(ctx context.Context, f frame, body io.Reader, out []byte) ([]byte, error) {
	kv, art := c.s.kv, c.s.art
	switch f.kind {
	case opGet, opSet, opCreate, opSwap, opDelete, opScan, opAdmit:
		r, err := decodeKV(f.kind, f.payload)
		if err != nil {
			return nil, err
		}
		switch f.kind {
		case opGet:
			v, err := kv.Get(ctx, r.key)
			return putBytes(out, v), err
		case opSet:
			return out, kv.Set(ctx, r.key, r.val, r.ttl)
		case opCreate:
			ok, err := kv.Create(ctx, r.key, r.val, r.ttl)
			return putBool(out, ok), err
		case opSwap:
			ok, err := kv.Swap(ctx, r.key, r.old, r.val, r.ttl)
			return putBool(out, ok), err
		case opDelete:
			return out, kv.Delete(ctx, r.key)
		case opScan:
			es, more, err := kv.scanPage(ctx, r.key, r.after, r.limit, scanBudget)
			out = putUvarint(out, uint64(len(es)))
			for _, e := range es {
				out = putStr(out, e.Key)
				out = putBytes(out, e.Value)
			}
			return putBool(out, more), err
		default:
			res, err := kv.Admit(ctx, r.admit)
			out = putVarint(out, int64(res.Denied))
			return putVarint(out, int64(res.RetryAfter)), err
		}
	case opPing:
		return out, nil
	}
	d := decoder{b: f.payload}
	switch f.kind {
	case opPutBegin:
		owner, mt, label, size := d.str(), d.str(), d.str(), d.varint()
		if err := d.done(); err != nil {
			return nil, err
		}
		m, err := art.Put(ctx, owner, artifacts.PutInput{MediaType: mt, Label: label, Body: body, Size: size})
		return encodeMeta(out, m), err
	case opStat:
		owner, handle := d.str(), d.str()
		if err := d.done(); err != nil {
			return nil, err
		}
		m, err := art.Stat(ctx, owner, handle)
		return encodeMeta(out, m), err
	case opReadAt:
		owner, handle, off, n := d.str(), d.str(), d.varint(), d.varint()
		if err := d.done(); err != nil {
			return nil, err
		}
		b, err := art.ReadAt(ctx, owner, handle, off, n)
		return putBytes(out, b), err
	case opDeleteArtifact:
		owner, handle := d.str(), d.str()
		if err := d.done(); err != nil {
			return nil, err
		}
		return out, art.Delete(ctx, owner, handle)
	case opOpen:
		owner, handle := d.str(), d.str()
		if err := d.done(); err != nil {
			return nil, err
		}
		return c.open(owner, handle, out)
	case opRead:
		id, n := d.uvarint(), d.int(readChunk)
		if err := d.done(); err != nil {
			return nil, err
		}
		return c.readStream(ctx, id, n, out)
	case opCloseStream:
		id := d.uvarint()
		if err := d.done(); err != nil {
			return nil, err
		}
		c.smu.Lock()
		st := c.streams[id]
		delete(c.streams, id)
		c.smu.Unlock()
		if st != nil {
			st.cancel()
			st.rc.Close()
		}
		return out, nil
	}
	return nil, errMalformed
}

// open opens a stream; it lives until the client closes it or the
// connection ends.
func (c *serverConn) open(owner, handle string, out []byte) ([]byte, error) {
	ctx, cancel := context.WithCancel(c.s.ctx)
	m, err := c.s.art.Stat(ctx, owner, handle)
	if err != nil {
		cancel()
		return nil, err
	}
	rc, err := c.s.art.Open(ctx, owner, handle)
	if err != nil {
		cancel()
		return nil, err
	}
	c.smu.Lock()
	c.nextStream++
	id := c.nextStream
	c.streams[id] = &srvStream{rc: rc, cancel: cancel}
	c.smu.Unlock()
	out = putUvarint(out, id)
	return putStr(out, m.ContentHash), nil
}

// readStream reads up to n bytes of a stream: data, then whether the
// stream ended.
func (c *serverConn) readStream(ctx context.Context, id uint64, n int, out []byte) ([]byte, error) {
	c.smu.Lock()
	st := c.streams[id]
	c.smu.Unlock()
	if st == nil {
		return nil, fmt.Errorf("%w: unknown stream", artifacts.ErrInvalid)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	k, err := io.ReadFull(st.rc, buf)
	switch {
	case err == nil:
		return putBool(putBytes(out, buf), false), nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return putBool(putBytes(out, buf[:k]), true), nil
	case k > 0:
		// The reader's errors stick: the next read reports it.
		return putBool(putBytes(out, buf[:k]), false), nil
	}
	return nil, err
}
