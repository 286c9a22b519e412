package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
)

// FuzzFrame feeds arbitrary bytes to the frame reader and every payload
// decoder: they must never panic, and never allocate much more than they
// were given.
func FuzzFrame(f *testing.F) {
	seed := func(op byte, r *kvRequest) []byte {
		b, _ := finishFrame(encodeKV(newFrame(7, op, 0), op, r))
		return b
	}
	f.Add(seed(opGet, &kvRequest{key: "k"}))
	f.Add(seed(opSwap, &kvRequest{key: "k", old: []byte("a"), val: []byte("b"), ttl: time.Second}))
	f.Add(seed(opAdmit, &kvRequest{admit: AdmitRequest{Keys: []string{"a", "b"}, Limits: []int{1, 2}, Window: time.Second, Now: time.Unix(5, 0), Take: true}}))
	f.Add(seed(opScan, &kvRequest{key: "p/", after: "p/1", limit: 10}))
	b, _ := finishFrame(encodeMeta(newFrame(1, respOK, 0), artifacts.Meta{Handle: "art_x", SizeBytes: 3}))
	f.Add(b)
	b, _ = finishFrame(putStr(append(newFrame(1, respErr, 0), codeNotFound), "state: not found"))
	f.Add(b)
	huge := make([]byte, frameHeader)
	binary.BigEndian.PutUint32(huge, maxFrame)
	f.Add(huge)
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if len(fr.payload) > len(in) {
				t.Fatalf("payload of %d bytes from %d bytes of input", len(fr.payload), len(in))
			}
			_ = decodeFrameBody(fr)
			for op := opGet; op <= opAdmit; op++ {
				_, _ = decodeKV(op, fr.payload)
			}
			d := decoder{b: fr.payload}
			decodeMeta(&d)
			_ = decodeError(fr.payload)
		}
	})
}

func TestFrameLimit(t *testing.T) {
	var h [frameHeader]byte
	binary.BigEndian.PutUint32(h[:], maxFrame+1)
	if _, err := readFrame(bytes.NewReader(h[:])); !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("oversized frame = %v", err)
	}
	binary.BigEndian.PutUint32(h[:], maxFrame)
	if _, err := readFrame(bytes.NewReader(h[:])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame = %v", err)
	}
	if _, err := finishFrame(make([]byte, maxFrame+5)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("building an oversized frame = %v", err)
	}
}

func TestKVRoundTrip(t *testing.T) {
	cases := []struct {
		op byte
		r  kvRequest
	}{
		{opSet, kvRequest{key: "k", val: []byte{}, ttl: time.Second}},
		{opSwap, kvRequest{key: "k", old: nil, val: []byte("v")}},
		{opSwap, kvRequest{key: "k", old: []byte{}, val: nil}},
		{opAdmit, kvRequest{admit: AdmitRequest{Keys: []string{"a"}, Limits: []int{3}, Window: time.Minute, Now: time.Unix(0, 42), Take: true}}},
	}
	for _, c := range cases {
		got, err := decodeKV(c.op, encodeKV(nil, c.op, &c.r))
		if err != nil {
			t.Fatal(err)
		}
		if got.key != c.r.key || (got.old == nil) != (c.r.old == nil) || (got.val == nil) != (c.r.val == nil) || got.ttl != c.r.ttl ||
			got.admit.Window != c.r.admit.Window || !got.admit.Now.Equal(c.r.admit.Now) && c.op == opAdmit || got.admit.Take != c.r.admit.Take {
			t.Fatalf("op %d: %+v != %+v", c.op, got, c.r)
		}
	}
	if _, err := decodeKV(opGet, append(encodeKV(nil, opGet, &kvRequest{key: "k"}), 0)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("trailing byte = %v", err)
	}
}

// TestErrorCodes: every sentinel survives the trip through a code.
func TestErrorCodes(t *testing.T) {
	for c := codeNotFound; c < codeLast; c++ {
		sent := errors.Join(codeErrs[c], errors.New("detail"))
		p := putStr([]byte{errCodeOf(sent)}, sent.Error())
		if got := decodeError(p); !errors.Is(got, codeErrs[c]) || got.Error() != sent.Error() {
			t.Errorf("code %d: %v", c, got)
		}
	}
	if got := decodeError(putStr([]byte{codeInternal}, "boom")); got.Error() != "boom" {
		t.Errorf("internal = %v", got)
	}
}

func TestPeerAllowed(t *testing.T) {
	self := os.Getuid()
	cases := []struct {
		uid uint32
		ok  bool
	}{
		{uint32(self), true},
		{uint32(self) + 1, false},
		{0, self == 0},
		{65534, self == 65534},
	}
	for _, c := range cases {
		if err := peerAllowed(c.uid, self); (err == nil) != c.ok {
			t.Errorf("peerAllowed(%d, %d) = %v", c.uid, self, err)
		}
	}
}

// TestCheckPeer reads real credentials off a socket: ours pass, another
// uid is refused.
func TestCheckPeer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan *net.UnixConn, 1)
	go func() {
		c, _ := ln.AcceptUnix()
		done <- c
	}()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-done
	if s == nil {
		t.Fatal("accept failed")
	}
	defer s.Close()
	if err := checkPeer(s, os.Getuid()); err != nil {
		t.Fatalf("same uid refused: %v", err)
	}
	if err := checkPeer(c, os.Getuid()+1); err == nil {
		t.Fatal("another uid accepted")
	}
}

// TestSocketPathFallback: a too-long path moves to a private directory
// under TMPDIR, and a directory there that is not private is refused.
func TestSocketPathFallback(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	short := t.TempDir()
	if p, err := socketPath(short, os.Getuid()); err != nil || p != filepath.Join(short, "state.sock") {
		t.Fatalf("short dir: %q, %v", p, err)
	}
	long := filepath.Join(short, strings.Repeat("x", 120))
	p, err := socketPath(long, os.Getuid())
	if err != nil || !strings.HasPrefix(p, tmp) || len(p) > sunPathMax {
		t.Fatalf("long dir: %q, %v", p, err)
	}
	if again, _ := socketPath(long, os.Getuid()); again != p {
		t.Fatalf("not stable: %q, %q", p, again)
	}
	if other, _ := socketPath(long+"2", os.Getuid()); other == p {
		t.Fatal("two dirs share a socket")
	}
	if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := socketPath(long, os.Getuid()); err == nil {
		t.Fatal("a socket dir readable by others was accepted")
	}
}
