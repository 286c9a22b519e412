package artifacts

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"testing"
)

func TestStream(t *testing.T) {
	content := []byte("hello, streamed world")
	sum := sha256.Sum256(content)
	pieces := func(last bool, ps ...string) func() ([]byte, bool, error) {
		i := 0
		return func() ([]byte, bool, error) {
			p := []byte(ps[i])
			i++
			return p, i == len(ps) && last, nil
		}
	}
	cases := []struct {
		name string
		next func() ([]byte, bool, error)
		want []byte
		err  error
	}{
		{"pieces, the last with data", pieces(true, "hello, ", "streamed ", "world"), sum[:], nil},
		{"an empty last piece", pieces(true, "hello, streamed world", ""), sum[:], nil},
		{"empty pieces on the way", pieces(true, "", "hello, streamed world", ""), sum[:], nil},
		{"wrong hash", pieces(true, "hello, ", "streamed ", "world"), make([]byte, 32), ErrCorrupt},
		{"changed content", pieces(true, "hello, ", "STREAMED ", "world"), sum[:], ErrCorrupt},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			released := 0
			s := NewStream(tc.want, tc.next, func() error { released++; return nil })
			got, err := io.ReadAll(s)
			if tc.err == nil && (err != nil || !bytes.Equal(got, content)) {
				t.Fatalf("ReadAll = %q, %v", got, err)
			}
			if tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("ReadAll error = %v, want %v", err, tc.err)
			}
			// The outcome is sticky.
			if _, again := s.Read(make([]byte, 1)); (tc.err == nil && again != io.EOF) || (tc.err != nil && !errors.Is(again, tc.err)) {
				t.Fatalf("second Read = %v", again)
			}
			s.Close()
			s.Close()
			if released != 1 {
				t.Fatalf("release called %d times", released)
			}
			if _, err := s.Read(make([]byte, 1)); !errors.Is(err, ErrClosed) {
				t.Fatalf("Read after Close = %v", err)
			}
		})
	}
	// A fetch error is returned, and sticks.
	boom := errors.New("boom")
	s := NewStream(sum[:], func() ([]byte, bool, error) { return nil, false, boom }, nil)
	if _, err := s.Read(make([]byte, 4)); !errors.Is(err, boom) {
		t.Fatalf("fetch error = %v", err)
	}
	if _, err := s.Read(make([]byte, 4)); !errors.Is(err, boom) {
		t.Fatalf("sticky fetch error = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close without release = %v", err)
	}
}
