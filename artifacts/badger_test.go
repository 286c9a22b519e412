package artifacts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

func TestPutReadRoundTrip(t *testing.T) {
	s, clk := newMemStore(t, nil)
	ctx := context.Background()
	sizes := []int{0, 1, testChunk - 1, testChunk, testChunk + 1, 3*testChunk + 5, 40 * testChunk}
	for i, size := range sizes {
		for _, body := range []bool{false, true} {
			name := map[bool]string{false: "data", true: "body"}[body]
			t.Run(name+"/"+strconv.Itoa(size), func(t *testing.T) {
				want := content(uint64(i*2+map[bool]int{false: 0, true: 1}[body]), size)
				in := PutInput{MediaType: "application/json", Label: "result of x"}
				if body {
					in.Body, in.Size = iotest.OneByteReader(bytes.NewReader(want)), int64(size)
				} else {
					in.Data = want
				}
				m, err := s.Put(ctx, "alice", in)
				if err != nil {
					t.Fatalf("Put: %v", err)
				}
				if err := ValidateHandle(m.Handle); err != nil {
					t.Fatalf("handle %q: %v", m.Handle, err)
				}
				wantMeta := Meta{
					Handle: m.Handle, Owner: "alice", MediaType: "application/json", SizeBytes: int64(size),
					Label: "result of x", ContentHash: sha(want), CreatedAt: clk.Now(), ExpiresAt: clk.Now().Add(DefaultTTL),
				}
				if m != wantMeta {
					t.Fatalf("Put meta = %+v\nwant %+v", m, wantMeta)
				}
				st, err := s.Stat(ctx, "alice", m.Handle)
				if err != nil || st != m {
					t.Fatalf("Stat = %+v, %v; want %+v", st, err, m)
				}
				mustReadAll(t, s, "alice", m.Handle, want)
				// Slices at and around every chunk boundary.
				for _, r := range [][2]int64{{0, 0}, {0, 1}, {0, int64(size)}, {testChunk - 1, 2}, {testChunk, testChunk}, {int64(size) / 2, 3 * testChunk}, {int64(size), 10}} {
					if r[0] > int64(size) {
						continue
					}
					got, err := s.ReadAt(ctx, "alice", m.Handle, r[0], r[1])
					if err != nil {
						t.Fatalf("ReadAt(%d,%d): %v", r[0], r[1], err)
					}
					end := min(r[0]+r[1], int64(size))
					if !bytes.Equal(got, want[r[0]:end]) {
						t.Fatalf("ReadAt(%d,%d) = %d bytes, want %d", r[0], r[1], len(got), end-r[0])
					}
				}
			})
		}
	}
	checkInvariants(t, s)
}

func TestMetaJSON(t *testing.T) {
	m := Meta{Handle: "art_x", Owner: "secret-principal", MediaType: "text/plain", SizeBytes: 3, ContentHash: "ab"}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "secret-principal") {
		t.Fatalf("owner serialised: %s", b)
	}
	for _, k := range []string{`"handle"`, `"media_type"`, `"size_bytes"`, `"content_hash"`, `"created_at"`, `"expires_at"`} {
		if !strings.Contains(string(b), k) {
			t.Fatalf("%s missing from %s", k, b)
		}
	}
}

func TestBadInput(t *testing.T) {
	s, _ := newMemStore(t, nil)
	ctx := context.Background()
	m := mustPut(t, s, "alice", content(1, 3000))
	unknown := newHandle()
	tests := []struct {
		name string
		call func() error
		want error
	}{
		{"put empty owner", func() error { _, err := s.Put(ctx, "", PutInput{Data: []byte("x")}); return err }, ErrInvalid},
		{"put long owner", func() error {
			_, err := s.Put(ctx, strings.Repeat("o", MaxOwnerBytes+1), PutInput{Data: []byte("x")})
			return err
		}, ErrInvalid},
		{"put data and body", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Data: []byte("x"), Body: strings.NewReader("x"), Size: 1})
			return err
		}, ErrInvalid},
		{"put negative size", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Body: strings.NewReader("x"), Size: -1})
			return err
		}, ErrInvalid},
		{"put short body small", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Body: strings.NewReader("xy"), Size: 3})
			return err
		}, ErrInvalid},
		{"put long body small", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Body: strings.NewReader("xyzw"), Size: 3})
			return err
		}, ErrInvalid},
		{"put short body chunked", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Body: bytes.NewReader(make([]byte, 3*testChunk)), Size: 3*testChunk + 1})
			return err
		}, ErrInvalid},
		{"put long body chunked", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Body: bytes.NewReader(make([]byte, 3*testChunk+1)), Size: 3 * testChunk})
			return err
		}, ErrInvalid},
		{"put failing body", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Body: iotest.ErrReader(io.ErrUnexpectedEOF), Size: 5 * testChunk})
			return err
		}, ErrInvalid},
		{"put long media type", func() error {
			_, err := s.Put(ctx, "alice", PutInput{MediaType: strings.Repeat("m", MaxMediaTypeBytes+1)})
			return err
		}, ErrInvalid},
		{"put control in media type", func() error {
			_, err := s.Put(ctx, "alice", PutInput{MediaType: "text/plain\nX-Evil: 1"})
			return err
		}, ErrInvalid},
		{"put long label", func() error {
			_, err := s.Put(ctx, "alice", PutInput{Label: strings.Repeat("l", MaxLabelBytes+1)})
			return err
		}, ErrInvalid},
		{"stat empty owner", func() error { _, err := s.Stat(ctx, "", m.Handle); return err }, ErrInvalid},
		{"stat malformed", func() error { _, err := s.Stat(ctx, "alice", "art_nope"); return err }, ErrInvalid},
		{"stat unknown", func() error { _, err := s.Stat(ctx, "alice", unknown); return err }, ErrNotFound},
		{"read malformed", func() error { _, err := s.ReadAt(ctx, "alice", "../etc/passwd", 0, 1); return err }, ErrInvalid},
		{"read unknown", func() error { _, err := s.ReadAt(ctx, "alice", unknown, 0, 1); return err }, ErrNotFound},
		{"read negative offset", func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, -1, 1); return err }, ErrInvalid},
		{"read negative length", func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 0, -1); return err }, ErrInvalid},
		{"read too long", func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 0, MaxReadBytes+1); return err }, ErrInvalid},
		{"read past end", func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 3001, 1); return err }, ErrOutOfRange},
		{"read far past end", func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 1<<62, 1); return err }, ErrOutOfRange},
		{"open empty owner", func() error { _, err := s.Open(ctx, "", m.Handle); return err }, ErrInvalid},
		{"open malformed", func() error { _, err := s.Open(ctx, "alice", ""); return err }, ErrInvalid},
		{"open unknown", func() error { _, err := s.Open(ctx, "alice", unknown); return err }, ErrNotFound},
		{"delete malformed", func() error { return s.Delete(ctx, "alice", "art_"+strings.Repeat("A", 26)) }, ErrInvalid},
		{"delete unknown", func() error { return s.Delete(ctx, "alice", unknown) }, ErrNotFound},
		{"delete empty owner", func() error { return s.Delete(ctx, "", m.Handle) }, ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// Nothing above disturbed the one good artifact or left anything behind.
	mustReadAll(t, s, "alice", m.Handle, content(1, 3000))
	st := checkInvariants(t, s)
	if len(st.metas) != 1 || s.Usage() != 3000 {
		t.Fatalf("after bad input: %d artifacts, usage %d", len(st.metas), s.Usage())
	}
}

func TestReadAtEnd(t *testing.T) {
	s, _ := newMemStore(t, nil)
	ctx := context.Background()
	want := content(2, 2*testChunk+10)
	m := mustPut(t, s, "alice", want)
	empty := mustPut(t, s, "alice", nil)
	tests := []struct {
		name      string
		handle    string
		off, n    int64
		wantBytes []byte
	}{
		{"exact end", m.Handle, int64(len(want)), 5, []byte{}},
		{"straddles end", m.Handle, int64(len(want)) - 3, 100, want[len(want)-3:]},
		{"last chunk only", m.Handle, 2 * testChunk, testChunk, want[2*testChunk:]},
		{"zero length", m.Handle, 7, 0, []byte{}},
		{"empty artifact", empty.Handle, 0, 10, []byte{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.ReadAt(ctx, "alice", tc.handle, tc.off, tc.n)
			if err != nil || !bytes.Equal(got, tc.wantBytes) || got == nil {
				t.Fatalf("ReadAt = %d bytes (nil=%v), %v; want %d bytes", len(got), got == nil, err, len(tc.wantBytes))
			}
		})
	}
	if _, err := s.ReadAt(ctx, "alice", empty.Handle, 1, 1); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("ReadAt past the end of an empty artifact: %v", err)
	}
}

// TestOwnerIsolation checks that another principal's handle is indistinguishable
// from a missing one: same sentinel, same message, through every method.
func TestOwnerIsolation(t *testing.T) {
	s, _ := newMemStore(t, nil)
	ctx := context.Background()
	want := content(3, 5000)
	m := mustPut(t, s, "alice", want)
	missing := newHandle()
	type probe func(owner, handle string) error
	probes := map[string]probe{
		"stat":   func(o, h string) error { _, err := s.Stat(ctx, o, h); return err },
		"readat": func(o, h string) error { _, err := s.ReadAt(ctx, o, h, 0, 10); return err },
		"open":   func(o, h string) error { _, err := s.Open(ctx, o, h); return err },
		"delete": func(o, h string) error { return s.Delete(ctx, o, h) },
	}
	for name, p := range probes {
		t.Run(name, func(t *testing.T) {
			foreign := p("mallory", m.Handle)
			absent := p("mallory", missing)
			absentOwn := p("alice", missing)
			if foreign == nil || !errors.Is(foreign, ErrNotFound) {
				t.Fatalf("foreign handle: %v", foreign)
			}
			if foreign.Error() != absent.Error() || foreign.Error() != absentOwn.Error() {
				t.Fatalf("distinguishable: foreign %q, absent %q, absent own %q", foreign, absent, absentOwn)
			}
			if foreign != absent { // the very same error value
				t.Fatalf("foreign and absent handles return different error values")
			}
		})
	}
	// An owner key is the whole principal string, not a prefix of it.
	if _, err := s.Stat(ctx, "alic", m.Handle); !errors.Is(err, ErrNotFound) {
		t.Fatalf("prefix owner: %v", err)
	}
	if _, err := s.Stat(ctx, "alice\x00", m.Handle); !errors.Is(err, ErrNotFound) {
		t.Fatalf("suffixed owner: %v", err)
	}
	mustReadAll(t, s, "alice", m.Handle, want) // mallory's Delete did nothing
}

func TestDedup(t *testing.T) {
	s, _ := newMemStore(t, nil)
	ctx := context.Background()
	big := content(4, 5*testChunk+3)
	small := content(5, 100)
	a1 := mustPut(t, s, "alice", big)
	a2 := mustPut(t, s, "alice", big)
	b1, err := s.Put(ctx, "bob", PutInput{Body: bytes.NewReader(big), Size: int64(len(big))}) // staged path, dedup at commit
	if err != nil {
		t.Fatal(err)
	}
	s1 := mustPut(t, s, "alice", small)
	s2 := mustPut(t, s, "bob", small)
	if a1.Handle == a2.Handle || a1.Handle == b1.Handle || s1.Handle == s2.Handle {
		t.Fatal("handles are not per Put")
	}
	st := checkInvariants(t, s)
	if len(st.blobs) != 2 || len(st.chunks) != 2 || len(st.metas) != 5 {
		t.Fatalf("blobs=%d chunk sets=%d metas=%d, want 2, 2, 5", len(st.blobs), len(st.chunks), len(st.metas))
	}
	if got, want := s.Usage(), int64(len(big)+len(small)); got != want {
		t.Fatalf("usage %d, want %d (content counted once)", got, want)
	}
	// Deleting handles one by one never breaks the others.
	steps := []struct {
		owner string
		m     Meta
	}{{"alice", a1}, {"bob", b1}, {"alice", s1}}
	for _, step := range steps {
		if err := s.Delete(ctx, step.owner, step.m.Handle); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if err := s.Delete(ctx, step.owner, step.m.Handle); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second Delete: %v", err)
		}
		checkInvariants(t, s)
	}
	mustReadAll(t, s, "alice", a2.Handle, big)
	mustReadAll(t, s, "bob", s2.Handle, small)
	if err := s.Delete(ctx, "alice", a2.Handle); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "bob", s2.Handle); err != nil {
		t.Fatal(err)
	}
	st = checkInvariants(t, s)
	if len(st.blobs)+len(st.chunks)+len(st.metas)+len(st.expiry) != 0 || s.Usage() != 0 {
		t.Fatalf("not empty after deleting everything: %+v usage %d", st, s.Usage())
	}
}

func TestTTL(t *testing.T) {
	s, clk := newMemStore(t, func(o *Options) { o.TTL = time.Hour })
	ctx := context.Background()
	want := content(6, 4*testChunk)
	m := mustPut(t, s, "alice", want)
	clk.Add(30 * time.Minute)
	m2 := mustPut(t, s, "alice", content(7, 10))
	if !m.ExpiresAt.Equal(m.CreatedAt.Add(time.Hour)) {
		t.Fatalf("ExpiresAt %v, CreatedAt %v", m.ExpiresAt, m.CreatedAt)
	}
	clk.Add(30*time.Minute - time.Nanosecond)
	mustReadAll(t, s, "alice", m.Handle, want)
	rc, err := s.Open(ctx, "alice", m.Handle) // opened just before expiry
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Nanosecond)
	for name, err := range map[string]error{
		"stat":   func() error { _, err := s.Stat(ctx, "alice", m.Handle); return err }(),
		"readat": func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 0, 1); return err }(),
		"open":   func() error { _, err := s.Open(ctx, "alice", m.Handle); return err }(),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s after expiry: %v", name, err)
		}
	}
	n, err := s.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	// The stream opened before expiry still completes; then the chunks go.
	got, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("stream across sweep: %d bytes, %v", len(got), err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	st := checkInvariants(t, s)
	if len(st.metas) != 1 || s.Usage() != 10 {
		t.Fatalf("after sweep: %d artifacts, usage %d", len(st.metas), s.Usage())
	}
	if _, err := s.Stat(ctx, "alice", m2.Handle); err != nil {
		t.Fatalf("younger artifact: %v", err)
	}
	// Delete of an expired but unswept artifact removes it and says not found.
	clk.Add(time.Hour)
	if err := s.Delete(ctx, "alice", m2.Handle); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete expired: %v", err)
	}
	if st := checkInvariants(t, s); len(st.metas) != 0 || s.Usage() != 0 {
		t.Fatalf("expired artifact not removed by Delete")
	}
}

func TestQuotaEviction(t *testing.T) {
	s, clk := newMemStore(t, func(o *Options) { o.MaxBytes = 10 * testChunk })
	ctx := context.Background()
	var metas []Meta
	for i := range 3 {
		metas = append(metas, mustPut(t, s, "alice", content(uint64(10+i), 4*testChunk)))
		clk.Add(time.Second)
	}
	if _, err := s.Stat(ctx, "alice", metas[0].Handle); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oldest not evicted: %v", err)
	}
	for _, m := range metas[1:] {
		if _, err := s.Stat(ctx, "alice", m.Handle); err != nil {
			t.Fatalf("newer artifact evicted: %v", err)
		}
	}
	if s.Usage() != 8*testChunk {
		t.Fatalf("usage %d", s.Usage())
	}
	checkInvariants(t, s)

	// Too large for the quota itself: refused before anything is written.
	before := scanState(t, s)
	for name, in := range map[string]PutInput{
		"data": {Data: make([]byte, 10*testChunk+1)},
		"body": {Body: iotest.ErrReader(errors.New("must not be read")), Size: 10*testChunk + 1},
	} {
		_, err := s.Put(ctx, "alice", in)
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%s: err = %v, want ErrTooLarge", name, err)
		}
	}
	after := checkInvariants(t, s)
	if len(after.metas) != len(before.metas) || len(after.chunks) != len(before.chunks) || s.Usage() != 8*testChunk {
		t.Fatal("a refused Put changed the store")
	}

	// Exactly the quota fits (evicting everything else); a shared blob is
	// counted once, so evicting one of its handles frees nothing.
	full := content(20, 10*testChunk)
	mustPut(t, s, "alice", full)
	if s.Usage() != 10*testChunk {
		t.Fatalf("usage %d after filling", s.Usage())
	}
	mustPut(t, s, "bob", full)
	if s.Usage() != 10*testChunk {
		t.Fatalf("dedup put changed usage to %d", s.Usage())
	}
	m := mustPut(t, s, "carol", content(21, 100)) // evicts both handles of full
	if s.Usage() != 100 {
		t.Fatalf("usage %d", s.Usage())
	}
	mustReadAll(t, s, "carol", m.Handle, content(21, 100))
	checkInvariants(t, s)
}

func TestQuotaAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock()
	opts := Options{Dir: dir, SweepInterval: -1, Now: clk.Now, MaxBytes: 20 * testChunk, chunkSize: testChunk}
	s, err := OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var metas []Meta
	for i := range 4 {
		metas = append(metas, mustPut(t, s, "alice", content(uint64(30+i), 4*testChunk)))
		clk.Add(time.Second)
	}
	mustPut(t, s, "bob", content(30, 4*testChunk)) // duplicate of metas[0]
	if err := s.Delete(ctx, "alice", metas[1].Handle); err != nil {
		t.Fatal(err)
	}
	if s.Usage() != 12*testChunk {
		t.Fatalf("usage before restart %d", s.Usage())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Usage() != 12*testChunk {
		t.Fatalf("usage after restart %d, want %d", s.Usage(), 12*testChunk)
	}
	checkInvariants(t, s)
	mustReadAll(t, s, "alice", metas[3].Handle, content(33, 4*testChunk))
	// 12 + 10 > 20: evicting alice's metas[0] frees nothing (bob shares it); the
	// next oldest, metas[2], goes.
	clk.Add(time.Second)
	mustPut(t, s, "alice", content(40, 10*testChunk))
	if _, err := s.Stat(ctx, "alice", metas[2].Handle); !errors.Is(err, ErrNotFound) {
		t.Fatalf("metas[2] survived: %v", err)
	}
	if _, err := s.Stat(ctx, "alice", metas[3].Handle); err != nil {
		t.Fatalf("metas[3] evicted: %v", err)
	}
	if s.Usage() != 18*testChunk {
		t.Fatalf("usage %d, want %d", s.Usage(), 18*testChunk)
	}
	checkInvariants(t, s)
}

func TestStreamSurvivesDelete(t *testing.T) {
	s, _ := newMemStore(t, func(o *Options) { o.MaxBytes = 8 * testChunk })
	ctx := context.Background()
	want := content(50, 6*testChunk+1)
	m := mustPut(t, s, "alice", want)
	rc, err := s.Open(ctx, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 10)
	if _, err := io.ReadFull(rc, first); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "alice", m.Handle); err != nil {
		t.Fatal(err)
	}
	// Same content again while the doomed blob is held: a fresh blob is written.
	m2 := mustPut(t, s, "alice", want)
	if st := scanState(t, s); len(st.chunks) != 2 || len(st.garbage) != 1 {
		t.Fatalf("held blob: %d chunk sets, %d garbage marks; want 2, 1", len(st.chunks), len(st.garbage))
	}
	rest, err := io.ReadAll(rc)
	if err != nil || !bytes.Equal(append(first, rest...), want) {
		t.Fatalf("stream after delete: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := rc.Read(first); !errors.Is(err, ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	st := checkInvariants(t, s)
	if len(st.chunks) != 1 {
		t.Fatalf("%d chunk sets after the stream closed, want 1", len(st.chunks))
	}
	mustReadAll(t, s, "alice", m2.Handle, want)
}

func TestContextCancelled(t *testing.T) {
	s, _ := newMemStore(t, nil)
	m := mustPut(t, s, "alice", content(60, 3*testChunk))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"put":    func() error { _, err := s.Put(ctx, "alice", PutInput{Data: []byte("x")}); return err },
		"stat":   func() error { _, err := s.Stat(ctx, "alice", m.Handle); return err },
		"readat": func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 0, 1); return err },
		"open":   func() error { _, err := s.Open(ctx, "alice", m.Handle); return err },
		"delete": func() error { return s.Delete(ctx, "alice", m.Handle) },
		"sweep":  func() error { _, err := s.Sweep(ctx); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", name, err)
		}
	}

	// Cancelled in the middle of a staged write: nothing is left behind.
	ctx2, cancel2 := context.WithCancel(context.Background())
	body := &cancelAfter{r: bytes.NewReader(content(61, 20*testChunk)), n: 5 * testChunk, cancel: cancel2}
	if _, err := s.Put(ctx2, "alice", PutInput{Body: body, Size: 20 * testChunk}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put cancelled mid-write: %v", err)
	}
	// And a stream stops when its context ends.
	ctx3, cancel3 := context.WithCancel(context.Background())
	rc, err := s.Open(ctx3, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	cancel3()
	if _, err := io.ReadAll(rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("stream after cancel: %v", err)
	}
	_ = rc.Close()
	st := checkInvariants(t, s)
	if len(st.metas) != 1 || s.Usage() != 3*testChunk {
		t.Fatalf("after cancellations: %d artifacts, usage %d", len(st.metas), s.Usage())
	}
}

// cancelAfter cancels a context once n bytes have been read.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	if c.n -= k; c.n <= 0 {
		c.cancel()
	}
	return k, err
}

func TestClosed(t *testing.T) {
	s, _ := newMemStore(t, nil)
	ctx := context.Background()
	m := mustPut(t, s, "alice", content(70, 3*testChunk))
	rc, err := s.Open(ctx, "alice", m.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	calls := map[string]func() error{
		"put":    func() error { _, err := s.Put(ctx, "alice", PutInput{Data: []byte("x")}); return err },
		"stat":   func() error { _, err := s.Stat(ctx, "alice", m.Handle); return err },
		"readat": func() error { _, err := s.ReadAt(ctx, "alice", m.Handle, 0, 1); return err },
		"open":   func() error { _, err := s.Open(ctx, "alice", m.Handle); return err },
		"delete": func() error { return s.Delete(ctx, "alice", m.Handle) },
		"sweep":  func() error { _, err := s.Sweep(ctx); return err },
		"stream": func() error { _, err := io.ReadAll(rc); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, ErrClosed) {
			t.Errorf("%s: %v, want ErrClosed", name, err)
		}
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("stream Close after store Close: %v", err)
	}
}

func TestOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"no dir", Options{}},
		{"dir and in-memory", Options{InMemory: true, Dir: t.TempDir()}},
		{"negative ttl", Options{InMemory: true, TTL: -time.Second}},
		{"negative quota", Options{InMemory: true, MaxBytes: -1}},
		{"chunk too big", Options{InMemory: true, chunkSize: 2 << 20}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := OpenBadger(tc.opts)
			if !errors.Is(err, ErrInvalid) {
				if s != nil {
					_ = s.Close()
				}
				t.Fatalf("OpenBadger: %v, want ErrInvalid", err)
			}
		})
	}
}

// TestRecoverGarbage simulates a crash after a staged write's chunks but before
// its commit, and after a removal's commit but before its chunks were deleted.
func TestRecoverGarbage(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, SweepInterval: -1, chunkSize: testChunk}
	s, err := OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	keep := mustPut(t, s, "alice", content(80, 3*testChunk))
	for range 2 {
		id := newBlobID()
		err := s.db.Update(func(txn *badger.Txn) error {
			if err := txn.Set(garbageKey(id), nil); err != nil {
				return err
			}
			for i := range int64(3) {
				if err := txn.Set(chunkKey(id, i), make([]byte, testChunk)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if st := scanState(t, s); len(st.garbage) != 2 || len(st.chunks) != 3 {
		t.Fatalf("setup: %d garbage, %d chunk sets", len(st.garbage), len(st.chunks))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st := checkInvariants(t, s); len(st.chunks) != 1 {
		t.Fatalf("%d chunk sets after recovery, want 1", len(st.chunks))
	}
	mustReadAll(t, s, "alice", keep.Handle, content(80, 3*testChunk))
}

func TestBackgroundSweep(t *testing.T) {
	clk := newFakeClock()
	s, err := OpenBadger(Options{InMemory: true, SweepInterval: time.Millisecond, TTL: time.Minute, Now: clk.Now, chunkSize: testChunk})
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, "alice", content(90, 2*testChunk))
	clk.Add(2 * time.Minute)
	deadline := time.Now().Add(5 * time.Second)
	for {
		// Done when the content is gone and its garbage collected (the loop
		// deletes chunks after the commit that drops the usage).
		if st := scanState(t, s); s.Usage() == 0 && len(st.chunks)+len(st.garbage) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background loop did not sweep")
		}
		time.Sleep(2 * time.Millisecond)
	}
	checkInvariants(t, s)
	if err := s.Close(); err != nil { // stops the loop
		t.Fatal(err)
	}
	select {
	case <-s.loopDone:
	default:
		t.Fatal("loop still running after Close")
	}
}

func TestBadgerLogger(t *testing.T) {
	var buf bytes.Buffer
	l := badgerLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Infof("info %d\n", 1)
	l.Debugf("debug %d\n", 2)
	l.Warningf("warn %d\n", 3)
	l.Errorf("error %d\n", 4)
	out := buf.String()
	if strings.Contains(out, "info 1") || strings.Contains(out, "debug 2") {
		t.Fatalf("info/debug not dropped: %s", out)
	}
	if !strings.Contains(out, "level=WARN msg=\"badger: warn 3\"") || !strings.Contains(out, "level=ERROR msg=\"badger: error 4\"") {
		t.Fatalf("warn/error not forwarded: %s", out)
	}
}

// TestMaintainOnDisk runs the background loop's work (sweep, then value-log GC
// after deletions) on a disk store whose chunks live in the value log, and checks
// that it logs no warning and that surviving artifacts still read back.
func TestMaintainOnDisk(t *testing.T) {
	var logs bytes.Buffer
	clk := newFakeClock()
	s, err := OpenBadger(Options{
		Dir: t.TempDir(), SweepInterval: -1, TTL: time.Hour, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var metas []Meta
	for i := range 12 {
		metas = append(metas, mustPut(t, s, "alice", content(uint64(100+i), 300<<10)))
		if i == 3 {
			clk.Add(30 * time.Minute)
		}
	}
	for _, m := range metas[4:8] {
		if err := s.Delete(ctx, "alice", m.Handle); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(45 * time.Minute) // metas[:4] expire
	s.maintain(ctx)
	if logs.Len() > 0 {
		t.Fatalf("maintenance logged: %s", logs.String())
	}
	st := checkInvariants(t, s)
	if len(st.metas) != 4 {
		t.Fatalf("%d artifacts after maintenance, want 4", len(st.metas))
	}
	for i, m := range metas[8:] {
		mustReadAll(t, s, "alice", m.Handle, content(uint64(108+i), 300<<10))
	}
}

func TestCorruptionDetected(t *testing.T) {
	s, _ := newMemStore(t, nil)
	ctx := context.Background()
	m := mustPut(t, s, "alice", content(110, 3*testChunk))
	rec := scanState(t, s).metas[string(metaKey(ownerKey("alice"), m.Handle))]
	id, err := rec.blobID()
	if err != nil {
		t.Fatal(err)
	}
	tamper := func(f func(txn *badger.Txn) error) {
		t.Helper()
		if err := s.db.Update(f); err != nil {
			t.Fatal(err)
		}
	}
	// Same length, different bytes: slices cannot tell, the stream's sha256 can.
	tamper(func(txn *badger.Txn) error { return txn.Set(chunkKey(id, 1), make([]byte, testChunk)) })
	if _, err := readAll(ctx, s, "alice", m.Handle); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("stream of altered content: %v", err)
	}
	tamper(func(txn *badger.Txn) error { return txn.Set(chunkKey(id, 1), make([]byte, 10)) })
	if _, err := s.ReadAt(ctx, "alice", m.Handle, testChunk, 5); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadAt of a short chunk: %v", err)
	}
	tamper(func(txn *badger.Txn) error { return txn.Delete(chunkKey(id, 2)) })
	if _, err := s.ReadAt(ctx, "alice", m.Handle, 2*testChunk, 5); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ReadAt of a missing chunk: %v", err)
	}
	if _, err := s.ReadAt(ctx, "alice", m.Handle, 0, 5); err != nil {
		t.Fatalf("ReadAt of an intact chunk: %v", err)
	}
}

// TestQuotaHeldByInFlightWrites checks that bytes reserved by Puts still writing
// chunks are not handed out twice.
func TestQuotaHeldByInFlightWrites(t *testing.T) {
	s, _ := newMemStore(t, func(o *Options) { o.MaxBytes = 10 * testChunk })
	m := mustPut(t, s, "alice", content(120, 2*testChunk))
	s.lockAlways()
	s.reserved = 9 * testChunk // as if a concurrent Put were staging 9 chunks
	s.unlock()
	_, err := s.Put(context.Background(), "alice", PutInput{Data: content(121, 2*testChunk)})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Put with the quota reserved: %v", err)
	}
	if _, err := s.Stat(context.Background(), "alice", m.Handle); err != nil {
		t.Fatalf("refused Put evicted anyway: %v", err)
	}
	s.lockAlways()
	s.reserved = 0
	s.unlock()
	checkInvariants(t, s)
}

// TestInMemoryLargeArtifact: an in-memory Badger has no value log and
// refuses values of 64 KiB and more, so its chunks must stay below that.
func TestInMemoryLargeArtifact(t *testing.T) {
	s, err := OpenBadger(Options{InMemory: true, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data := make([]byte, 5<<20+123)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	ctx := context.Background()
	m, err := s.Put(ctx, "p", PutInput{MediaType: "text/plain", Data: data})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadAt(ctx, "p", m.Handle, 5<<20, 200)
	if err != nil || string(got) != string(data[5<<20:]) {
		t.Fatalf("tail read = %d bytes, %v", len(got), err)
	}
}
