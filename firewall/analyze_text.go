package firewall

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
)

// Notable-line categories, most severe first.
const (
	catFatal = iota
	catPanic
	catTraceback
	catException
	catError
	catWarn
	numCats
)

// catName is the display name of a category.
func catName(c int) string {
	return [numCats]string{"FATAL", "panic", "traceback", "exception", "ERROR", "WARN"}[c]
}

// catWords are the words (matched case-insensitively, as whole words) and
// catCamel the CamelCase suffixes ("IllegalStateException", "TypeError") that
// define each category.
func catWords(c int) []string {
	return [numCats][]string{{"fatal", "critical"}, {"panic"}, {"traceback"}, {"exception"}, {"error"}, {"warn", "warning"}}[c]
}

func catCamel(c int) string {
	return [numCats]string{"", "", "", "Exception", "Error", ""}[c]
}

// grepPattern is the RE2 pattern matching the categories in mask. The
// summary's counts, its grep view and tool_view grep with that view all use
// it, so their numbers agree.
func grepPattern(mask int) string {
	var words, camel []string
	for c := range numCats {
		if mask&(1<<c) != 0 {
			words = append(words, catWords(c)...)
			if s := catCamel(c); s != "" {
				camel = append(camel, s)
			}
		}
	}
	p := `(?i:\b(?:` + strings.Join(words, "|") + `)\b)`
	if len(camel) > 0 {
		p += `|\b[A-Z]\w*(?:` + strings.Join(camel, "|") + `)\b`
	}
	return p
}

// catHints are lower-case substrings one of which every category match
// contains; lines with none of them skip the regular expressions.
const catHints = "error warn fatal critical panic exception traceback"

// textRegexps are the compiled expressions text analysis uses; built once per
// Firewall and read-only afterwards.
type textRegexps struct {
	cats      [numCats]*regexp.Regexp
	hints     [][]byte
	logLine   *regexp.Regexp
	timestamp *regexp.Regexp
}

func newTextRegexps() *textRegexps {
	var t textRegexps
	for c := range numCats {
		t.cats[c] = regexp.MustCompile(grepPattern(1 << c))
	}
	for _, h := range strings.Fields(catHints) {
		t.hints = append(t.hints, []byte(h))
	}
	t.logLine = regexp.MustCompile(`^\[?\d{4}-\d{2}-\d{2}|^\[?\d{2}:\d{2}:\d{2}|^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}|\b(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b|\blevel=`)
	t.timestamp = regexp.MustCompile(`^\[?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?)`)
	return &t
}

// numLine is a line with its 1-based number.
type numLine struct {
	no   int
	text string
}

// textScan is what one pass over a text part learns.
type textScan struct {
	bytes    int
	lines    int
	head     []numLine // first maxHeadLines lines
	last     numLine
	isLog    bool
	catLines [numCats]int // lines matching each category
	severe   int          // lines matching any category but WARN
	warnOnly int          // lines matching WARN and nothing more severe
	first    [numCats]numLine
	notable  []numLine // first maxNotable severe lines
	warns    []numLine // first maxNotable WARN-only lines
	tsFirst  string
	tsLast   string
}

const (
	maxHeadLines   = 12
	maxNotable     = 16
	summaryLineCap = 512 // bytes of a line kept for the summary
)

// keepLine copies the start of a line for the summary, so a retained head line
// does not pin a 5 MB string.
func keepLine(no int, s string) numLine {
	if len(s) > summaryLineCap {
		s = validPrefix(s[:summaryLineCap])
	}
	return numLine{no, strings.Clone(s)}
}

// scanText counts lines and collects head, notable and last lines.
func (t *textRegexps) scanText(text string) textScan {
	ts := textScan{bytes: len(text)}
	lower := make([]byte, 0, 256)
	logish, sampled := 0, 0
	no := 0
	for pos := 0; pos < len(text); {
		line := text[pos:]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line, pos = line[:i], pos+i+1
		} else {
			pos = len(text)
		}
		no++
		line = strings.TrimSuffix(line, "\r")
		if len(ts.head) < maxHeadLines {
			ts.head = append(ts.head, keepLine(no, line))
		}
		if sampled < 200 && strings.TrimSpace(line) != "" {
			sampled++
			if t.logLine.MatchString(line) {
				logish++
			}
		}
		mask := t.classify(line, &lower)
		if mask == 0 {
			continue
		}
		for c := range numCats {
			if mask&(1<<c) != 0 {
				ts.catLines[c]++
				if ts.first[c].no == 0 {
					ts.first[c] = keepLine(no, line)
				}
			}
		}
		if mask&^(1<<catWarn) != 0 {
			ts.severe++
			if len(ts.notable) < maxNotable {
				ts.notable = append(ts.notable, keepLine(no, line))
			}
		} else {
			ts.warnOnly++
			if len(ts.warns) < maxNotable {
				ts.warns = append(ts.warns, keepLine(no, line))
			}
		}
	}
	ts.lines = no
	if no > 0 {
		ts.last = keepLine(no, lastLine(text))
	}
	ts.isLog = sampled > 0 && logish*2 >= sampled
	if ts.isLog && len(ts.head) > 0 {
		if m := t.timestamp.FindStringSubmatch(ts.head[0].text); m != nil {
			ts.tsFirst = m[1]
		}
		if m := t.timestamp.FindStringSubmatch(ts.last.text); m != nil {
			ts.tsLast = m[1]
		}
	}
	return ts
}

// lastLine returns the last line of text (without its newline or CR).
func lastLine(text string) string {
	text = strings.TrimSuffix(text, "\n")
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[i+1:]
	}
	return strings.TrimSuffix(text, "\r")
}

// classify returns the category bit mask of a line. lower is scratch space.
func (t *textRegexps) classify(line string, lower *[]byte) int {
	if len(line) > MaxLineBytes {
		line = line[:MaxLineBytes]
	}
	b := (*lower)[:0]
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	*lower = b
	hint := false
	for _, h := range t.hints {
		if bytes.Contains(b, h) {
			hint = true
			break
		}
	}
	if !hint {
		return 0
	}
	mask := 0
	for c, re := range t.cats {
		if re.MatchString(line) {
			mask |= 1 << c
		}
	}
	return mask
}

// catList names the categories in mask.
func catList(mask int) string {
	var parts []string
	for c := range numCats {
		if mask&(1<<c) != 0 {
			parts = append(parts, catName(c))
		}
	}
	return strings.Join(parts, "/")
}

// textDigest builds the digest of a plain-text or log part.
func textDigest(name string, ts textScan) digest {
	kind := "text"
	if ts.isLog {
		kind = "log"
	}
	d := digest{
		name:  name,
		kind:  kind,
		media: "text/plain",
		label: name + " (" + kind + ", " + plural(ts.lines, "line", "lines") + ")",
	}
	d.facts = append(d.facts, name+": "+kind+", "+plural(ts.lines, "line", "lines")+", "+plural(ts.bytes, "byte", "bytes"))
	present := 0
	var counts []string
	for c := range numCats {
		if ts.catLines[c] > 0 {
			present |= 1 << c
			counts = append(counts, commas(ts.catLines[c])+" "+catName(c))
		}
	}
	if present != 0 {
		d.facts = append(d.facts, name+": notable lines: "+strings.Join(counts, ", "))
	} else if ts.isLog {
		d.facts = append(d.facts, name+": no ERROR/WARN/FATAL/exception/panic/traceback lines")
	}
	if ts.tsFirst != "" && ts.tsLast != "" {
		d.facts = append(d.facts, name+": time span "+ts.tsFirst+" to "+ts.tsLast)
	}

	// Views.
	d.views = append(d.views, viewSpec{"first " + commas(DefaultHeadChars) + " characters", Selector{Type: SelHead, Chars: DefaultHeadChars}})
	if ts.lines > 1 {
		start := max(1, ts.lines-19)
		d.views = append(d.views, viewSpec{"last " + plural(ts.lines-start+1, "line", "lines"), Selector{Type: SelLines, Start: int64(start), End: int64(ts.lines)}})
	}
	if present != 0 {
		mask, n := present&^(1<<catWarn), ts.severe
		if mask == 0 {
			mask, n = 1<<catWarn, ts.warnOnly
		}
		d.views = append(d.views, viewSpec{catList(mask) + " lines (" + commas(n) + " matches)", Selector{Type: SelGrep, Pattern: grepPattern(mask), MaxMatches: DefaultMaxMatches}})
	}

	d.render = func(n int) string { return renderText(ts, n) }
	return d
}

// renderText renders a text summary at detail level n.
func renderText(ts textScan, n int) string {
	var b strings.Builder
	if n <= 0 || ts.lines == 0 {
		return ""
	}
	width := min(80+10*n, 200)
	h := min(1+n/3, maxHeadLines, len(ts.head))
	if ts.lines == 1 {
		b.WriteString("content: ")
		b.WriteString(clip(ts.head[0].text, width*2))
		b.WriteByte('\n')
		return b.String()
	}
	if h == 1 {
		b.WriteString("first line:\n")
	} else {
		b.WriteString("first " + commas(h) + " lines:\n")
	}
	for _, l := range ts.head[:h] {
		writeNumLine(&b, l, width)
	}
	if sel := pickNotable(ts, min(n, maxNotable), h); len(sel) > 0 {
		total := ts.severe + ts.warnOnly
		b.WriteString("notable lines (" + commas(len(sel)) + " of " + commas(total) + ", ERROR/WARN/FATAL/exception/panic/traceback):\n")
		for _, l := range sel {
			writeNumLine(&b, l, width)
		}
	}
	if ts.last.no > h {
		b.WriteString("last line:\n")
		writeNumLine(&b, ts.last, width)
	}
	return b.String()
}

func writeNumLine(b *strings.Builder, l numLine, width int) {
	b.WriteString(strconv.Itoa(l.no))
	b.WriteString(": ")
	b.WriteString(clip(l.text, width))
	b.WriteByte('\n')
}

// pickNotable chooses k notable lines after line skip (those are shown as
// head lines already): the first line of each category (most severe first),
// then the earliest severe lines, then the earliest warnings; sorted by line
// number.
func pickNotable(ts textScan, k, skip int) []numLine {
	if k <= 0 {
		return nil
	}
	var out []numLine
	seen := map[int]bool{}
	add := func(l numLine) {
		if len(out) < k && l.no > skip && !seen[l.no] {
			seen[l.no] = true
			out = append(out, l)
		}
	}
	for c := range numCats {
		add(ts.first[c])
	}
	for _, l := range ts.notable {
		add(l)
	}
	for _, l := range ts.warns {
		add(l)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].no < out[j-1].no; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}
