package guard

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/runtime/codes"
)

// HashAlg is the only content hash algorithm (spec 000 §9.2.3).
const HashAlg = "sha256"

// DocumentHash is one document's entry in a tool_effect: its pointer, the
// lowercase hex sha256 of its decoded bytes, and their number.
type DocumentHash struct {
	Pointer   string `json:"pointer"`
	Hash      string `json:"hash"`
	SizeBytes int64  `json:"size_bytes"`
}

// ExpectedHash is one entry of a call's expected_document_hashes.
type ExpectedHash struct {
	Pointer string `json:"pointer"`
	Hash    string `json:"hash"`
}

// DecodeContent returns the hash preimage of the value v found at pointer:
// v must be a string; with EncodingUTF8 the preimage is its UTF-8 bytes,
// with EncodingBase64 its standard padded base64 decoding (strict: no line
// breaks, no stray bits). A preimage larger than limit is refused before it
// is decoded.
func DecodeContent(v any, pointer string, enc Encoding, limit int64) ([]byte, *Error) {
	s, ok := v.(string)
	if !ok {
		return nil, deny(codes.DocContentPointerInvalid, "content pointer %s addresses %s, not a string", pointer, kindOf(v)).at(pointer)
	}
	switch enc {
	case EncodingUTF8:
		if !utf8.ValidString(s) {
			return nil, deny(codes.DocEncodingInvalid, "content at %s is not valid UTF-8", pointer).at(pointer)
		}
		if int64(len(s)) > limit {
			return nil, sizeExceeded(pointer, int64(len(s)), limit, "document")
		}
		return []byte(s), nil
	case EncodingBase64:
		n, err := base64Size(s)
		if err != nil {
			return nil, deny(codes.DocEncodingInvalid, "content at %s is not standard padded base64", pointer).at(pointer)
		}
		if n > limit {
			return nil, sizeExceeded(pointer, n, limit, "document")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, deny(codes.DocEncodingInvalid, "content at %s is not standard padded base64", pointer).at(pointer)
		}
		return b, nil
	}
	return nil, deny(codes.DocEncodingInvalid, "unknown content encoding %q", string(enc)).at(pointer)
}

// errBase64 is base64Size's refusal.
var errBase64 = errors.New("not standard padded base64")

// base64Size returns the decoded size of a standard padded base64 string
// without decoding it; it refuses line breaks (which the standard library
// decoder would skip) and lengths that are not a multiple of 4.
func base64Size(s string) (int64, error) {
	if len(s)%4 != 0 || strings.ContainsAny(s, "\r\n") {
		return 0, errBase64
	}
	pad := 0
	if strings.HasSuffix(s, "==") {
		pad = 2
	} else if strings.HasSuffix(s, "=") {
		pad = 1
	}
	return int64(len(s)/4*3 - pad), nil
}

func sizeExceeded(pointer string, size, limit int64, scope string) *Error {
	e := deny(codes.DocSizeExceeded, "%s at %s is %d bytes, over the limit of %d", scope, pointer, size, limit)
	if scope == "batch" {
		e = deny(codes.DocSizeExceeded, "the documents of this call total %d bytes, over the batch limit of %d", size, limit)
	}
	return e.at(pointer).with("scope", scope).with("size_bytes", size).with("limit_bytes", limit)
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	}
	return "a number"
}

// Documents extracts the documents at pointers from doc (a decoded JSON
// value), decodes them per enc, bounds each by maxItem and their total by
// maxBatch, and hashes them. A pointer that addresses nothing, or a value
// that is not a string, is DOC_CONTENT_POINTER_INVALID: every listed pointer
// must be present.
func Documents(doc any, pointers []string, enc Encoding, maxItem, maxBatch int64) ([]DocumentHash, int64, *Error) {
	out := make([]DocumentHash, 0, len(pointers))
	var total int64
	for _, p := range pointers {
		v, err := Resolve(doc, p)
		if err != nil {
			what := "addresses nothing"
			if errors.Is(err, ErrPointerSyntax) {
				what = "is not an RFC 6901 pointer"
			}
			return nil, 0, deny(codes.DocContentPointerInvalid, "content pointer %s %s", p, what).at(p)
		}
		b, e := DecodeContent(v, p, enc, maxItem)
		if e != nil {
			return nil, 0, e
		}
		total += int64(len(b))
		if total > maxBatch {
			return nil, 0, sizeExceeded(p, total, maxBatch, "batch")
		}
		sum := sha256.Sum256(b)
		out = append(out, DocumentHash{Pointer: p, Hash: hex.EncodeToString(sum[:]), SizeBytes: int64(len(b))})
	}
	return out, total, nil
}

// CompareExpected checks a call's expected hashes against the documents it
// writes: each expected pointer must be one of them (listed once), and its
// hash must match.
func CompareExpected(got []DocumentHash, expected []ExpectedHash) *Error {
	if len(expected) == 0 {
		return nil
	}
	by := make(map[string]string, len(got))
	for _, d := range got {
		by[d.Pointer] = d.Hash
	}
	seen := make(map[string]bool, len(expected))
	for _, x := range expected {
		if seen[x.Pointer] {
			return deny(codes.DocContentPointerInvalid, "expected_document_hashes lists %s twice", x.Pointer).at(x.Pointer)
		}
		seen[x.Pointer] = true
		h, ok := by[x.Pointer]
		if !ok {
			return deny(codes.DocContentPointerInvalid, "%s is not a write content pointer of this tool", x.Pointer).at(x.Pointer)
		}
		if h != x.Hash {
			return deny(codes.DocHashMismatch, "the document at %s does not have the expected sha256", x.Pointer).
				at(x.Pointer).with("pointer", x.Pointer).with("expected", x.Hash).with("actual", h)
		}
	}
	return nil
}
