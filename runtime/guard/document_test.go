package guard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestResolve(t *testing.T) {
	doc := decode(t, `{"a":{"b":["x","y"]},"a/b":1,"m~n":2,"":3,"01":4}`)
	cases := []struct {
		ptr  string
		want any
		err  error
	}{
		{"", doc, nil},
		{"/a/b/1", "y", nil},
		{"/a~1b", 1.0, nil},
		{"/m~0n", 2.0, nil},
		{"/", 3.0, nil},
		{"/01", 4.0, nil},
		{"/a/b/2", nil, ErrPointerNotFound},
		{"/a/b/01", nil, ErrPointerNotFound},
		{"/a/b/-", nil, ErrPointerNotFound},
		{"/a/b/-1", nil, ErrPointerNotFound},
		{"/a/b/0/x", nil, ErrPointerNotFound},
		{"/nope", nil, ErrPointerNotFound},
		{"a", nil, ErrPointerSyntax},
		{"/a~", nil, ErrPointerSyntax},
		{"/a~2", nil, ErrPointerSyntax},
		{"/" + strings.Repeat("x", MaxPointerBytes), nil, ErrPointerSyntax},
	}
	for _, tc := range cases {
		got, err := Resolve(doc, tc.ptr)
		if !errors.Is(err, tc.err) {
			t.Errorf("%q: err %v, want %v", tc.ptr, err, tc.err)
			continue
		}
		if tc.err == nil {
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(tc.want)
			if string(gb) != string(wb) {
				t.Errorf("%q = %s, want %s", tc.ptr, gb, wb)
			}
		}
	}
}

func TestDecodeContent(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("hello\r\nworld\x00"))
	cases := []struct {
		name  string
		v     any
		enc   Encoding
		limit int64
		want  string
		code  string
	}{
		{"utf8 exact bytes", "héllo\r\n", EncodingUTF8, 100, "héllo\r\n", ""},
		{"utf8 at the limit", "abcd", EncodingUTF8, 4, "abcd", ""},
		{"utf8 over the limit", "abcde", EncodingUTF8, 4, "", codes.DocSizeExceeded},
		{"utf8 invalid", "a\xffb", EncodingUTF8, 100, "", codes.DocEncodingInvalid},
		{"base64", b64, EncodingBase64, 100, "hello\r\nworld\x00", ""},
		{"base64 empty", "", EncodingBase64, 100, "", ""},
		{"base64 over the limit before decoding", b64, EncodingBase64, 12, "", codes.DocSizeExceeded},
		{"base64 at the limit", b64, EncodingBase64, 13, "hello\r\nworld\x00", ""},
		{"base64 unpadded", "aGk", EncodingBase64, 100, "", codes.DocEncodingInvalid},
		{"base64 url alphabet", "-_-_", EncodingBase64, 100, "", codes.DocEncodingInvalid},
		{"base64 line break", "aGVs\nbG8=", EncodingBase64, 100, "", codes.DocEncodingInvalid},
		{"base64 stray bits", "aGl=", EncodingBase64, 100, "", codes.DocEncodingInvalid},
		{"base64 space", "aGk= ", EncodingBase64, 100, "", codes.DocEncodingInvalid},
		{"not a string", 12.0, EncodingUTF8, 100, "", codes.DocContentPointerInvalid},
		{"an object", map[string]any{}, EncodingBase64, 100, "", codes.DocContentPointerInvalid},
		{"null", nil, EncodingUTF8, 100, "", codes.DocContentPointerInvalid},
		{"unknown encoding", "x", Encoding("latin1"), 100, "", codes.DocEncodingInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, e := DecodeContent(tc.v, "/p", tc.enc, tc.limit)
			if tc.code != "" {
				if e == nil || e.Code != tc.code {
					t.Fatalf("got %v, want %s", e, tc.code)
				}
				if e.Pointer != "/p" {
					t.Fatalf("pointer %q", e.Pointer)
				}
				return
			}
			if e != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v", got, e)
			}
		})
	}
}

func TestDocuments(t *testing.T) {
	args := decode(t, `{"body":"hello","files":[{"content":"a"},{"content":"bb"}],"n":1}`)
	docs, total, e := Documents(args, []string{"/body", "/files/1/content"}, EncodingUTF8, 10, 100)
	if e != nil || total != 7 || len(docs) != 2 {
		t.Fatalf("%v %d %v", docs, total, e)
	}
	if docs[0] != (DocumentHash{Pointer: "/body", Hash: sha("hello"), SizeBytes: 5}) || docs[1].Hash != sha("bb") {
		t.Fatalf("docs %+v", docs)
	}
	for _, tc := range []struct {
		name     string
		pointers []string
		item     int64
		batch    int64
		code     string
		detail   string
	}{
		{"missing", []string{"/title"}, 10, 100, codes.DocContentPointerInvalid, ""},
		{"not a string", []string{"/n"}, 10, 100, codes.DocContentPointerInvalid, ""},
		{"item limit", []string{"/body"}, 4, 100, codes.DocSizeExceeded, "document"},
		{"batch limit", []string{"/body", "/files/1/content"}, 10, 6, codes.DocSizeExceeded, "batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, e := Documents(args, tc.pointers, EncodingUTF8, tc.item, tc.batch)
			if e == nil || e.Code != tc.code {
				t.Fatalf("got %v, want %s", e, tc.code)
			}
			if tc.detail != "" && e.Details["scope"] != tc.detail {
				t.Fatalf("details %v", e.Details)
			}
			if strings.Contains(e.Message, "hello") {
				t.Fatalf("message quotes content: %q", e.Message)
			}
		})
	}
}

func TestCompareExpected(t *testing.T) {
	got := []DocumentHash{{Pointer: "/body", Hash: sha("hello"), SizeBytes: 5}, {Pointer: "/x", Hash: sha("x"), SizeBytes: 1}}
	for _, tc := range []struct {
		name string
		exp  []ExpectedHash
		code string
	}{
		{"none", nil, ""},
		{"match", []ExpectedHash{{"/body", sha("hello")}}, ""},
		{"all match", []ExpectedHash{{"/x", sha("x")}, {"/body", sha("hello")}}, ""},
		{"mismatch", []ExpectedHash{{"/body", sha("hello\n")}}, codes.DocHashMismatch},
		{"unknown pointer", []ExpectedHash{{"/title", sha("x")}}, codes.DocContentPointerInvalid},
		{"twice", []ExpectedHash{{"/x", sha("x")}, {"/x", sha("x")}}, codes.DocContentPointerInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := CompareExpected(got, tc.exp)
			if (e == nil) != (tc.code == "") || (e != nil && e.Code != tc.code) {
				t.Fatalf("got %v, want %q", e, tc.code)
			}
			if tc.code == codes.DocHashMismatch && (e.Details["actual"] != sha("hello") || e.Details["expected"] != sha("hello\n")) {
				t.Fatalf("details %v", e.Details)
			}
		})
	}
}
