package artifacts

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
)

// Stream is the io.ReadCloser every Store's Open returns: content fetched
// piece by piece (a chunk from Badger or Redis, a frame from the embedded
// store's owner), at most one piece in memory, hashed as it is handed out.
// At the end it returns io.EOF when the content's sha256 is the one its
// record names, and an ErrCorrupt error when it is not. Not safe for
// concurrent use, like most io.Readers.
type Stream struct {
	next    func() (piece []byte, last bool, err error)
	release func() error
	want    []byte
	h       hash.Hash

	buf    []byte // unread part of the current piece
	ended  bool   // the last piece was fetched
	err    error  // sticky: io.EOF or the first failure
	closed bool
}

// NewStream returns a Stream over the pieces next fetches, in order: next
// returns each piece and whether it is the last (a last piece may be
// empty). want is the content's sha256. release, when not nil, is called by
// the first Close.
func NewStream(want []byte, next func() (piece []byte, last bool, err error), release func() error) *Stream {
	return &Stream{next: next, release: release, want: want, h: sha256.New()}
}

// Read implements io.Reader.
func (s *Stream) Read(p []byte) (int, error) {
	if s.closed {
		return 0, fmt.Errorf("%w: read after Close", ErrClosed)
	}
	if s.err != nil {
		return 0, s.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for len(s.buf) == 0 {
		if s.ended {
			s.err = io.EOF
			if !bytes.Equal(s.h.Sum(nil), s.want) {
				s.err = fmt.Errorf("%w: content does not match its sha256", ErrCorrupt)
			}
			return 0, s.err
		}
		piece, last, err := s.next()
		if err != nil {
			s.err = err
			return 0, err
		}
		s.h.Write(piece)
		s.buf, s.ended = piece, last
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

// Close implements io.Closer; a second Close is a no-op.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed, s.buf = true, nil
	if s.release == nil {
		return nil
	}
	return s.release()
}
