package firewall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{
		`{"type":"head","chars":10}`, `{"type":"lines","start":-1}`, `{"type":"lines","start":3,"end":9}`,
		`{"type":"bytes","offset":0,"length":1}`, `{"type":"json_pointer","pointer":"/a~1b/~0/0"}`,
		`{"type":"json_keys","keys":["a","b"],"pointer":"/x"}`, `{"type":"grep","pattern":"ERROR|WARN","max_matches":5,"start":2}`,
		`{"type":"rows","start":1,"end":20}`, `{"type":"head","type":"lines"}`, `{"type":"grep","pattern":"(("}`, `[]`, `{`, `{"type":"lines","start":1e400}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sel, err := ParseSelector(raw)
		if err != nil {
			if !errors.Is(err, ErrBadSelector) {
				t.Fatalf("error %v does not wrap ErrBadSelector", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := sel.Validate(); err != nil {
			t.Fatalf("parsed selector does not validate: %v", err)
		}
		canon, err := sel.MarshalJSON()
		if err != nil || !json.Valid(canon) {
			t.Fatalf("canonical form %q: %v", canon, err)
		}
		again, err := ParseSelector(canon)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", canon, err)
		}
		if !reflect.DeepEqual(again, sel) {
			t.Fatalf("round trip %+v -> %s -> %+v", sel, canon, again)
		}
	})
}

// pointerDoc is the fixed document FuzzJSONPointer evaluates pointers on.
const pointerDoc = `{"a":{"b":[1,{"c/d":"x","e~f":[true,null]}],"":"empty"},"~":{"/":0},"01":[[],{},[-1.5e3]],"ü":"\u00fc","esc\"aped":{"k":"v"},"-":"dash key"}`

func FuzzJSONPointer(f *testing.F) {
	for _, p := range []string{"", "/", "/a", "/a/b/1/c~1d", "/a/b/1/e~0f/1", "/~0/~1", "/01/2/0", "/01/-", "/a/b/01", "/ü", "/esc\"aped/k", "/-", "/a~2", "/a/b/9", "x"} {
		f.Add(p)
	}
	var ref any
	if err := json.Unmarshal([]byte(pointerDoc), &ref); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string) {
		toks, err := parsePointer(p)
		if err != nil {
			if !errors.Is(err, ErrBadSelector) {
				t.Fatalf("pointer error %v does not wrap ErrBadSelector", err)
			}
			return
		}
		// Escape and unescape round-trip.
		if back := jsonpointer.Format(toks); back != p {
			t.Fatalf("jsonpointer.Format(parsePointer(%q)) = %q", p, back)
		}
		for _, tok := range toks {
			if again, err := parsePointer("/" + jsonpointer.Escape(tok)); err != nil || len(again) != 1 || again[0] != tok {
				t.Fatalf("token %q does not round-trip: %q %v", tok, again, err)
			}
		}
		// Evaluation on the streaming scanner agrees with a decoded walk.
		want, found := lookup(ref, toks)
		s := newJScan(strings.NewReader(pointerDoc))
		err = seekPointer(SelJSONPointer, s, toks)
		if found != (err == nil) {
			t.Fatalf("pointer %q: reference found=%v, scanner err=%v", p, found, err)
		}
		if err != nil {
			if !errors.Is(err, ErrViewFailed) {
				t.Fatalf("pointer %q: error %v does not wrap ErrViewFailed", p, err)
			}
			return
		}
		raw, over, err := s.captureValue(len(toks), 1<<16)
		if err != nil || over {
			t.Fatalf("pointer %q: capture: %v", p, err)
		}
		var got any
		if err := json.Unmarshal(raw, &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("pointer %q = %s, want %v", p, raw, want)
		}
	})
}

// fuzzView is the firewall and artifacts FuzzView works on, built once.
type fuzzView struct {
	f       *Firewall
	handles []string
}

var fuzzViewOnce sync.Once
var fuzzViewState fuzzView

func FuzzView(f *testing.F) {
	fuzzViewOnce.Do(func() {
		st, err := artifacts.OpenBadger(artifacts.Options{Dir: f.TempDir(), SweepInterval: -1})
		if err != nil {
			f.Fatal(err)
		}
		c, err := sharedCounter()
		if err != nil {
			f.Fatal(err)
		}
		fw := New(Options{Store: st, Counter: c, MaxViewTokens: 40})
		for _, a := range []struct{ data, media string }{
			{genLog(6<<10, 5) + "naïve ✓\r\nno newline at end", MediaText},
			{"h1,h2\n1,\"a\nb\"\n2,\"c,d\"\n3,x\n", MediaCSV},
			{string(genJSON(3<<10, 1)), MediaJSON},
			{"{\"a\":1}\n[2]\n{\"b\":{}}\n", MediaJSONL},
			{"\x00\x01binary\xff\xfe", "image/png"},
			{"{\"a\": [1, 2", MediaJSON}, // invalid JSON
			{"", MediaText},              // empty
		} {
			m, err := st.Put(context.Background(), "fuzz", artifacts.PutInput{MediaType: a.media, Data: []byte(a.data)})
			if err != nil && !errors.Is(err, artifacts.ErrInvalid) {
				f.Fatal(err)
			}
			if err == nil {
				fuzzViewState.handles = append(fuzzViewState.handles, m.Handle)
			}
		}
		fuzzViewState.f = fw
	})
	for _, s := range []string{`{"type":"head"}`, `{"type":"lines","start":-3,"end":-1}`, `{"type":"bytes","offset":5,"length":7}`,
		`{"type":"json_pointer","pointer":"/items/0/tags"}`, `{"type":"json_keys","keys":["total","meta"]}`, `{"type":"grep","pattern":"(?i)error","max_matches":3}`,
		`{"type":"rows","start":2}`, `{"type":"rows","start":-1}`, `{"type":"lines","start":2,"end":2}`} {
		for i := range 7 {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, raw []byte) {
		fv := fuzzViewState
		h := fv.handles[int(which)%len(fv.handles)]
		sel, err := ParseSelector(raw)
		if err != nil {
			return
		}
		res, err := fv.f.View(context.Background(), "fuzz", h, sel)
		if err != nil {
			if !errors.Is(err, ErrViewFailed) {
				t.Fatalf("%s: error %v does not wrap ErrViewFailed", raw, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if res.Tokens > 40 || fv.f.m.count(res.Text) > 40 {
			t.Fatalf("%s: %d tokens", raw, res.Tokens)
		}
		if res.What == "" {
			t.Fatalf("%s: empty what", raw)
		}
		if res.Next != nil {
			next, err := ParseSelector(res.Next)
			if err != nil {
				t.Fatalf("%s: next %s does not parse: %v", raw, res.Next, err)
			}
			if reflect.DeepEqual(next, sel) {
				t.Fatalf("%s: next repeats the selector", raw)
			}
		}
		if !utf8.ValidString(res.Text) && bytes.Contains([]byte(res.MediaType), []byte("text")) {
			t.Logf("%s: invalid UTF-8 text (artifact bytes)", raw)
		}
	})
}

// FuzzLineFilter checks the grep prefilter never rejects a line the pattern
// matches.
func FuzzLineFilter(f *testing.F) {
	for _, s := range [][2]string{
		{`(?i:\b(?:exception|error)\b)|\b[A-Z]\w*(?:Exception|Error)\b`, "java.lang.IllegalStateException: x"},
		{"ERROR|WARN", "2026 WARN x"}, {"(?i)k", "\u212a"}, {"a+b{2,}", "aabbb"}, {"(?i)straße", "STRASSE"}, {"x*", ""},
		{`^\d+ ERROR`, "12 ERROR"}, {"(?i)ſ", "S"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, line string) {
		if len(pattern) > MaxPatternBytes {
			return
		}
		re, err := compilePattern(pattern)
		if err != nil {
			return
		}
		if re.MatchString(line) && !newLineFilter(pattern).mayMatch([]byte(line)) {
			t.Fatalf("filter for %q rejects %q, which matches", pattern, line)
		}
	})
}
