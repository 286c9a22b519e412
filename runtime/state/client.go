package state

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

// Transport outcomes the router acts on.
var (
	// errNotSent: nothing of the request reached the owner (or the owner
	// refused it unrun); the router may elect or redial and run it again.
	errNotSent = errors.New("state: request not sent")
	// errLost: the request was sent and the connection broke before the
	// answer; it may have been applied and must not be run again.
	errLost = errors.New("state: connection to the owner lost with the request in flight")
)

// clientConn is one connection to the owner, shared by many calls: each
// request gets an id, a reader goroutine hands each answer to its caller.
// The reader ends when the connection breaks or is closed.
type clientConn struct {
	c   *net.UnixConn
	wmu sync.Mutex

	mu      sync.Mutex
	pending map[uint64]chan frame
	nextID  uint64
	dead    bool
	// draining: the owner said go away; no new request is started.
	draining bool
	// sending counts requests started and not yet written; the go-away
	// ack is written after the last of them.
	sending int
	acked   bool
	done    chan struct{} // closed when the reader ends
}

// dialOwner connects to the owner's socket and checks that the owner runs
// as uid.
func dialOwner(ctx context.Context, path string, uid int) (*clientConn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uc := c.(*net.UnixConn)
	if err := checkPeer(uc, uid); err != nil {
		uc.Close()
		return nil, err
	}
	cc := &clientConn{c: uc, pending: map[uint64]chan frame{}, done: make(chan struct{})}
	go cc.read()
	return cc, nil
}

func (cc *clientConn) read() {
	defer close(cc.done)
	br := bufio.NewReaderSize(cc.c, 64<<10)
	for {
		f, err := readFrame(br)
		if err != nil {
			break
		}
		if f.kind == respGoAway {
			cc.mu.Lock()
			cc.draining = true
			ack := cc.ackDue()
			cc.mu.Unlock()
			if ack {
				// Not from the reader itself: it must keep reading answers
				// whatever the write waits for. The write ends when it is
				// done or the connection closes.
				go cc.sendAck()
			}
			continue
		}
		cc.mu.Lock()
		ch := cc.pending[f.id]
		delete(cc.pending, f.id)
		cc.mu.Unlock()
		if ch != nil {
			ch <- f // buffered, one answer per request
		}
	}
	cc.mu.Lock()
	cc.dead = true
	cc.mu.Unlock()
	cc.c.Close()
}

// ackDue reports (once) that the go-away ack must be written now. Called
// with mu held.
func (cc *clientConn) ackDue() bool {
	if cc.draining && cc.sending == 0 && !cc.acked {
		cc.acked = true
		return true
	}
	return false
}

func (cc *clientConn) sendAck() {
	b, _ := finishFrame(newFrame(0, opGoAwayAck, 0))
	cc.send(context.Background(), b)
}

// written ends what register started: the request is written (or failed).
func (cc *clientConn) written() {
	cc.mu.Lock()
	cc.sending--
	ack := cc.ackDue()
	cc.mu.Unlock()
	if ack {
		cc.sendAck()
	}
}

// alive reports whether new requests may use the connection.
func (cc *clientConn) alive() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return !cc.dead && !cc.draining
}

// broken reports whether the connection is dead (not merely draining).
func (cc *clientConn) broken() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.dead
}

// close closes the connection and waits for its reader.
func (cc *clientConn) close() {
	cc.c.Close()
	<-cc.done
}

func (cc *clientConn) register() (uint64, chan frame, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.dead || cc.draining {
		return 0, nil, errNotSent
	}
	cc.sending++
	cc.nextID++
	ch := make(chan frame, 1)
	cc.pending[cc.nextID] = ch
	return cc.nextID, ch, nil
}

func (cc *clientConn) unregister(id uint64) {
	cc.mu.Lock()
	delete(cc.pending, id)
	cc.mu.Unlock()
}

// send writes one frame. An error is errNotSent when no byte left, errLost
// otherwise (the connection is then unusable and closed).
func (cc *clientConn) send(ctx context.Context, b []byte) error {
	cc.wmu.Lock()
	defer cc.wmu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		cc.c.SetWriteDeadline(d)
	} else {
		cc.c.SetWriteDeadline(time.Time{})
	}
	n, err := cc.c.Write(b)
	if err == nil {
		return nil
	}
	cc.c.Close()
	if n == 0 {
		return fmt.Errorf("%w: %w", errNotSent, err)
	}
	return fmt.Errorf("%w: %w", errLost, err)
}

// wait waits for the answer to request id.
func (cc *clientConn) wait(ctx context.Context, id uint64, ch chan frame) (frame, error) {
	select {
	case f := <-ch:
		return answer(f)
	case <-ctx.Done():
		cc.unregister(id)
		return frame{}, ctx.Err()
	case <-cc.done:
		select {
		case f := <-ch:
			return answer(f)
		default:
			return frame{}, errLost
		}
	}
}

func answer(f frame) (frame, error) {
	if f.kind == respErr {
		err := decodeError(f.payload)
		if errors.Is(err, errNotApplied) {
			return f, fmt.Errorf("%w: %w", errNotSent, err)
		}
		return f, err
	}
	if f.kind != respOK {
		return f, fmt.Errorf("%w: unexpected frame kind %d", errLost, f.kind)
	}
	return f, nil
}

// call sends one request built by build and returns the answer's payload.
func (cc *clientConn) call(ctx context.Context, op byte, build func([]byte) []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, ch, err := cc.register()
	if err != nil {
		return nil, err
	}
	b, err := finishFrame(build(newFrame(id, op, deadlineOf(ctx))))
	if err == nil {
		err = cc.send(ctx, b)
	}
	cc.written()
	if err != nil {
		cc.unregister(id)
		return nil, err
	}
	f, err := cc.wait(ctx, id, ch)
	return f.payload, err
}

// Remote KV operations. Input was checked by the router.

func (cc *clientConn) kvCall(ctx context.Context, op byte, r *kvRequest) (decoder, error) {
	p, err := cc.call(ctx, op, func(b []byte) []byte { return encodeKV(b, op, r) })
	return decoder{b: p}, err
}

func bad(d *decoder) error {
	if d.done() != nil {
		return fmt.Errorf("%w: malformed answer from the owner", ErrUnavailable)
	}
	return nil
}

func (cc *clientConn) get(ctx context.Context, key string) ([]byte, error) {
	d, err := cc.kvCall(ctx, opGet, &kvRequest{key: key})
	if err != nil {
		return nil, err
	}
	v := bytes.Clone(d.bytes())
	return v, bad(&d)
}

func (cc *clientConn) set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	_, err := cc.kvCall(ctx, opSet, &kvRequest{key: key, val: val, ttl: ttl})
	return err
}

func (cc *clientConn) boolCall(ctx context.Context, op byte, r *kvRequest) (bool, error) {
	d, err := cc.kvCall(ctx, op, r)
	if err != nil {
		return false, err
	}
	ok := d.bool()
	return ok, bad(&d)
}

func (cc *clientConn) del(ctx context.Context, key string) error {
	_, err := cc.kvCall(ctx, opDelete, &kvRequest{key: key})
	return err
}

// scan fetches pages until limit entries or the end. Pages are separate
// snapshots: an entry written between two pages may or may not appear.
func (cc *clientConn) scan(ctx context.Context, prefix string, limit int) ([]Entry, error) {
	var out []Entry
	after := ""
	for {
		d, err := cc.kvCall(ctx, opScan, &kvRequest{key: prefix, after: after, limit: limit - len(out)})
		if err != nil {
			if len(out) > 0 && (errors.Is(err, errNotSent) || errors.Is(err, errLost)) {
				// Earlier pages are done: do not let the router restart the
				// whole scan on another owner silently.
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			return nil, err
		}
		n := d.int(MaxScan)
		for range n {
			out = append(out, Entry{Key: d.str(), Value: bytes.Clone(d.bytes())})
		}
		more := d.bool()
		if err := bad(&d); err != nil {
			return nil, err
		}
		if !more || n == 0 || len(out) >= limit {
			return out, nil
		}
		after = out[len(out)-1].Key
	}
}

func (cc *clientConn) admit(ctx context.Context, req AdmitRequest) (AdmitResult, error) {
	d, err := cc.kvCall(ctx, opAdmit, &kvRequest{admit: req})
	if err != nil {
		return AdmitResult{}, err
	}
	res := AdmitResult{Denied: int(d.varint()), RetryAfter: time.Duration(d.varint())}
	return res, bad(&d)
}

// Remote artifact operations.

func (cc *clientConn) stat(ctx context.Context, owner, handle string) (artifacts.Meta, error) {
	p, err := cc.call(ctx, opStat, func(b []byte) []byte { return putStr(putStr(b, owner), handle) })
	if err != nil {
		return artifacts.Meta{}, err
	}
	d := decoder{b: p}
	m := decodeMeta(&d)
	return m, bad(&d)
}

func (cc *clientConn) readAt(ctx context.Context, owner, handle string, off, n int64) ([]byte, error) {
	p, err := cc.call(ctx, opReadAt, func(b []byte) []byte {
		return putVarint(putVarint(putStr(putStr(b, owner), handle), off), n)
	})
	if err != nil {
		return nil, err
	}
	d := decoder{b: p}
	v := bytes.Clone(d.bytes())
	return v, bad(&d)
}

func (cc *clientConn) deleteArtifact(ctx context.Context, owner, handle string) error {
	_, err := cc.call(ctx, opDeleteArtifact, func(b []byte) []byte { return putStr(putStr(b, owner), handle) })
	return err
}

// put streams a Put on cc, which the caller dialled for it alone. The
// body is sent in putChunk frames; one byte past Size is sent when the
// body has it, so that the owner reports a body longer than declared.
func (cc *clientConn) put(ctx context.Context, owner string, in artifacts.PutInput) (artifacts.Meta, error) {
	if err := ctx.Err(); err != nil {
		return artifacts.Meta{}, err
	}
	body, size := in.Body, in.Size
	if body == nil {
		body, size = bytes.NewReader(in.Data), int64(len(in.Data))
	}
	id, ch, err := cc.register()
	if err != nil {
		return artifacts.Meta{}, err
	}
	begin := newFrame(id, opPutBegin, deadlineOf(ctx))
	begin = putVarint(putStr(putStr(putStr(begin, owner), in.MediaType), in.Label), size)
	begin, err = finishFrame(begin)
	if err == nil {
		err = cc.send(ctx, begin)
	}
	cc.written()
	if err != nil {
		cc.unregister(id)
		return artifacts.Meta{}, err
	}
	lr := io.LimitReader(body, size+1)
	buf := make([]byte, putChunk)
	var f frame
	answered := false
	for !answered {
		select {
		case f = <-ch: // the owner answered early (a refusal): stop sending
			answered = true
			continue
		default:
		}
		k, rerr := io.ReadFull(lr, buf)
		var out []byte
		if k > 0 {
			out = putBytes(newFrame(id, opPutChunk, 0), buf[:k])
		}
		var tail []byte
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF):
			tail = newFrame(id, opPutEnd, 0)
		default:
			tail = putStr(newFrame(id, opPutAbort, 0), rerr.Error())
		}
		if cerr := ctx.Err(); cerr != nil && tail == nil {
			out, tail = nil, putStr(newFrame(id, opPutAbort, 0), cerr.Error())
		}
		for _, fr := range [][]byte{out, tail} {
			if fr == nil {
				continue
			}
			fr, _ = finishFrame(fr)
			if err := cc.send(ctx, fr); err != nil {
				cc.unregister(id)
				return artifacts.Meta{}, fmt.Errorf("%w: %w", errLost, err)
			}
		}
		if tail != nil {
			break
		}
	}
	var err2 error
	if answered {
		f, err2 = answer(f)
	} else {
		f, err2 = cc.wait(ctx, id, ch)
	}
	if err2 != nil {
		return artifacts.Meta{}, err2
	}
	d := decoder{b: f.payload}
	m := decodeMeta(&d)
	return m, bad(&d)
}

// open starts streaming an artifact; the reader pulls readChunk bytes per
// round trip and checks the sha256 the owner announced.
func (cc *clientConn) open(ctx context.Context, owner, handle string) (*artifacts.Stream, error) {
	p, err := cc.call(ctx, opOpen, func(b []byte) []byte { return putStr(putStr(b, owner), handle) })
	if err != nil {
		return nil, err
	}
	d := decoder{b: p}
	id, sum := d.uvarint(), d.str()
	if err := bad(&d); err != nil {
		return nil, err
	}
	want, err := hex.DecodeString(sum)
	if err != nil {
		return nil, fmt.Errorf("%w: the owner announced a malformed sha256", artifacts.ErrCorrupt)
	}
	r := &remoteReader{cc: cc, ctx: ctx, id: id}
	return artifacts.NewStream(want, r.fetch, r.close), nil
}

// remoteReader fetches an artifact streamed by the owner, for an
// artifacts.Stream.
type remoteReader struct {
	cc  *clientConn
	ctx context.Context
	id  uint64
}

// fetch returns the next piece, and whether it is the last.
func (r *remoteReader) fetch() ([]byte, bool, error) {
	p, err := r.cc.call(r.ctx, opRead, func(b []byte) []byte { return putUvarint(putUvarint(b, r.id), readChunk) })
	if err != nil {
		if errors.Is(err, errNotSent) || errors.Is(err, errLost) {
			return nil, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, false, err
	}
	d := decoder{b: p}
	data := d.bytes()
	last := d.bool()
	if err := bad(&d); err != nil {
		return nil, false, err
	}
	return data, last, nil
}

// close tells the owner to drop the stream.
func (r *remoteReader) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := r.cc.call(ctx, opCloseStream, func(b []byte) []byte { return putUvarint(b, r.id) })
	if err != nil && (errors.Is(err, errNotSent) || errors.Is(err, errLost)) {
		return nil // the owner is gone, and the stream with it
	}
	return err
}
