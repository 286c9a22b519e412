package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime/policy"
)

// maxLine bounds one receipt line when reading.
const maxLine = 1 << 20

// ErrStop, returned by a Query or Follow callback, ends the iteration
// without an error.
var ErrStop = errors.New("stop")

// Filter selects receipts; zero fields select everything.
type Filter struct {
	// From and To bound ts: From <= ts < To.
	From, To time.Time
	// Sub is the exact principal subject.
	Sub string
	// ToolID is a glob over mcp.tool_id ('*', '?', '\').
	ToolID string
	// Result is the decision result: allow, deny or require_approval.
	Result string
	// Method is the exact mcp.method.
	Method string
	// Code is the exact outcome.error_code.
	Code string
}

// compiledFilter is a Filter ready to match.
type compiledFilter struct {
	Filter
	tool *policy.Glob
	// needles are byte strings every matching line holds, as the Writer
	// encodes it (encoding/json, no spaces): a line without one of them
	// is skipped before it is decoded.
	needles [][]byte
}

func (f Filter) compile() (*compiledFilter, error) {
	cf := &compiledFilter{Filter: f}
	for _, kv := range [][2]string{{"sub", f.Sub}, {"result", f.Result}, {"method", f.Method}, {"error_code", f.Code}} {
		if kv[1] == "" {
			continue
		}
		v, err := json.Marshal(kv[1])
		if err != nil {
			return nil, fmt.Errorf("receipts: filter %s: %w", kv[0], err)
		}
		cf.needles = append(cf.needles, append([]byte(`"`+kv[0]+`":`), v...))
	}
	if f.ToolID != "" {
		g, err := policy.CompileGlob(f.ToolID)
		if err != nil {
			return nil, fmt.Errorf("receipts: tool filter: %w", err)
		}
		cf.tool = &g
	}
	return cf, nil
}

// mayMatch reports whether a raw line can match: false only when it
// lacks one of the needles.
func (f *compiledFilter) mayMatch(line []byte) bool {
	for _, n := range f.needles {
		if !bytes.Contains(line, n) {
			return false
		}
	}
	return true
}

func (f *compiledFilter) match(r *Receipt) bool {
	switch {
	case !f.From.IsZero() && r.TS.Before(f.From):
		return false
	case !f.To.IsZero() && !r.TS.Before(f.To):
		return false
	case f.Sub != "" && r.Principal.Sub != f.Sub:
		return false
	case f.Result != "" && r.Decision.Result != f.Result:
		return false
	case f.Method != "" && r.MCP.Method != f.Method:
		return false
	case f.Code != "" && r.Outcome.ErrorCode != f.Code:
		return false
	case f.tool != nil && !f.tool.Match(r.MCP.ToolID):
		return false
	}
	return true
}

// Reader reads the receipts files of a directory.
type Reader struct {
	// Dir holds the receipts-YYYY-MM-DD.jsonl files.
	Dir string
	// OnBadLine, when set, is told about lines that are not receipts
	// (they are skipped either way).
	OnBadLine func(file string, line int, err error)
}

// dayFile is one receipts file and its day.
type dayFile struct {
	day  time.Time
	path string
}

// files lists the receipts files whose day may hold receipts in
// [from, to), oldest first.
func (rd Reader) files(from, to time.Time) ([]dayFile, error) {
	entries, err := os.ReadDir(rd.Dir)
	if err != nil {
		return nil, fmt.Errorf("receipts: %w", err)
	}
	var out []dayFile
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasPrefix(name, FilePrefix) || !strings.HasSuffix(name, FileSuffix) {
			continue
		}
		day, err := time.Parse(dayLayout, strings.TrimSuffix(strings.TrimPrefix(name, FilePrefix), FileSuffix))
		if err != nil {
			continue
		}
		if !from.IsZero() && !day.Add(24*time.Hour).After(from) {
			continue
		}
		if !to.IsZero() && !day.Before(to) {
			continue
		}
		out = append(out, dayFile{day: day, path: filepath.Join(rd.Dir, name)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].day.Before(out[j].day) })
	return out, nil
}

// Query calls fn with every receipt that matches f, oldest file first and
// in file order within a file. fn returning ErrStop ends the query
// without an error; any other error ends it with that error.
func (rd Reader) Query(ctx context.Context, f Filter, fn func(Receipt) error) error {
	cf, err := f.compile()
	if err != nil {
		return err
	}
	files, err := rd.files(f.From, f.To)
	if err != nil {
		return err
	}
	for _, df := range files {
		if err := rd.scanFile(ctx, df.path, cf, fn); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// Last returns the last n receipts that match f, oldest first.
func (rd Reader) Last(ctx context.Context, f Filter, n int) ([]Receipt, error) {
	if n <= 0 {
		return nil, nil
	}
	ring := make([]Receipt, 0, n)
	start := 0
	err := rd.Query(ctx, f, func(r Receipt) error {
		if len(ring) < n {
			ring = append(ring, r)
			return nil
		}
		ring[start] = r
		start = (start + 1) % n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return append(ring[start:], ring[:start]...), nil
}

func (rd Reader) scanFile(ctx context.Context, path string, cf *compiledFilter, fn func(Receipt) error) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		if line%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := rd.emit(path, line, sc.Bytes(), cf, fn); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("receipts: reading %s: %w", path, err)
	}
	return ctx.Err()
}

// emit decodes one line and hands it to fn if it matches.
func (rd Reader) emit(path string, line int, b []byte, cf *compiledFilter, fn func(Receipt) error) error {
	if len(bytes.TrimSpace(b)) == 0 || !cf.mayMatch(b) {
		return nil
	}
	var r Receipt
	if err := json.Unmarshal(b, &r); err != nil {
		if rd.OnBadLine != nil {
			rd.OnBadLine(path, line, err)
		}
		return nil
	}
	if !cf.match(&r) {
		return nil
	}
	return fn(r)
}

// Follow calls fn with every matching receipt written after it starts,
// like tail -f: it polls the newest file every poll interval (default 1 s),
// moves on to the next day's file when one appears, and returns when ctx
// is done (with nil) or fn fails (ErrStop: nil). f.From and f.To still
// filter, by ts.
func (rd Reader) Follow(ctx context.Context, f Filter, poll time.Duration, fn func(Receipt) error) error {
	if poll <= 0 {
		poll = time.Second
	}
	cf, err := f.compile()
	if err != nil {
		return err
	}
	var cur string
	var off int64
	// Start at the end of the newest file.
	if files, err := rd.files(time.Time{}, time.Time{}); err == nil && len(files) > 0 {
		cur = files[len(files)-1].path
		if st, err := os.Stat(cur); err == nil {
			off = st.Size()
		}
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var partial []byte
	lineNo := 0
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		// Read what was appended to the current file, then move to newer
		// files while there are any.
		for {
			if cur != "" {
				n, rest, err := rd.readFrom(ctx, cur, off, partial, &lineNo, cf, fn)
				off, partial = n, rest
				if err != nil {
					if errors.Is(err, ErrStop) || ctx.Err() != nil {
						return nil
					}
					return err
				}
			}
			next := rd.nextFile(cur)
			if next == "" {
				break
			}
			cur, off, partial, lineNo = next, 0, nil, 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// nextFile returns the first receipts file newer than cur ("" for none).
func (rd Reader) nextFile(cur string) string {
	files, err := rd.files(time.Time{}, time.Time{})
	if err != nil {
		return ""
	}
	for _, df := range files {
		if cur == "" || filepath.Base(df.path) > filepath.Base(cur) {
			return df.path
		}
	}
	return ""
}

// readFrom reads path from off, hands complete lines to fn, and returns
// the new offset and the incomplete tail (a line being written).
func (rd Reader) readFrom(ctx context.Context, path string, off int64, partial []byte, lineNo *int, cf *compiledFilter, fn func(Receipt) error) (int64, []byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return off, partial, nil
		}
		return off, partial, fmt.Errorf("receipts: %w", err)
	}
	defer fh.Close()
	if st, err := fh.Stat(); err == nil && st.Size() < off {
		// Truncated or replaced: start over.
		off, partial = 0, nil
	}
	if _, err := fh.Seek(off, io.SeekStart); err != nil {
		return off, partial, fmt.Errorf("receipts: %w", err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, rerr := fh.Read(buf)
		off += int64(n)
		data := append(partial, buf[:n]...)
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			*lineNo++
			if err := rd.emit(path, *lineNo, data[:i], cf, fn); err != nil {
				return off, nil, err
			}
			data = data[i+1:]
		}
		if len(data) > maxLine {
			data = nil // a runaway line: skip it
		}
		partial = append([]byte(nil), data...)
		if rerr == io.EOF || n == 0 {
			return off, partial, nil
		}
		if rerr != nil {
			return off, partial, fmt.Errorf("receipts: %w", rerr)
		}
		if ctx.Err() != nil {
			return off, partial, ctx.Err()
		}
	}
}
