package firewall

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// leaves returns the pointers of all scalar leaves of a decoded JSON value.
func leaves(v any, p string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			leaves(c, jsonpointer.Child(p, k), out)
		}
	case []any:
		for i, c := range x {
			leaves(c, p+"/"+fmt.Sprint(i), out)
		}
	default:
		*out = append(*out, p)
	}
}

// lookup evaluates a pointer on a decoded value (the reference).
func lookup(v any, toks []string) (any, bool) {
	for _, t := range toks {
		switch x := v.(type) {
		case map[string]any:
			c, ok := x[t]
			if !ok {
				return nil, false
			}
			v = c
		case []any:
			i, ok := jsonpointer.ArrayIndex(t)
			if !ok || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func TestViewJSONLeaves(t *testing.T) {
	t.Parallel()
	f := newFirewall(t, nil)
	doc := genJSON(1<<20, 11)
	// Keys that need escaping, unicode and nesting.
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	m["odd/key~name"] = map[string]any{"a~1b": []any{1.5, "x", nil, true}, "": "empty key", "ü": "ünïcødé"}
	doc, _ = json.MarshalIndent(m, "", "  ")
	var ref any
	if err := json.Unmarshal(doc, &ref); err != nil {
		t.Fatal(err)
	}
	// As a text part (pretty-printed) it is sniffed as JSON too.
	o := mustApply(t, f, "alice", textResult(string(doc)))
	a := o.Artifacts[0]
	if a.MediaType != MediaJSON {
		t.Fatalf("media type %s", a.MediaType)
	}
	for _, want := range []string{"shape: object, 5 keys, nesting depth", "- items: array of", "objects; first: {", "total: number", "odd/key~name: object, 3 keys"} {
		if !strings.Contains(o.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, o.Summary)
		}
	}
	var ptrs []string
	leaves(ref, "", &ptrs)
	r := rand.New(rand.NewPCG(1, 2))
	picks := []string{"/odd~1key~0name/a~01b/0", "/odd~1key~0name/", "/odd~1key~0name/ü", "/items/0/tags/1", "/meta/version"}
	for range 30 {
		picks = append(picks, ptrs[r.IntN(len(ptrs))])
	}
	for _, p := range picks {
		toks, err := parsePointer(p)
		if err != nil {
			t.Fatal(err)
		}
		want, ok := lookup(ref, toks)
		if !ok {
			t.Fatalf("bad test pointer %s", p)
		}
		v := mustView(t, f, "alice", a.Handle, `{"type":"json_pointer","pointer":`+marshal(t, p)+`}`)
		var got any
		if err := json.Unmarshal([]byte(v.Text), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("pointer %s = %q (%v), want %v", p, v.Text, err, want)
		}
		if v.Truncated || v.Next != nil {
			t.Errorf("pointer %s: truncated %v next %s", p, v.Truncated, v.Next)
		}
	}
	// Whole subtrees too, with the budget cutting large ones.
	v := mustView(t, f, "alice", a.Handle, `{"type":"json_pointer","pointer":"/items/7"}`)
	var item map[string]any
	if err := json.Unmarshal([]byte(v.Text), &item); err != nil || item["id"] != float64(8) {
		t.Errorf("/items/7 = %q", v.Text)
	}
	v = mustView(t, f, "alice", a.Handle, `{"type":"json_pointer","pointer":"/items"}`)
	if !v.Truncated || v.Next == nil || !strings.Contains(v.What, "narrow it with json_pointer /items/0") || v.Tokens > DefaultMaxViewTokens {
		t.Errorf("/items: truncated %v next %s what %q tokens %d", v.Truncated, v.Next, v.What, v.Tokens)
	}
	// Following Next continues the raw bytes exactly.
	sel, _ := ParseSelector(v.Next)
	nxt, err := f.View(context.Background(), "alice", a.Handle, sel)
	if err != nil {
		t.Fatal(err)
	}
	idx := strings.Index(string(doc), `"items": [`) + len(`"items": `)
	if want := string(doc[idx:]); !strings.HasPrefix(want, v.Text+nxt.Text) {
		t.Errorf("json_pointer + bytes do not continue the stored value")
	}
}

func TestViewCSVQuotedNewlines(t *testing.T) {
	f := newFirewall(t, nil)
	var b strings.Builder
	w := csv.NewWriter(&b)
	recs := [][]string{{"id", "name", "comment", "amount"}}
	for i := 1; i <= 2500; i++ {
		c := fmt.Sprintf("plain comment %d", i)
		switch i % 7 {
		case 0:
			c = fmt.Sprintf("line one of %d\nline two, with comma\nline \"three\"", i)
		case 3:
			c = "quoted \"word\", and more"
		}
		recs = append(recs, []string{fmt.Sprint(i), fmt.Sprintf("name-%d", i), c, fmt.Sprintf("%d.%02d", i*3, i%100)})
	}
	if err := w.WriteAll(recs); err != nil {
		t.Fatal(err)
	}
	o := mustApply(t, f, "alice", textResult(b.String()))
	a := o.Artifacts[0]
	facts := strings.Join(o.Facts, "\n")
	if a.MediaType != MediaCSV || !strings.Contains(facts, "4 columns, 2,500 data rows") || !strings.Contains(facts, "357 rows have line breaks inside quoted fields") {
		t.Fatalf("artifact %+v facts %q", a, o.Facts)
	}
	if !strings.Contains(o.Summary, "header: id,name,comment,amount") {
		t.Errorf("summary:\n%s", o.Summary)
	}
	check := func(sel string, from, to int) ViewResult {
		t.Helper()
		v := mustView(t, f, "alice", a.Handle, sel)
		got, err := csv.NewReader(strings.NewReader(v.Text)).ReadAll()
		if err != nil {
			t.Fatalf("%s: answer does not parse as CSV: %v\n%s", sel, err, v.Text)
		}
		want := append([][]string{recs[0]}, recs[from:to+1]...)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
		return v
	}
	check(`{"type":"rows","start":6,"end":8}`, 6, 8)
	check(`{"type":"rows","start":14,"end":14}`, 14, 14)
	v := check(`{"type":"rows","start":-3}`, 2498, 2500)
	if v.Next != nil || !strings.Contains(v.What, "2,498-2,500 of 2,500") {
		t.Errorf("tail: what %q next %s", v.What, v.Next)
	}
	// Paging from row 1 with Next covers rows 1..100 in order.
	sel, _ := ParseSelector(json.RawMessage(`{"type":"rows","start":1,"end":10}`))
	row := 1
	for row <= 100 {
		v, err := f.View(context.Background(), "alice", a.Handle, sel)
		if err != nil {
			t.Fatal(err)
		}
		got, err := csv.NewReader(strings.NewReader(v.Text)).ReadAll()
		if err != nil || len(got) < 2 || !reflect.DeepEqual(got[0], recs[0]) {
			t.Fatalf("page at %d: %v %q", row, err, v.Text)
		}
		for _, rec := range got[1:] {
			if !reflect.DeepEqual(rec, recs[row]) {
				t.Fatalf("row %d = %q, want %q", row, rec, recs[row])
			}
			row++
		}
		if sel, err = ParseSelector(v.Next); err != nil {
			t.Fatal(err)
		}
	}
	// lines sees physical lines, rows sees records.
	l := mustView(t, f, "alice", a.Handle, `{"type":"lines","start":11,"end":11}`)
	if l.Text != "8,name-8,plain comment 8,24.08\n" {
		t.Errorf("line 11 = %q", l.Text)
	}
}

func TestViewOwnership(t *testing.T) {
	f := newFirewall(t, nil)
	o := mustApply(t, f, "alice", textResult(genLog(40<<10, 2)))
	h := o.Artifacts[0].Handle
	ctx := context.Background()
	sel := Selector{Type: SelHead}
	if _, err := f.View(ctx, "alice", h, sel); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, c := range []struct{ owner, handle string }{
		{"bob", h}, // another owner's handle
		{"alice", "art_aaaaaaaaaaaaaaaaaaaaaaaaaa"}, // unknown handle
		{"alice", "not-a-handle"},                   // malformed handle
	} {
		_, err := f.View(ctx, c.owner, c.handle, sel)
		if !errors.Is(err, artifacts.ErrNotFound) || !errors.Is(err, ErrViewFailed) {
			t.Errorf("%s/%s: %v, want not found", c.owner, c.handle, err)
		}
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) != 3 || msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Errorf("not-found errors differ: %q", msgs)
	}
	if _, err := f.View(ctx, "", h, sel); !errors.Is(err, ErrBadInput) {
		t.Errorf("empty owner: %v", err)
	}
}

// viewFixture stores one artifact of each kind for alice.
type viewFixture struct {
	f                          *Firewall
	log, csv, json, bin, jsonl string
	logText, csvText, jsonText string
}

func newViewFixture(t testing.TB, mod func(*Options)) *viewFixture {
	t.Helper()
	f := newFirewall(t, mod)
	fx := &viewFixture{f: f}
	fx.logText = genLog(40<<10, 3) + "ünïcødé ✓ line\nlast line without newline"
	fx.csvText = "a,b,c\n1,\"two\nlines\",3\n4,5,6\n7,8,9\n" + strings.Repeat("10,11,12\n", 400)
	fx.jsonText = string(genJSON(20<<10, 3))
	put := func(data, media string) string {
		m, err := f.store.Put(context.Background(), "alice", artifacts.PutInput{MediaType: media, Data: []byte(data)})
		if err != nil {
			t.Fatal(err)
		}
		return m.Handle
	}
	fx.log = put(fx.logText, MediaText)
	fx.csv = put(fx.csvText, MediaCSV)
	fx.json = put(fx.jsonText, MediaJSON)
	fx.bin = put("\x00\x01\x02binary\xff", "application/octet-stream")
	fx.jsonl = put("{\"a\":1}\n{\"a\":2}\n", MediaJSONL)
	return fx
}

func TestViewErrors(t *testing.T) {
	fx := newViewFixture(t, nil)
	ctx := context.Background()
	tests := []struct {
		name, handle, sel, want string
	}{
		{"lines past end", fx.log, `{"type":"lines","start":100000}`, "past the last line"},
		{"bytes past end", fx.log, `{"type":"bytes","offset":99999999}`, "past the end"},
		{"rows past end", fx.csv, `{"type":"rows","start":5000}`, "past the last row"},
		{"negative range empty", fx.log, `{"type":"lines","start":-1,"end":-5}`, "end (-5) before start (-1)"},
		{"pointer to nothing", fx.json, `{"type":"json_pointer","pointer":"/nope"}`, `no key "nope"`},
		{"index out of range", fx.json, `{"type":"json_pointer","pointer":"/items/999999"}`, "out of range at /items"},
		{"dash index", fx.json, `{"type":"json_pointer","pointer":"/items/-"}`, `"-" names the element after the last`},
		{"non-index", fx.json, `{"type":"json_pointer","pointer":"/items/01"}`, "not an array index"},
		{"into scalar", fx.json, `{"type":"json_pointer","pointer":"/total/x"}`, "is a number; it has no member"},
		{"json_keys on array", fx.json, `{"type":"json_keys","keys":["a"],"pointer":"/items"}`, "is array, not an object"},
		{"json_keys none", fx.json, `{"type":"json_keys","keys":["zzz"]}`, "none of the keys exist"},
		{"json_pointer on csv", fx.csv, `{"type":"json_pointer","pointer":"/0"}`, "does not fit media type text/csv"},
		{"rows on text", fx.log, `{"type":"rows","start":1}`, "rows does not fit media type text/plain"},
		{"grep on binary", fx.bin, `{"type":"grep","pattern":"x"}`, "does not fit media type application/octet-stream"},
		{"lines on binary", fx.bin, `{"type":"lines"}`, "binary"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := ParseSelector(json.RawMessage(tc.sel))
			if err == nil {
				_, err = fx.f.View(ctx, "alice", tc.handle, sel)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if !errors.Is(err, ErrViewFailed) && !errors.Is(err, ErrBadSelector) {
				t.Errorf("err %v wraps neither ErrViewFailed nor ErrBadSelector", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("multi-line error %q", err)
			}
		})
	}
	// A hand-built invalid selector is caught by View.
	if _, err := fx.f.View(ctx, "alice", fx.log, Selector{Type: SelGrep, Pattern: "("}); !errors.Is(err, ErrViewFailed) || !errors.Is(err, ErrBadSelector) {
		t.Errorf("bad regexp: %v", err)
	}
}

// TestViewBounded runs many selectors with a small budget: every answer is
// bounded, and Next always parses and makes progress.
func TestViewBounded(t *testing.T) {
	const budget = 60
	fx := newViewFixture(t, func(o *Options) { o.MaxViewTokens = budget })
	c := counter(t)
	cases := []struct{ handle, sel string }{
		{fx.log, `{"type":"head"}`},
		{fx.log, `{"type":"head","chars":5}`},
		{fx.log, `{"type":"lines","start":2,"end":50}`},
		{fx.log, `{"type":"lines","start":-3}`},
		{fx.log, `{"type":"bytes","offset":7,"length":100000}`},
		{fx.log, `{"type":"grep","pattern":"(?i)warn|error","max_matches":200}`},
		{fx.log, `{"type":"grep","pattern":"ünï"}`},
		{fx.csv, `{"type":"rows","start":1,"end":400}`},
		{fx.csv, `{"type":"rows","start":-2}`},
		{fx.json, `{"type":"json_pointer","pointer":""}`},
		{fx.json, `{"type":"json_keys","keys":["items","total"]}`},
		{fx.json, `{"type":"json_keys","keys":["total","meta","next_cursor"]}`},
		{fx.bin, `{"type":"bytes","offset":2}`},
		{fx.jsonl, `{"type":"rows"}`},
	}
	for _, tc := range cases {
		t.Run(tc.sel, func(t *testing.T) {
			sel, err := ParseSelector(json.RawMessage(tc.sel))
			if err != nil {
				t.Fatal(err)
			}
			for page := 0; page < 4; page++ {
				v, err := fx.f.View(context.Background(), "alice", tc.handle, sel)
				if err != nil {
					t.Fatalf("page %d (%s): %v", page, marshal(t, sel), err)
				}
				if v.Tokens > budget || c.Count(v.Text) > budget || v.Tokens != c.Count(v.Text) {
					t.Errorf("page %d: %d tokens (counter %d) > %d", page, v.Tokens, c.Count(v.Text), budget)
				}
				if !utf8.ValidString(v.Text) && tc.handle != fx.bin {
					t.Errorf("invalid UTF-8 in %q", v.Text)
				}
				if v.What == "" {
					t.Error("empty what")
				}
				if v.Next == nil {
					break
				}
				next, err := ParseSelector(v.Next)
				if err != nil {
					t.Fatalf("next %s: %v", v.Next, err)
				}
				if reflect.DeepEqual(next, sel) {
					t.Fatalf("next %s repeats the selector", v.Next)
				}
				sel = next
			}
		})
	}
}

// TestViewBytesUTF8 checks bytes slices align to whole characters and chain
// back to the original text.
func TestViewBytesUTF8(t *testing.T) {
	fx := newViewFixture(t, func(o *Options) { o.MaxViewTokens = 50 })
	text := strings.Repeat("añb€c😀d", 200)
	m, err := fx.f.store.Put(context.Background(), "alice", artifacts.PutInput{MediaType: "text/plain", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int{0, 1, 2, 3, 5, 8, 9, 10} {
		sel := Selector{Type: SelBytes, Offset: int64(off), Length: 37}
		var got strings.Builder
		start := -1
		for range 200 {
			v, err := fx.f.View(context.Background(), "alice", m.Handle, sel)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.ValidString(v.Text) {
				t.Fatalf("offset %d: invalid UTF-8 %q", sel.Offset, v.Text)
			}
			if start < 0 {
				start = strings.Index(text[off:], v.Text[:min(4, len(v.Text))]) + off
			}
			got.WriteString(v.Text)
			if v.Next == nil {
				break
			}
			if sel, err = ParseSelector(v.Next); err != nil {
				t.Fatal(err)
			}
		}
		if got.String() != text[start:] || start-off > 3 {
			t.Errorf("offset %d: chained bytes differ from the text (start %d)", off, start)
		}
	}
}
