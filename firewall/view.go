package firewall

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/quiver-mcp/quiver/artifacts"
)

// ViewResult is one tool_view answer: a token-bounded slice of an artifact.
type ViewResult struct {
	// Handle is the artifact viewed.
	Handle string `json:"handle"`
	// Selector is the selector answered, in canonical form.
	Selector Selector `json:"selector"`
	// MediaType is the artifact's media type.
	MediaType string `json:"media_type"`
	// Text is the slice. Binary content is base64.
	Text string `json:"text"`
	// Truncated is true when Text holds less than the selector asked for
	// (the token budget or a size cap cut it); What says what was cut.
	Truncated bool `json:"truncated"`
	// What describes the slice: "lines 1-40 of 48,213".
	What string `json:"what"`
	// Next is the selector for the next slice, or null at the end.
	Next json.RawMessage `json:"next"`
	// Tokens is the cl100k_base token count of Text, at most the view budget.
	Tokens int `json:"tokens"`
}

// viewer answers one View call.
type viewer struct {
	f      *Firewall
	ctx    context.Context
	owner  string
	handle string
	meta   artifacts.Meta
	budget int
	class  mediaClass
}

// mediaClass is what a media type allows.
type mediaClass struct {
	textual, json, jsonl, csv bool
}

func classify(mt string) mediaClass {
	base := strings.ToLower(strings.TrimSpace(strings.SplitN(mt, ";", 2)[0]))
	var c mediaClass
	c.json = base == MediaJSON || strings.HasSuffix(base, "+json")
	c.jsonl = base == MediaJSONL || base == "application/jsonl" || base == "application/json-lines"
	c.csv = base == MediaCSV
	c.textual = c.json || c.jsonl || c.csv || strings.HasPrefix(base, "text/") || strings.HasSuffix(base, "+xml") ||
		contains([]string{"application/xml", "application/javascript", "application/yaml", "application/x-yaml", "application/toml", "application/sql", "application/graphql"}, base)
	return c
}

// viewFail builds an ErrViewFailed error with a one-line message.
func viewFail(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrViewFailed, oneLine(fmt.Sprintf(format, args...), 240))
}

// View answers a tool_view selector on owner's artifact handle. The answer's
// Text holds at most MaxViewTokens tokens; Next is the selector for the next
// slice. Errors wrap ErrViewFailed (and ErrBadSelector for an invalid
// selector); an unknown, expired, malformed or other owner's handle yields the
// same error, which also wraps artifacts.ErrNotFound. Context errors are
// returned as they are.
func (f *Firewall) View(ctx context.Context, owner, handle string, sel Selector) (ViewResult, error) {
	if owner == "" {
		return ViewResult{}, fmt.Errorf("%w: %w: empty owner", ErrViewFailed, ErrBadInput)
	}
	if err := sel.Validate(); err != nil {
		return ViewResult{}, fmt.Errorf("%w: %w", ErrViewFailed, err)
	}
	meta, err := f.store.Stat(ctx, owner, handle)
	if err != nil {
		return ViewResult{}, storeErr(ctx, err)
	}
	v := &viewer{f: f, ctx: ctx, owner: owner, handle: handle, meta: meta, budget: f.maxView, class: classify(meta.MediaType)}
	var res ViewResult
	switch sel.Type {
	case SelHead:
		res, err = v.head(sel)
	case SelBytes:
		res, err = v.bytes(sel)
	case SelLines:
		res, err = v.lines(sel)
	case SelRows:
		res, err = v.rows(sel)
	case SelGrep:
		res, err = v.grep(sel)
	case SelJSONPointer:
		res, err = v.jsonPointer(sel)
	case SelJSONKeys:
		res, err = v.jsonKeys(sel)
	}
	if err != nil {
		return ViewResult{}, err
	}
	res.Handle, res.Selector, res.MediaType = handle, sel, meta.MediaType
	res.Text, res.Tokens = v.bound(res.Text)
	return res, nil
}

// storeErr maps a store error for View: missing, malformed and foreign
// handles all become the same not-found error.
func storeErr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, artifacts.ErrNotFound) || errors.Is(err, artifacts.ErrInvalid) {
		return fmt.Errorf("%w: %w", ErrViewFailed, artifacts.ErrNotFound)
	}
	return fmt.Errorf("%w: %w", ErrViewFailed, err)
}

// bound guarantees the token bound on a finished text and returns its count.
func (v *viewer) bound(text string) (string, int) {
	n := v.f.m.count(text)
	for n > v.budget {
		text, _, _ = v.f.m.cut(text, v.budget-(n-v.budget))
		n = v.f.m.count(text)
	}
	return text, n
}

// readCap is how many bytes a slice reads at most: enough for the token
// budget in all but whitespace-heavy text.
func (v *viewer) readCap() int64 {
	return min(int64(v.budget)*32, artifacts.MaxReadBytes)
}

// requireTextual rejects line-oriented selectors on binary artifacts.
func (v *viewer) requireTextual(typ string) error {
	if !v.class.textual {
		return viewFail("%s does not fit media type %s (binary): use head or bytes", typ, v.meta.MediaType)
	}
	return nil
}

// --- head and bytes ---

func (v *viewer) head(sel Selector) (ViewResult, error) {
	chars := sel.Chars
	if chars == 0 {
		chars = DefaultHeadChars
	}
	size := v.meta.SizeBytes
	if !v.class.textual {
		want := max(int64(chars)/4*3, 3)
		return v.binarySlice(0, want, "first")
	}
	n := min(size, int64(chars)*4, v.readCap())
	data, err := v.f.store.ReadAt(v.ctx, v.owner, v.handle, 0, n)
	if err != nil {
		return ViewResult{}, storeErr(v.ctx, err)
	}
	s := string(data)
	if int64(len(data)) < size {
		s = validPrefix(s)
	}
	short := false // fewer characters than asked
	if i := runeIndex(s, chars); i < len(s) {
		s = s[:i]
	} else if int64(len(s)) < size {
		short = true
	}
	text, _, cut := v.f.m.cut(s, v.budget)
	end := int64(len(text))
	res := ViewResult{Text: text, Truncated: cut || short}
	res.What = "first " + plural(runeLen(text), "character", "characters") + " (" + byteRange(0, end, size) + ")"
	if cut {
		res.What += ", cut at " + commas(v.budget) + " tokens"
	}
	if end < size {
		res.Next = Selector{Type: SelBytes, Offset: end, Length: DefaultBytesLength}.raw()
	} else {
		res.What += ", the whole artifact"
	}
	return res, nil
}

// runeIndex is the byte index after the first n runes of s (len(s) if fewer).
func runeIndex(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}

// byteRange describes [start, end) of size bytes.
func byteRange(start, end, size int64) string {
	if end <= start {
		return "0 bytes at offset " + commas(start) + " of " + commas(size)
	}
	return "bytes " + commas(start) + "-" + commas(end-1) + " of " + commas(size)
}

func (v *viewer) bytes(sel Selector) (ViewResult, error) {
	size := v.meta.SizeBytes
	off, length := sel.Offset, sel.Length
	if length == 0 {
		length = DefaultBytesLength
	}
	if off > size {
		return ViewResult{}, viewFail("bytes: offset %s is past the end (the artifact has %s bytes)", commas(off), commas(size))
	}
	if !v.class.textual {
		return v.binarySlice(off, length, "")
	}
	if off == size {
		return ViewResult{What: "end of artifact (" + commas(size) + " bytes)"}, nil
	}
	n := min(length, size-off, v.readCap())
	// Read up to 3 bytes more on each side to align to whole characters.
	lead := min(off, 3)
	data, err := v.f.store.ReadAt(v.ctx, v.owner, v.handle, off-lead, n+lead+3)
	if err != nil {
		return ViewResult{}, storeErr(v.ctx, err)
	}
	// i: the first character start at or after off (past a cut character).
	i := int(lead)
	for i < len(data) && i < int(lead)+3 && !isRuneStart(data[i]) {
		i++
	}
	// e: off+n, moved to the end of the character it cuts (or, if that
	// character is incomplete, to its start); at least one character.
	e := min(int(lead)+int(n), len(data))
	if e <= i && i < len(data) {
		_, w := utf8.DecodeRune(data[i:])
		e = i + w
	}
	for e < len(data) && !isRuneStart(data[e]) && e < int(lead+n)+3 {
		e++
	}
	if e < len(data) && !isRuneStart(data[e]) {
		for e > i && !isRuneStart(data[e]) {
			e--
		}
	}
	e = max(e, i)
	start := off - lead + int64(i)
	s := string(data[i:e])
	want := min(off+length, size)
	text, _, cut := v.f.m.cut(s, v.budget)
	end := start + int64(len(text))
	res := ViewResult{Text: text, Truncated: end < want}
	res.What = byteRange(start, end, size)
	if start != off {
		res.What += " (start moved to a character boundary)"
	}
	if cut {
		res.What += ", cut at " + commas(v.budget) + " tokens"
	}
	if end < size {
		res.Next = Selector{Type: SelBytes, Offset: end, Length: length}.raw()
	} else {
		res.What += ", end of artifact"
	}
	return res, nil
}

// binarySlice answers head or bytes on binary content, in base64.
func (v *viewer) binarySlice(off, length int64, kind string) (ViewResult, error) {
	size := v.meta.SizeBytes
	if off == size {
		return ViewResult{What: "end of artifact (" + commas(size) + " bytes)"}, nil
	}
	// base64 costs about one token per 2.5 characters; read what the budget
	// can show and a little more.
	n := min(length, size-off, int64(v.budget)*3, v.readCap())
	data, err := v.f.store.ReadAt(v.ctx, v.owner, v.handle, off, n)
	if err != nil {
		return ViewResult{}, storeErr(v.ctx, err)
	}
	enc := base64.StdEncoding.EncodeToString(data)
	text, _, cut := v.f.m.cut(enc, v.budget)
	text = text[:len(text)/4*4]
	shown := min(int64(len(text)/4*3), int64(len(data)))
	end := off + shown
	res := ViewResult{Text: text, Truncated: end < min(off+length, size)}
	res.What = byteRange(off, end, size) + " as base64"
	if kind == "first" {
		res.What = "first " + res.What
	}
	if cut {
		res.What += ", cut at " + commas(v.budget) + " tokens"
	}
	if end < size {
		res.Next = Selector{Type: SelBytes, Offset: end, Length: length}.raw()
	} else {
		res.What += ", end of artifact"
	}
	return res, nil
}
