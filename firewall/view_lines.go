package firewall

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// lineReader reads an artifact line by line with bounded memory: a line
// longer than the keep limit is returned cut, its full length reported.
type lineReader struct {
	ctx context.Context
	r   *bufio.Reader
	no  int64 // number of the last line returned
	off int64 // offset of the next line's first byte
	buf []byte
}

func newLineReader(ctx context.Context, r io.Reader) *lineReader {
	return &lineReader{ctx: ctx, r: bufio.NewReaderSize(r, 64<<10)}
}

// line is one line from a lineReader.
type line struct {
	no    int64
	start int64  // offset of the first byte
	text  []byte // without terminator; at most keep bytes (valid until the next call)
	cut   bool   // text is a prefix of a longer line
}

// next returns the next line, or io.EOF after the last.
func (lr *lineReader) next(keep int) (line, error) {
	if lr.no&1023 == 0 {
		if err := lr.ctx.Err(); err != nil {
			return line{}, err
		}
	}
	lr.buf = lr.buf[:0]
	start := lr.off
	var total int64
	terminated := false
	for {
		chunk, err := lr.r.ReadSlice('\n')
		lr.off += int64(len(chunk))
		total += int64(len(chunk))
		if room := keep + 2 - len(lr.buf); room > 0 {
			lr.buf = append(lr.buf, chunk[:min(len(chunk), room)]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if total == 0 {
				return line{}, io.EOF
			}
			break
		}
		if err != nil {
			return line{}, err
		}
		terminated = true
		break
	}
	lr.no++
	l := line{no: lr.no, start: start}
	t := lr.buf
	if terminated && int64(len(t)) == total {
		t = t[:len(t)-1]
		t = bytes.TrimSuffix(t, []byte("\r"))
	} else if !terminated && int64(len(t)) == total {
		t = bytes.TrimSuffix(t, []byte("\r"))
	}
	if len(t) > keep {
		t, l.cut = t[:keep], true
	} else if int64(len(t)) < total-2 {
		l.cut = true
	}
	l.text = t
	return l, nil
}

// countRest reads to the end and returns the total number of lines.
func (lr *lineReader) countRest() (int64, error) {
	buf := make([]byte, 64<<10)
	var n int64
	var last byte = '\n'
	for i := 0; ; i++ {
		if i&63 == 0 {
			if err := lr.ctx.Err(); err != nil {
				return 0, err
			}
		}
		k, err := lr.r.Read(buf)
		if k > 0 {
			n += int64(bytes.Count(buf[:k], []byte{'\n'}))
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if last != '\n' {
		n++
	}
	return lr.no + n, nil
}

// open streams the artifact.
func (v *viewer) open() (io.ReadCloser, error) {
	rc, err := v.f.store.Open(v.ctx, v.owner, v.handle)
	if err != nil {
		return nil, storeErr(v.ctx, err)
	}
	return rc, nil
}

// countLines streams the artifact once to count its lines.
func (v *viewer) countLines() (int64, error) {
	rc, err := v.open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	n, err := newLineReader(v.ctx, rc).countRest()
	return n, v.readErr(err)
}

// readErr maps an error met while streaming an artifact.
func (v *viewer) readErr(err error) error {
	if err == nil {
		return nil
	}
	return storeErr(v.ctx, err)
}

// resolveRange turns a lines or rows range with negative numbers into a
// positive one, given the total.
func resolveRange(start, end, total int64) (int64, int64) {
	if start == 0 {
		start = 1
	}
	if start < 0 {
		start = max(total+1+start, 1)
	}
	if end < 0 {
		end = total + 1 + end
	}
	return start, end
}

// pageNext is the selector for the slice after lines first..last of a request
// for start..end (end 0: open).
func pageNext(typ string, last, start, end int64) Selector {
	if end == 0 {
		return Selector{Type: typ, Start: last + 1}
	}
	if last >= end {
		return Selector{Type: typ, Start: end + 1, End: end + 1 + (end - start)}
	}
	return Selector{Type: typ, Start: last + 1, End: end}
}

// lines answers lines (and rows on JSON Lines, where a row is a line).
func (v *viewer) lines(sel Selector) (ViewResult, error) {
	if err := v.requireTextual(sel.Type); err != nil {
		return ViewResult{}, err
	}
	noun, nouns := "line", "lines"
	if sel.Type == SelRows {
		noun, nouns = "row", "rows"
	}
	start, end := sel.Start, sel.End
	if start < 0 || end < 0 {
		total, err := v.countLines()
		if err != nil {
			return ViewResult{}, err
		}
		if total == 0 {
			return ViewResult{}, viewFail("%s: the artifact has no %s", sel.Type, nouns)
		}
		start, end = resolveRange(start, end, total)
		if end != 0 && end < start {
			return ViewResult{}, viewFail("%s: the range is empty (the artifact has %s)", sel.Type, plural(total, noun, nouns))
		}
	}
	if start == 0 {
		start = 1
	}
	rc, err := v.open()
	if err != nil {
		return ViewResult{}, err
	}
	defer rc.Close()
	lr := newLineReader(v.ctx, rc)
	var b strings.Builder
	used := 0
	first, last := int64(0), int64(0)
	var res ViewResult
	for {
		if end > 0 && lr.no >= end {
			break
		}
		l, err := lr.next(MaxLineBytes)
		if err == io.EOF {
			break
		}
		if err != nil {
			return ViewResult{}, v.readErr(err)
		}
		if l.no < start {
			continue
		}
		text, n, cut := v.f.m.cut(string(l.text)+"\n", v.budget-used)
		if cut || l.cut {
			if first == 0 {
				// A single line larger than the budget: show its start and
				// continue it with bytes.
				text = strings.TrimSuffix(text, "\n")
				b.WriteString(text)
				first, last = l.no, l.no
				res.Truncated = true
				res.Next = Selector{Type: SelBytes, Offset: l.start + int64(len(text)), Length: DefaultBytesLength}.raw()
				res.What = " cut after " + plural(len(text), "byte", "bytes") + " at the " + commas(v.budget) + "-token budget; bytes continues it"
				break
			}
			res.Truncated = true
			break
		}
		b.WriteString(text)
		used += n
		if first == 0 {
			first = l.no
		}
		last = l.no
	}
	total, err := lr.countRest()
	if err != nil {
		return ViewResult{}, v.readErr(err)
	}
	if first == 0 {
		if total == 0 {
			return ViewResult{}, viewFail("%s: the artifact has no %s", sel.Type, nouns)
		}
		return ViewResult{}, viewFail("%s: start %s is past the last %s (%s)", sel.Type, commas(start), noun, commas(total))
	}
	res.Text = b.String()
	if res.What == "" {
		res.What = nouns + " " + commas(first) + "-" + commas(last) + " of " + commas(total)
		if first == last {
			res.What = noun + " " + commas(first) + " of " + commas(total)
		}
		if res.Truncated {
			res.What += " (cut at the " + commas(v.budget) + "-token budget)"
		}
		if last < total {
			res.Next = pageNext(sel.Type, last, start, end).raw()
		} else {
			res.What += ", the end"
		}
	} else {
		res.What = noun + " " + commas(first) + " of " + commas(total) + "," + res.What
	}
	return res, nil
}

// rows answers rows: CSV records with the header repeated, or JSON Lines
// records.
func (v *viewer) rows(sel Selector) (ViewResult, error) {
	switch {
	case v.class.jsonl:
		return v.lines(sel)
	case !v.class.csv:
		return ViewResult{}, viewFail("rows does not fit media type %s: it needs text/csv or application/x-ndjson", v.meta.MediaType)
	}
	start, end := sel.Start, sel.End
	if start < 0 || end < 0 {
		total, err := v.csvCount()
		if err != nil {
			return ViewResult{}, err
		}
		if total == 0 {
			return ViewResult{}, viewFail("rows: the CSV has no data rows")
		}
		start, end = resolveRange(start, end, total)
		if end != 0 && end < start {
			return ViewResult{}, viewFail("rows: the range is empty (the CSV has %s)", plural(total, "row", "rows"))
		}
	}
	if start == 0 {
		start = 1
	}
	rc, err := v.open()
	if err != nil {
		return ViewResult{}, err
	}
	defer rc.Close()
	cr := newCSVReader(rc)
	header, err := cr.Read()
	if err == io.EOF {
		return ViewResult{}, viewFail("rows: the CSV is empty")
	}
	if err != nil {
		return ViewResult{}, v.csvErr(err)
	}
	headText, used, headCut := v.f.m.cut(csvLine(header)+"\n", v.budget/2)
	var b strings.Builder
	b.WriteString(headText)
	var res ViewResult
	res.Truncated = headCut
	first, last := int64(0), int64(0)
	var rowNo int64
	for {
		if rowNo&1023 == 0 {
			if err := v.ctx.Err(); err != nil {
				return ViewResult{}, err
			}
		}
		if end > 0 && rowNo >= end {
			break
		}
		before := cr.InputOffset()
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return ViewResult{}, v.csvErr(err)
		}
		rowNo++
		if rowNo < start {
			continue
		}
		text, n, cut := v.f.m.cut(csvLine(rec)+"\n", v.budget-used)
		if cut {
			res.Truncated = true
			if first == 0 {
				b.WriteString(text)
				first, last = rowNo, rowNo
				res.What = "row " + commas(rowNo) + " cut at the " + commas(v.budget) + "-token budget (bytes " + commas(before) + "-" + commas(cr.InputOffset()-1) + " hold it whole)"
				res.Next = Selector{Type: SelRows, Start: rowNo + 1, End: max(end, rowNo+1)}.raw()
			}
			break
		}
		b.WriteString(text)
		used += n
		if first == 0 {
			first = rowNo
		}
		last = rowNo
	}
	total := rowNo
	for {
		if total&1023 == 0 {
			if err := v.ctx.Err(); err != nil {
				return ViewResult{}, err
			}
		}
		if _, err := cr.Read(); err == io.EOF {
			break
		} else if err != nil {
			return ViewResult{}, v.csvErr(err)
		}
		total++
	}
	if first == 0 {
		if total == 0 {
			return ViewResult{}, viewFail("rows: the CSV has no data rows")
		}
		return ViewResult{}, viewFail("rows: start %s is past the last row (%s)", commas(start), commas(total))
	}
	res.Text = b.String()
	if res.What == "" {
		res.What = "header and rows " + commas(first) + "-" + commas(last) + " of " + commas(total)
		if res.Truncated {
			res.What += " (cut at the " + commas(v.budget) + "-token budget)"
		}
		if last < total {
			res.Next = pageNext(SelRows, last, start, end).raw()
		} else {
			res.What += ", the end"
		}
	} else {
		res.What += "; " + commas(total) + " rows in all"
		if last >= total {
			res.Next = nil
		}
	}
	return res, nil
}

func newCSVReader(r io.Reader) *csv.Reader {
	cr := csv.NewReader(bufio.NewReaderSize(r, 64<<10))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	return cr
}

// csvCount counts the data rows of a CSV artifact.
func (v *viewer) csvCount() (int64, error) {
	rc, err := v.open()
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	cr := newCSVReader(rc)
	var n int64
	for ; ; n++ {
		if n&1023 == 0 {
			if err := v.ctx.Err(); err != nil {
				return 0, err
			}
		}
		if _, err := cr.Read(); err == io.EOF {
			break
		} else if err != nil {
			return 0, v.csvErr(err)
		}
	}
	return max(n-1, 0), nil
}

// csvErr maps a CSV parse error (or a store error met while parsing).
func (v *viewer) csvErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return viewFail("rows: the CSV does not parse at line %d: %v", pe.Line, pe.Err)
	}
	return v.readErr(err)
}

// grep answers grep: matching lines as "number:text".
func (v *viewer) grep(sel Selector) (ViewResult, error) {
	if err := v.requireTextual(sel.Type); err != nil {
		return ViewResult{}, err
	}
	re, err := compilePattern(sel.Pattern)
	if err != nil {
		return ViewResult{}, fmt.Errorf("%w: %w", ErrViewFailed, err)
	}
	maxM := sel.MaxMatches
	if maxM == 0 {
		maxM = DefaultMaxMatches
	}
	start := max(sel.Start, 1)
	var filter *lineFilter
	if prefix, _ := re.LiteralPrefix(); prefix == "" {
		// regexp already skips ahead to a literal prefix; otherwise (case
		// folding, alternations) a literal prefilter pays off several times.
		filter = newLineFilter(sel.Pattern)
	}
	rc, err := v.open()
	if err != nil {
		return ViewResult{}, err
	}
	defer rc.Close()
	lr := newLineReader(v.ctx, rc)
	var b strings.Builder
	used, shown, matches := 0, 0, 0
	var firstShown, lastShown, nextMatch int64
	cutLines := 0
	for {
		l, err := lr.next(MaxLineBytes)
		if err == io.EOF {
			break
		}
		if err != nil {
			return ViewResult{}, v.readErr(err)
		}
		if l.no < start || !filter.mayMatch(l.text) || !re.Match(l.text) {
			continue
		}
		matches++
		if nextMatch != 0 {
			continue
		}
		if shown >= maxM {
			nextMatch = l.no
			continue
		}
		text := string(l.text)
		if runeLen(text) > 500 || l.cut {
			text = clip(text, 500)
			if !strings.HasSuffix(text, "…") {
				text += "…"
			}
			cutLines++
		}
		entry := strconv.FormatInt(l.no, 10) + ":" + text + "\n"
		t, n, cut := v.f.m.cut(entry, v.budget-used)
		if cut {
			if shown == 0 {
				b.WriteString(t)
				shown, firstShown, lastShown = 1, l.no, l.no
				used += n
				cutLines++
				continue
			}
			nextMatch = l.no
			continue
		}
		b.WriteString(t)
		used += n
		shown++
		if firstShown == 0 {
			firstShown = l.no
		}
		lastShown = l.no
	}
	total := lr.no
	res := ViewResult{Text: b.String()}
	from := ""
	if start > 1 {
		from = " from line " + commas(start)
	}
	switch {
	case matches == 0:
		res.What = "no line matches" + from + " (" + plural(total, "line", "lines") + " scanned)"
	case shown == matches:
		res.What = plural(matches, "matching line", "matching lines") + from + " of " + commas(total) + ", all shown"
	default:
		res.What = plural(matches, "matching line", "matching lines") + from + " of " + commas(total) + "; showing " + commas(shown) +
			" (lines " + commas(firstShown) + "-" + commas(lastShown) + ")"
		res.Truncated = true
		res.Next = Selector{Type: SelGrep, Pattern: sel.Pattern, MaxMatches: sel.MaxMatches, Start: nextMatch}.raw()
	}
	if cutLines > 0 {
		res.What += "; " + plural(cutLines, "long line", "long lines") + " shortened (read them with lines)"
	}
	return res, nil
}
