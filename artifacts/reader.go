package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"

	badger "github.com/dgraph-io/badger/v4"
)

// reader streams one blob chunk by chunk. It holds the blob (see
// BadgerStore.holds) from Open until Close, so its chunks cannot be deleted under
// it, and keeps at most one chunk in memory. Not safe for concurrent use, like
// most io.Readers.
type reader struct {
	s         *BadgerStore
	ctx       context.Context
	id        blobID
	size      int64
	chunkSize int64
	want      [sha256.Size]byte
	h         hash.Hash

	next   int64  // index of the next chunk to fetch
	buf    []byte // unread part of the current chunk
	err    error  // sticky: io.EOF or the first failure
	closed bool
}

// Read implements io.Reader. At the end of the content it checks the sha256 and
// returns io.EOF, or an ErrCorrupt error on mismatch.
func (r *reader) Read(p []byte) (int, error) {
	if r.closed {
		return 0, fmt.Errorf("%w: read after Close", ErrClosed)
	}
	if r.err != nil {
		return 0, r.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.buf) == 0 {
		if r.next*r.chunkSize >= r.size {
			r.err = io.EOF
			if !bytes.Equal(r.h.Sum(nil), r.want[:]) {
				r.err = fmt.Errorf("%w: content does not match its sha256", ErrCorrupt)
			}
			return 0, r.err
		}
		if err := r.fetch(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// fetch loads chunk r.next into r.buf.
func (r *reader) fetch() error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if err := r.s.enter(); err != nil {
		return err
	}
	defer r.s.leave()
	base := r.next * r.chunkSize
	end := min(base+r.chunkSize, r.size)
	buf := make([]byte, 0, end-base)
	err := r.s.db.View(func(txn *badger.Txn) error {
		return readChunks(r.ctx, txn, r.id, r.size, r.chunkSize, base, end, func(p []byte) { buf = append(buf, p...) })
	})
	if err != nil {
		return err
	}
	r.h.Write(buf)
	r.buf = buf
	r.next++
	return nil
}

// Close implements io.Closer. It releases the hold on the content; a second
// Close is a no-op.
func (r *reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.buf = nil
	return r.s.release(r.id)
}
