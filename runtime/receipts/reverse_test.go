package receipts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/policy"
)

// allNewestFirst pages through everything matching f, n at a time.
func allNewestFirst(t *testing.T, rd Reader, f Filter, n int) []Entry {
	t.Helper()
	var out []Entry
	var at Position
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatal("paging does not end")
		}
		page, next, err := rd.Newest(context.Background(), f, at, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > n {
			t.Fatalf("page of %d, asked %d", len(page), n)
		}
		out = append(out, page...)
		if next.Day.IsZero() {
			return out
		}
		at = next
	}
}

func TestNewestPagesEverythingOnce(t *testing.T) {
	dir := writeFixture(t)
	rd := Reader{Dir: dir}
	for _, f := range []Filter{{}, {Sub: "alice"}, {Result: "deny"}, {ToolID: "github:*"}, {Sub: "nobody"},
		{From: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}} {
		var want []Receipt
		if err := rd.Query(context.Background(), f, func(r Receipt) error { want = append(want, r); return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Reverse(want)
		for _, n := range []int{1, 2, 3, 5, 100} {
			got := allNewestFirst(t, rd, f, n)
			if len(got) != len(want) {
				t.Fatalf("%+v by %d: %d receipts, want %d", f, n, len(got), len(want))
			}
			for i := range got {
				if got[i].ReceiptID != want[i].ReceiptID {
					t.Fatalf("%+v by %d: #%d is %s, want %s", f, n, i, got[i].ReceiptID, want[i].ReceiptID)
				}
				// Every entry's position reads back as itself.
				r, err := rd.At(got[i].At)
				if err != nil || r.ReceiptID != got[i].ReceiptID {
					t.Fatalf("At(%v) = %v, %v", got[i].At, r.ReceiptID, err)
				}
				p, err := ParsePosition(got[i].At.String())
				if err != nil || p != got[i].At {
					t.Fatalf("position %v does not round-trip: %v %v", got[i].At, p, err)
				}
			}
		}
	}
}

func TestNewestLongFileAndPartialLine(t *testing.T) {
	dir := t.TempDir()
	c := newTestClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	w, _ := NewWriter(WriterOptions{Dir: dir, Now: c.Now})
	const total = 3000 // several backward blocks
	for i := range total {
		r := sample(c, "alice", "github:create_issue#34afee88", policy.EffectAllow)
		r.Outcome.Message = strings.Repeat("m", i%200)
		w.Emit(r)
		c.Advance(time.Millisecond)
	}
	_ = w.Close()
	path := filepath.Join(dir, "receipts-2026-03-01.jsonl")
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"receipt_version":1,"ts":"2026-03-01T`) // being written
	f.Close()
	rd := Reader{Dir: dir}
	got := allNewestFirst(t, rd, Filter{}, 64)
	if len(got) != total {
		t.Fatalf("%d receipts, want %d", len(got), total)
	}
	for i := 1; i < len(got); i++ {
		if got[i].TS.After(got[i-1].TS) {
			t.Fatalf("not newest first at %d", i)
		}
	}
}

func TestPositionRefusals(t *testing.T) {
	dir := writeFixture(t)
	rd := Reader{Dir: dir}
	for _, s := range []string{"", "2026-03-01", "2026-03-01:", "2026-03-01:-1", "2026-03-01:01", "x:1", "2026-13-01:0",
		"2026-03-01:99999999999999999999", strings.Repeat("9", 50)} {
		if _, err := ParsePosition(s); !errors.Is(err, ErrBadPosition) {
			t.Errorf("ParsePosition(%q) = %v", s, err)
		}
	}
	// Not the start of a line, past the end, a missing day.
	for _, p := range []Position{{Day: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Offset: 3},
		{Day: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Offset: 1 << 40},
		{Day: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), Offset: 0}} {
		if _, err := rd.At(p); err == nil {
			t.Errorf("At(%v) read a receipt", p)
		}
	}
}

func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"2026-03-01:0", "2026-03-01:123", "x", "2026-03-01:-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			return
		}
		if q, err := ParsePosition(p.String()); err != nil || q != p {
			t.Fatalf("%q -> %v does not round-trip (%v, %v)", s, p, q, err)
		}
	})
}

// BenchmarkNewest reads pages of a day of 100,000 receipts: the first
// page, a page deep in the day, and a filter that matches one receipt in
// a thousand (the operator console's receipts page).
func BenchmarkNewest(b *testing.B) {
	dir := b.TempDir()
	c := newTestClock(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	w, _ := NewWriter(WriterOptions{Dir: dir, Now: c.Now, QueueSize: 1 << 17})
	const total = 100_000
	for i := range total {
		who := "alice"
		if i%1000 == 0 {
			who = "mallory"
		}
		w.Emit(sample(c, who, "github:create_issue#34afee88", policy.EffectAllow))
		c.Advance(500 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	rd := Reader{Dir: dir}
	ctx := context.Background()
	_, mid, err := rd.Newest(ctx, Filter{}, Position{}, total/2)
	if err != nil || mid.Day.IsZero() {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name   string
		f      Filter
		before Position
	}{
		{"first-page", Filter{}, Position{}},
		{"deep-page", Filter{}, mid},
		{"rare-filter", Filter{Sub: "mallory"}, Position{}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				page, _, err := rd.Newest(ctx, bc.f, bc.before, 50)
				if err != nil || len(page) != 50 {
					b.Fatal(err, len(page))
				}
			}
		})
	}
}
