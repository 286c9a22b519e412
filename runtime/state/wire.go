package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

// The wire protocol between the embedded store's owner and its clients, on
// a unix socket. Every message is one frame:
//
//	u32  length of what follows (big endian), at most maxFrame
//	u64  request id (the client's; a response carries its request's id)
//	u8   kind: an op (a request) or respOK / respErr (a response)
//	i64  deadline of the request, Unix nanoseconds, 0 for none (both
//	     ends share the machine's clock); 0 in responses
//	...  payload: fields in the order the op defines, each an unsigned
//	     varint, a signed varint, a byte, or a byte string (uvarint
//	     length, then the bytes)
//
// Many calls share one connection: the client numbers its requests and
// the owner answers each, in any order, with the same id. An artifact Put
// is streamed on a connection of its own (opPutBegin, opPutChunk frames of
// at most putChunk bytes, opPutEnd or opPutAbort, then one response), so a
// slow body never holds up other calls. Open is pulled: opOpen answers a
// stream id, each opRead returns at most readChunk bytes, opCloseStream
// ends it. A closing owner sends respGoAway on every connection and
// answers every request read before the client's opGoAwayAck, so that a
// graceful Close loses no request. A respErr payload is a code (errCode) and a message; the client
// rebuilds an error that matches the same sentinel with errors.Is.
const (
	frameHeader = 4 + 8 + 1 + 8
	// maxFrame bounds a frame: a Swap carries two values of up to
	// MaxValueBytes; everything else is smaller. Checked before anything is
	// allocated.
	maxFrame = 2*MaxValueBytes + 64<<10
	// putChunk is the body bytes one opPutChunk frame carries.
	putChunk = 256 << 10
	// readChunk caps the bytes one opRead returns.
	readChunk = 1 << 20
	// scanBudget is the value bytes one scan response carries; a longer
	// scan is fetched in pages.
	scanBudget = MaxValueBytes
)

// Frame kinds.
const (
	opGet byte = iota + 1
	opSet
	opCreate
	opSwap
	opDelete
	opScan
	opAdmit
	opPutBegin
	opPutChunk
	opPutEnd
	opPutAbort
	opStat
	opReadAt
	opOpen
	opRead
	opCloseStream
	opDeleteArtifact
	opPing
	// opGoAwayAck: the client will send nothing more on this connection.
	opGoAwayAck
	opLast // not an op: one past the last

	respOK  byte = 0x80
	respErr byte = 0x81
	// respGoAway (id 0): the owner is closing; the client stops sending
	// on this connection and acknowledges with opGoAwayAck once every
	// request it started is written.
	respGoAway byte = 0x82
)

// Error codes carried by respErr.
const (
	codeInternal byte = iota
	codeNotFound
	codeUnavailable
	codeTooLarge
	codeInvalid
	codeClosed
	codeArtNotFound
	codeArtTooLarge
	codeArtInvalid
	codeArtOutOfRange
	codeArtClosed
	codeArtCorrupt
	codeCanceled
	codeDeadline
	// codeNotApplied: the owner is closing and did not run the request;
	// the client may run the election and retry it.
	codeNotApplied
	codeLast
)

// codeErrs maps codes to the sentinels they stand for.
var codeErrs = [codeLast]error{
	codeNotFound:      ErrNotFound,
	codeUnavailable:   ErrUnavailable,
	codeTooLarge:      ErrTooLarge,
	codeInvalid:       ErrInvalid,
	codeClosed:        ErrClosed,
	codeArtNotFound:   artifacts.ErrNotFound,
	codeArtTooLarge:   artifacts.ErrTooLarge,
	codeArtInvalid:    artifacts.ErrInvalid,
	codeArtOutOfRange: artifacts.ErrOutOfRange,
	codeArtClosed:     artifacts.ErrClosed,
	codeArtCorrupt:    artifacts.ErrCorrupt,
	codeCanceled:      context.Canceled,
	codeDeadline:      context.DeadlineExceeded,
	codeNotApplied:    errNotApplied,
}

// errNotApplied reports a request the owner refused without running it
// because it is closing.
var errNotApplied = errors.New("state: owner closing, request not run")

// errCodeOf returns the code of err.
func errCodeOf(err error) byte {
	for c := codeNotFound; c < codeLast; c++ {
		if errors.Is(err, codeErrs[c]) {
			return c
		}
	}
	return codeInternal
}

// remoteError is an error the owner returned: its message as the owner
// wrote it, matching the sentinel its code stands for.
type remoteError struct {
	msg  string
	base error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.base }

func decodeError(p []byte) error {
	d := decoder{b: p}
	code := d.byte()
	msg := d.str()
	if d.err != nil {
		return fmt.Errorf("%w: malformed error response", ErrUnavailable)
	}
	var base error
	if code < codeLast {
		base = codeErrs[code]
	}
	return &remoteError{msg: msg, base: base}
}

// frame is one decoded frame.
type frame struct {
	id       uint64
	kind     byte
	deadline int64
	payload  []byte
}

var errFrameTooLarge = errors.New("state: frame too large")

// readFrame reads one frame from r. The length is checked against maxFrame
// before anything is allocated, and the buffer grows only as bytes arrive,
// so a peer cannot make it allocate more than it sends.
func readFrame(r io.Reader) (frame, error) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:4]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(h[:4])
	if n > maxFrame {
		return frame{}, fmt.Errorf("%w: %d bytes", errFrameTooLarge, n)
	}
	if n < frameHeader-4 {
		return frame{}, fmt.Errorf("state: short frame (%d bytes)", n)
	}
	if _, err := io.ReadFull(r, h[4:]); err != nil {
		return frame{}, unexpected(err)
	}
	f := frame{
		id:       binary.BigEndian.Uint64(h[4:12]),
		kind:     h[12],
		deadline: int64(binary.BigEndian.Uint64(h[13:21])),
	}
	rest := int64(n) - (frameHeader - 4)
	if rest <= 64<<10 {
		f.payload = make([]byte, rest)
		if _, err := io.ReadFull(r, f.payload); err != nil {
			return frame{}, unexpected(err)
		}
		return f, nil
	}
	var buf bytes.Buffer
	buf.Grow(64 << 10)
	if m, err := buf.ReadFrom(io.LimitReader(r, rest)); err != nil {
		return frame{}, err
	} else if m != rest {
		return frame{}, io.ErrUnexpectedEOF
	}
	f.payload = buf.Bytes()
	return f, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// appendFrame appends a frame to dst; payload is built by the caller with
// the encoder helpers after the header (see newFrame / finishFrame).
func newFrame(id uint64, kind byte, deadline int64) []byte {
	b := make([]byte, frameHeader, 256)
	binary.BigEndian.PutUint64(b[4:12], id)
	b[12] = kind
	binary.BigEndian.PutUint64(b[13:21], uint64(deadline))
	return b
}

// finishFrame writes the length; it fails when the frame is over maxFrame.
func finishFrame(b []byte) ([]byte, error) {
	if len(b)-4 > maxFrame {
		return nil, fmt.Errorf("%w: frame of %d bytes", ErrTooLarge, len(b))
	}
	binary.BigEndian.PutUint32(b[:4], uint32(len(b)-4))
	return b, nil
}

func deadlineOf(ctx context.Context) int64 {
	if d, ok := ctx.Deadline(); ok {
		return max(d.UnixNano(), 1)
	}
	return 0
}

// Encoding helpers.

func putUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func putVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }
func putBytes(b, v []byte) []byte          { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }
func putStr(b []byte, v string) []byte     { return append(binary.AppendUvarint(b, uint64(len(v))), v...) }
func putBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// putOptBytes encodes a byte string that may be nil (distinct from empty).
func putOptBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	return putBytes(append(b, 1), v)
}

// decoder reads payload fields; the first error sticks and later reads
// return zero values, so a handler checks d.err once.
type decoder struct {
	b   []byte
	err error
}

var errMalformed = fmt.Errorf("%w: malformed frame", ErrInvalid)

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errMalformed
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) bool() bool {
	switch d.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail()
	return false
}

// bytes returns a byte string aliasing the payload (never nil).
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return []byte{}
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) optBytes() []byte {
	if !d.bool() {
		return nil
	}
	return d.bytes()
}

// int returns a uvarint that must fit in [0, limit].
func (d *decoder) int(limit int) int {
	v := d.uvarint()
	if v > uint64(limit) {
		d.fail()
		return 0
	}
	return int(v)
}

// done fails when bytes are left over.
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail()
	}
	return d.err
}

// Typed messages shared by the client and the owner.

// kvRequest is any KV request, decoded.
type kvRequest struct {
	key, after string
	old, val   []byte
	ttl        time.Duration
	limit      int
	admit      AdmitRequest
}

// encodeKV builds the payload of a KV op.
func encodeKV(b []byte, op byte, r *kvRequest) []byte {
	switch op {
	case opGet, opDelete:
		b = putStr(b, r.key)
	case opSet, opCreate:
		b = putStr(b, r.key)
		b = putBytes(b, r.val)
		b = putVarint(b, int64(r.ttl))
	case opSwap:
		b = putStr(b, r.key)
		b = putOptBytes(b, r.old)
		b = putOptBytes(b, r.val)
		b = putVarint(b, int64(r.ttl))
	case opScan:
		b = putStr(b, r.key)
		b = putStr(b, r.after)
		b = putUvarint(b, uint64(r.limit))
	case opAdmit:
		a := &r.admit
		b = putUvarint(b, uint64(len(a.Keys)))
		for i, k := range a.Keys {
			b = putStr(b, k)
			b = putUvarint(b, uint64(a.Limits[i]))
		}
		b = putVarint(b, int64(a.Window))
		b = putVarint(b, a.Now.UnixNano())
		b = putBool(b, a.Take)
	}
	return b
}

// decodeKV parses the payload of a KV op. Values alias p.
func decodeKV(op byte, p []byte) (kvRequest, error) {
	d := decoder{b: p}
	var r kvRequest
	switch op {
	case opGet, opDelete:
		r.key = d.str()
	case opSet, opCreate:
		r.key = d.str()
		r.val = d.bytes()
		r.ttl = time.Duration(d.varint())
	case opSwap:
		r.key = d.str()
		r.old = d.optBytes()
		r.val = d.optBytes()
		r.ttl = time.Duration(d.varint())
	case opScan:
		r.key = d.str()
		r.after = d.str()
		r.limit = d.int(MaxScan)
	case opAdmit:
		n := d.int(MaxAdmitKeys)
		a := &r.admit
		a.Keys, a.Limits = make([]string, n), make([]int, n)
		for i := range n {
			a.Keys[i] = d.str()
			a.Limits[i] = d.int(math.MaxInt)
		}
		a.Window = time.Duration(d.varint())
		a.Now = time.Unix(0, d.varint())
		a.Take = d.bool()
	default:
		return r, errMalformed
	}
	return r, d.done()
}

func encodeMeta(b []byte, m artifacts.Meta) []byte {
	b = putStr(b, m.Handle)
	b = putStr(b, m.Owner)
	b = putStr(b, m.MediaType)
	b = putVarint(b, m.SizeBytes)
	b = putStr(b, m.Label)
	b = putStr(b, m.ContentHash)
	b = putVarint(b, m.CreatedAt.UnixNano())
	b = putVarint(b, m.ExpiresAt.UnixNano())
	return b
}

func decodeMeta(d *decoder) artifacts.Meta {
	return artifacts.Meta{
		Handle:      d.str(),
		Owner:       d.str(),
		MediaType:   d.str(),
		SizeBytes:   d.varint(),
		Label:       d.str(),
		ContentHash: d.str(),
		CreatedAt:   time.Unix(0, d.varint()).UTC(),
		ExpiresAt:   time.Unix(0, d.varint()).UTC(),
	}
}

// decodeFrameBody parses any frame's payload the way the owner or the
// client would; it exists so that the fuzz target reaches every decoder.
func decodeFrameBody(f frame) error {
	d := decoder{b: f.payload}
	switch f.kind {
	case opGet, opSet, opCreate, opSwap, opDelete, opScan, opAdmit:
		_, err := decodeKV(f.kind, f.payload)
		return err
	case opPutBegin:
		d.str()
		d.str()
		d.str()
		d.varint()
	case opPutChunk, opPutAbort:
		d.bytes()
	case opStat, opDeleteArtifact, opOpen:
		d.str()
		d.str()
	case opReadAt:
		d.str()
		d.str()
		d.varint()
		d.varint()
	case opRead:
		d.uvarint()
		d.int(readChunk)
	case opCloseStream:
		d.uvarint()
	case respErr:
		return decodeError(f.payload)
	case respOK:
		decodeMeta(&d)
		return nil // an OK payload's shape depends on the request
	}
	return d.done()
}
