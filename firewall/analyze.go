package firewall

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/quiver-mcp/quiver/internal/jsonpointer"
)

// Media types the firewall assigns to text it stores.
const (
	MediaJSON  = "application/json"
	MediaJSONL = "application/x-ndjson"
	MediaCSV   = "text/csv"
	MediaText  = "text/plain"
)

// digest is what the firewall learned about one part it stores.
type digest struct {
	name   string // "text part 1", "structuredContent", "image part 2"
	kind   string // log, text, json, csv, jsonl, binary
	media  string
	label  string
	facts  []string
	views  []viewSpec
	render func(n int) string // summary body at detail level n (0 = nothing)
}

// viewSpec is a suggested view before it gets an id and a handle.
type viewSpec struct {
	label string
	sel   Selector
}

// maxLevel is the highest summary detail level.
const maxLevel = 32

// analyzeText sniffs the media type of a text part and digests it. declared is
// the media type the upstream declared, if any.
func (f *Firewall) analyzeText(name, text, declared string) digest {
	declared = strings.ToLower(strings.TrimSpace(strings.SplitN(declared, ";", 2)[0]))
	trimmed := strings.TrimSpace(text)
	isJSONish := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	if (isJSONish || declared == MediaJSON || strings.HasSuffix(declared, "+json")) && json.Valid([]byte(trimmed)) {
		if d, err := jsonDigest(name, []byte(text)); err == nil {
			return d
		}
	}
	if isJSONish || declared == MediaJSONL || declared == "application/jsonl" {
		if d, ok := jsonlDigest(name, text); ok {
			return d
		}
	}
	ts := f.text.scanText(text)
	if declared == MediaCSV || (!ts.isLog && len(ts.head) > 1 && strings.Contains(ts.head[0].text, ",")) {
		if d, ok := csvDigest(name, text); ok {
			return d
		}
	}
	return textDigest(name, ts)
}

// --- JSON ---

// jnode describes one JSON value for a summary.
type jnode struct {
	kind      byte
	size      int64
	count     int      // object: members; array: elements; string: raw bytes
	keys      []string // object: first maxKeyNames member names
	kids      []jkid   // top-level object: first maxKids members, described
	elems     map[byte]int
	first     string // array: first element, raw and cut; scalar: raw and cut
	firstCut  bool
	firstKind byte
	firstKeys []string // array whose first element is an object: its keys
}

type jkid struct {
	key  string
	node jnode
}

const (
	maxKeyNames = 24
	maxKids     = 40
	firstCap    = 600
	scalarCap   = 200
)

// describe walks the value at the scanner's position. level 0 is the document.
func (s *jscan) describe(level int) (jnode, error) {
	c, err := s.peek()
	if err != nil {
		return jnode{}, s.eof(err)
	}
	start := s.off
	n := jnode{kind: kindOf(c)}
	switch n.kind {
	case kObject, kArray:
		if level+1 > s.maxDepth {
			s.maxDepth = level + 1
		}
		if n.kind == kArray {
			n.elems = map[byte]int{}
		}
		err = s.members(MaxKeyBytes, func(key string, keyOK bool, i int) (bool, error) {
			n.count++
			if n.kind == kObject {
				if len(n.keys) < maxKeyNames {
					if !keyOK {
						key = "(long key)"
					}
					n.keys = append(n.keys, key)
				}
				if level == 0 && len(n.kids) < maxKids {
					kid, err := s.describe(1)
					if !keyOK {
						key = "(long key)"
					}
					n.kids = append(n.kids, jkid{key, kid})
					return false, err
				}
				return false, s.skipValue(level + 1)
			}
			p, _ := s.peek()
			k := kindOf(p)
			n.elems[k]++
			if i > 0 || s.capOn {
				return false, s.skipValue(level + 1)
			}
			n.firstKind = k
			s.startCapture(firstCap)
			var err error
			if k == kObject {
				var fn jnode
				fn, err = s.describe(level + 1)
				n.firstKeys = fn.keys
			} else {
				err = s.skipValue(level + 1)
			}
			raw, cut := s.stopCapture()
			n.first, n.firstCut = string(raw), cut
			return false, err
		})
	default:
		if s.capOn {
			err = s.skipValue(level)
		} else {
			var raw []byte
			raw, n.firstCut, err = s.captureValue(level, scalarCap)
			n.first = string(raw)
		}
	}
	n.size = s.off - start
	if n.kind == kString {
		n.count = int(n.size) - 2
	}
	return n, err
}

// jsonShape describes a whole JSON document.
type jsonShape struct {
	root  jnode
	depth int
	bytes int
}

func shapeJSON(data []byte) (jsonShape, error) {
	s := newJScan(bytes.NewReader(data))
	root, err := s.describe(0)
	if err != nil {
		return jsonShape{}, err
	}
	if _, err := s.peek(); err != io.EOF {
		return jsonShape{}, errors.Join(errJSON, errors.New("trailing data"))
	}
	return jsonShape{root: root, depth: s.maxDepth, bytes: len(data)}, nil
}

// elemsPhrase describes array elements: "5,000 objects", "3 items (2 strings,
// 1 null)".
func elemsPhrase(n jnode) string {
	if n.count == 0 {
		return "empty"
	}
	if len(n.elems) == 1 {
		for k := range n.elems {
			return plural(n.count, kindName(k), kindPlural(k))
		}
	}
	var parts []string
	for _, k := range []byte{kObject, kArray, kString, kNumber, kBool, kNull} {
		if c := n.elems[k]; c > 0 {
			parts = append(parts, plural(c, kindName(k), kindPlural(k)))
		}
	}
	return plural(n.count, "item", "items") + " (" + strings.Join(parts, ", ") + ")"
}

func kindPlural(k byte) string {
	if k == kNull {
		return "nulls"
	}
	if k == kBool {
		return "booleans"
	}
	return kindName(k) + "s"
}

// nodePhrase describes a value in a few words.
func nodePhrase(n jnode, withKeys bool) string {
	switch n.kind {
	case kObject:
		p := "object, " + plural(n.count, "key", "keys")
		if withKeys && len(n.keys) > 0 {
			p += " (" + joinCapped(n.keys, n.count, 80) + ")"
		}
		return p
	case kArray:
		return "array of " + elemsPhrase(n)
	case kString:
		return "string of " + plural(n.count, "byte", "bytes")
	default:
		return kindName(n.kind) + " " + clip(n.first, 40)
	}
}

func jsonDigest(name string, data []byte) (digest, error) {
	sh, err := shapeJSON(data)
	if err != nil {
		return digest{}, err
	}
	root := sh.root
	d := digest{name: name, kind: "json", media: MediaJSON}
	switch root.kind {
	case kObject:
		d.label = name + " (JSON object, " + plural(root.count, "key", "keys") + ")"
		var ks []string
		for _, k := range root.kids {
			ks = append(ks, k.key+" ("+nodePhrase(k.node, false)+")")
		}
		d.facts = append(d.facts, name+": JSON object with "+plural(root.count, "key", "keys")+": "+joinCapped(ks, root.count, 240))
	case kArray:
		d.label = name + " (JSON array of " + elemsPhrase(root) + ")"
		d.facts = append(d.facts, name+": JSON array of "+elemsPhrase(root))
	default:
		d.label = name + " (JSON " + kindName(root.kind) + ")"
		d.facts = append(d.facts, name+": JSON "+nodePhrase(root, false))
	}
	d.facts = append(d.facts, name+": "+plural(sh.bytes, "byte", "bytes")+", nesting depth "+commas(sh.depth))

	// Views.
	switch root.kind {
	case kObject:
		var small []string
		for _, k := range root.kids {
			if k.node.size <= 2048 && len(small) < 8 {
				small = append(small, k.key)
			}
		}
		if len(small) > 0 {
			d.views = append(d.views, viewSpec{"top-level keys " + joinCapped(small, len(small), 60), Selector{Type: SelJSONKeys, Keys: small}})
		}
		best := -1
		for i, k := range root.kids {
			if k.node.kind == kArray && k.node.count > 0 && (best < 0 || k.node.size > root.kids[best].node.size) {
				best = i
			}
		}
		if best >= 0 {
			k := root.kids[best]
			p := jsonpointer.Child("", k.key)
			d.views = append(d.views, viewSpec{"first of " + commas(k.node.count) + " items in " + k.key, Selector{Type: SelJSONPointer, Pointer: p + "/0"}})
			if k.node.count > 1 {
				d.views = append(d.views, viewSpec{"last item in " + k.key, Selector{Type: SelJSONPointer, Pointer: p + "/" + commasFree(k.node.count-1)}})
			}
		}
	case kArray:
		if root.count > 0 {
			d.views = append(d.views, viewSpec{"first item", Selector{Type: SelJSONPointer, Pointer: "/0"}})
		}
		if root.count > 1 {
			d.views = append(d.views, viewSpec{"last item", Selector{Type: SelJSONPointer, Pointer: "/" + commasFree(root.count-1)}})
		}
	}
	if len(d.views) == 0 {
		d.views = append(d.views, viewSpec{"first " + commas(DefaultHeadChars) + " characters", Selector{Type: SelHead, Chars: DefaultHeadChars}})
	}
	d.render = func(n int) string { return renderJSON(sh, n) }
	return d, nil
}

// commasFree formats an int without separators.
func commasFree(n int) string { return strings.ReplaceAll(commas(n), ",", "") }

// renderJSON renders a JSON shape at detail level n.
func renderJSON(sh jsonShape, n int) string {
	if n <= 0 {
		return ""
	}
	root := sh.root
	var b strings.Builder
	firstW := min(40+25*n, firstCap)
	switch root.kind {
	case kObject:
		b.WriteString("shape: object, " + plural(root.count, "key", "keys") + ", nesting depth " + commas(sh.depth) + "\n")
		show := min(2+2*n, len(root.kids))
		for _, k := range root.kids[:show] {
			b.WriteString("- " + clip(k.key, 60) + ": " + nodePhrase(k.node, true))
			if k.node.kind == kArray && k.node.count > 0 {
				b.WriteString("; first: " + clip(k.node.first, firstW))
			}
			if k.node.kind == kString {
				b.WriteString(" " + clip(k.node.first, min(20+10*n, 120)))
			}
			b.WriteByte('\n')
		}
		if rest := root.count - show; rest > 0 {
			names := make([]string, 0, len(root.keys))
			for i, k := range root.keys {
				if i >= show {
					names = append(names, k)
				}
			}
			b.WriteString("- … " + plural(rest, "more key", "more keys"))
			if len(names) > 0 {
				b.WriteString(": " + joinCapped(names, rest, 120))
			}
			b.WriteByte('\n')
		}
	case kArray:
		b.WriteString("shape: array of " + elemsPhrase(root) + ", nesting depth " + commas(sh.depth) + "\n")
		if len(root.firstKeys) > 0 {
			b.WriteString("first item's keys: " + joinCapped(root.firstKeys, len(root.firstKeys), 200) + "\n")
		}
		if root.count > 0 {
			b.WriteString("first item: " + clip(root.first, firstW) + "\n")
		}
	default:
		b.WriteString("value: " + clip(root.first, firstW) + "\n")
	}
	return b.String()
}

// --- JSON Lines ---

// jsonlDigest digests text that is JSON Lines: at least two lines, each one
// JSON object or array (a final newline is allowed, blank lines are not).
func jsonlDigest(name, text string) (digest, bool) {
	body := strings.TrimSuffix(text, "\n")
	if !strings.Contains(body, "\n") {
		return digest{}, false
	}
	var head []numLine
	var last numLine
	kinds := map[byte]int{}
	no := 0
	for len(body) > 0 || no == 0 {
		line := body
		if i := strings.IndexByte(body, '\n'); i >= 0 {
			line, body = body[:i], body[i+1:]
		} else {
			body = ""
		}
		no++
		t := strings.TrimSpace(line)
		if t == "" || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
			return digest{}, false
		}
		kinds[kindOf(t[0])]++
		if len(head) < maxHeadLines {
			head = append(head, keepLine(no, t))
		}
		last = numLine{no, t}
	}
	last = keepLine(last.no, last.text)
	var keys []string
	if sh, err := shapeJSON([]byte(head[0].text)); err == nil && sh.root.kind == kObject {
		keys = sh.root.keys
	}
	d := digest{name: name, kind: "jsonl", media: MediaJSONL}
	what := "records"
	if len(kinds) == 1 {
		for k := range kinds {
			what = kindPlural(k)
		}
	}
	d.label = name + " (JSON Lines, " + plural(no, "record", "records") + ")"
	d.facts = append(d.facts, name+": JSON Lines, "+plural(no, "record", "records")+" ("+what+"), "+plural(len(text), "byte", "bytes"))
	if len(keys) > 0 {
		d.facts = append(d.facts, name+": keys of record 1: "+joinCapped(keys, len(keys), 200))
	}
	d.views = append(d.views, viewSpec{"records 1-" + commas(min(20, no)), Selector{Type: SelRows, Start: 1, End: int64(min(20, no))}})
	if no > 20 {
		d.views = append(d.views, viewSpec{"last 20 records", Selector{Type: SelRows, Start: int64(no - 19), End: int64(no)}})
	}
	d.render = func(n int) string {
		if n <= 0 {
			return ""
		}
		var b strings.Builder
		w := min(80+15*n, 300)
		k := min((n+1)/2, len(head))
		b.WriteString("first " + plural(k, "record", "records") + ":\n")
		for _, l := range head[:k] {
			writeNumLine(&b, l, w)
		}
		if last.no > k {
			b.WriteString("last record:\n")
			writeNumLine(&b, last, w)
		}
		return b.String()
	}
	return d, true
}

// --- CSV ---

// csvScan is what one parse of a CSV text learns.
type csvScan struct {
	header    []string
	rows      int // data rows (records after the header)
	first     [][]string
	last      []string
	multiline int // records with a line break inside a quoted field
	ragged    int // records whose field count differs from the header's
}

// scanCSV parses text as RFC 4180 CSV. ok is false unless it is plausibly a
// table: it parses, has a header of two or more columns and at least one data
// row, and its first 100 records have the header's width.
func scanCSV(text string) (csvScan, bool) {
	r := csv.NewReader(strings.NewReader(text))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	var cs csvScan
	for n := 0; ; n++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return cs, false
		}
		if n == 0 {
			if len(rec) < 2 {
				return cs, false
			}
			cs.header = cloneStrings(rec)
			continue
		}
		cs.rows++
		if len(rec) != len(cs.header) {
			if n <= 100 {
				return cs, false
			}
			cs.ragged++
		}
		for _, f := range rec {
			if strings.ContainsAny(f, "\r\n") {
				cs.multiline++
				break
			}
		}
		if len(cs.first) < maxHeadLines {
			cs.first = append(cs.first, cloneStrings(rec))
		}
		cs.last = rec
	}
	if cs.rows == 0 {
		return cs, false
	}
	cs.last = cloneStrings(cs.last)
	return cs, true
}

// cloneStrings deep-copies a record, cutting long fields so a summary never
// pins the whole input.
func cloneStrings(rec []string) []string {
	out := make([]string, len(rec))
	for i, f := range rec {
		if len(f) > summaryLineCap {
			f = validPrefix(f[:summaryLineCap])
		}
		out[i] = strings.Clone(f)
	}
	return out
}

// csvLine renders one record as a CSV line.
func csvLine(rec []string) string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write(rec)
	w.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

func csvDigest(name, text string) (digest, bool) {
	cs, ok := scanCSV(text)
	if !ok {
		return digest{}, false
	}
	d := digest{name: name, kind: "csv", media: MediaCSV}
	d.label = name + " (CSV, " + plural(len(cs.header), "column", "columns") + ", " + plural(cs.rows, "row", "rows") + ")"
	d.facts = append(d.facts, name+": CSV, "+plural(len(cs.header), "column", "columns")+", "+plural(cs.rows, "data row", "data rows")+" plus a header, "+plural(len(text), "byte", "bytes"))
	d.facts = append(d.facts, name+": columns: "+joinCapped(cs.header, len(cs.header), 240))
	if cs.multiline > 0 {
		d.facts = append(d.facts, name+": "+plural(cs.multiline, "row has", "rows have")+" line breaks inside quoted fields (use rows, not lines)")
	}
	if cs.ragged > 0 {
		d.facts = append(d.facts, name+": "+plural(cs.ragged, "row has", "rows have")+" a different number of fields than the header")
	}
	d.views = append(d.views, viewSpec{"rows 1-" + commas(min(20, cs.rows)) + " with header", Selector{Type: SelRows, Start: 1, End: int64(min(20, cs.rows))}})
	if cs.rows > 20 {
		d.views = append(d.views, viewSpec{"last 20 rows with header", Selector{Type: SelRows, Start: int64(cs.rows - 19), End: int64(cs.rows)}})
	}
	d.render = func(n int) string {
		if n <= 0 {
			return ""
		}
		var b strings.Builder
		w := min(80+15*n, 300)
		k := min((n+1)/2, len(cs.first))
		b.WriteString("header: " + clip(csvLine(cs.header), w*2) + "\n")
		b.WriteString("first " + plural(k, "row", "rows") + ":\n")
		for i, rec := range cs.first[:k] {
			writeNumLine(&b, numLine{i + 1, csvLine(rec)}, w)
		}
		if cs.rows > k {
			b.WriteString("last row:\n")
			writeNumLine(&b, numLine{cs.rows, csvLine(cs.last)}, w)
		}
		return b.String()
	}
	return d, true
}
