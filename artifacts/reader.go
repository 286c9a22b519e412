package artifacts

import (
	"context"
	"crypto/sha256"

	badger "github.com/dgraph-io/badger/v4"
)

// chunks fetches one blob's chunks for a Stream. It holds the blob (see
// BadgerStore.holds) from Open until the Stream is closed, so its chunks
// cannot be deleted under it.
type chunks struct {
	s         *BadgerStore
	ctx       context.Context
	id        blobID
	size      int64
	chunkSize int64
	next      int64 // index of the next chunk to fetch
}

// stream returns the Stream over the blob's content, whose sha256 is want.
func (r *chunks) stream(want [sha256.Size]byte) *Stream {
	return NewStream(want[:], r.fetch, func() error { return r.s.release(r.id) })
}

// fetch returns chunk r.next, and whether it is the last.
func (r *chunks) fetch() ([]byte, bool, error) {
	if r.next*r.chunkSize >= r.size {
		return nil, true, nil
	}
	if err := r.ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := r.s.enter(); err != nil {
		return nil, false, err
	}
	defer r.s.leave()
	base := r.next * r.chunkSize
	end := min(base+r.chunkSize, r.size)
	buf := make([]byte, 0, end-base)
	err := r.s.db.View(func(txn *badger.Txn) error {
		return readChunks(r.ctx, txn, r.id, r.size, r.chunkSize, base, end, func(p []byte) { buf = append(buf, p...) })
	})
	if err != nil {
		return nil, false, err
	}
	r.next++
	return buf, r.next*r.chunkSize >= r.size, nil
}
