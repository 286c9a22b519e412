package receipts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// A Position names one receipt line: its day file and the byte offset
// where the line starts. Its text form, "YYYY-MM-DD:OFFSET", is what the
// operator console puts in links; ParsePosition reads it back.
type Position struct {
	Day    time.Time
	Offset int64
}

// String is the text form of p.
func (p Position) String() string {
	return p.Day.Format(dayLayout) + ":" + strconv.FormatInt(p.Offset, 10)
}

// ErrBadPosition is returned for a position that does not parse.
var ErrBadPosition = errors.New("receipts: bad position")

// ParsePosition reads a position's text form.
func ParsePosition(s string) (Position, error) {
	day, off, ok := strings.Cut(s, ":")
	if !ok || len(s) > 40 {
		return Position{}, ErrBadPosition
	}
	d, err := time.Parse(dayLayout, day)
	if err != nil {
		return Position{}, ErrBadPosition
	}
	n, err := strconv.ParseInt(off, 10, 64)
	if err != nil || n < 0 || (off != "0" && off[0] == '0') {
		return Position{}, ErrBadPosition
	}
	return Position{Day: d, Offset: n}, nil
}

func (rd Reader) pathOf(day time.Time) string {
	return filepath.Join(rd.Dir, FilePrefix+day.Format(dayLayout)+FileSuffix)
}

// At returns the receipt that starts at p.
func (rd Reader) At(p Position) (Receipt, error) {
	fh, err := os.Open(rd.pathOf(p.Day))
	if err != nil {
		return Receipt{}, fmt.Errorf("receipts: %w", err)
	}
	defer fh.Close()
	if p.Offset > 0 {
		// A position must start a line.
		var prev [1]byte
		if _, err := fh.ReadAt(prev[:], p.Offset-1); err != nil || prev[0] != '\n' {
			return Receipt{}, ErrBadPosition
		}
	}
	line, err := readLineAt(fh, p.Offset)
	if err != nil {
		return Receipt{}, err
	}
	var r Receipt
	if err := json.Unmarshal(line, &r); err != nil {
		return Receipt{}, ErrBadPosition
	}
	return r, nil
}

// readLineAt reads the line starting at off (at most maxLine bytes).
func readLineAt(fh *os.File, off int64) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	chunk := make([]byte, 4096)
	for len(buf) <= maxLine {
		n, err := fh.ReadAt(chunk, off+int64(len(buf)))
		if i := bytes.IndexByte(chunk[:n], '\n'); i >= 0 {
			return append(buf, chunk[:i]...), nil
		}
		buf = append(buf, chunk[:n]...)
		if err == io.EOF {
			if len(buf) == 0 {
				return nil, ErrBadPosition
			}
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("receipts: %w", err)
		}
	}
	return nil, ErrBadPosition
}

// Entry is a receipt and where it is.
type Entry struct {
	Receipt
	At Position
}

// Newest returns up to n receipts matching f, newest first, that lie
// before the position before (the zero Position: from the newest), and
// the position to continue from (zero when nothing older is left). It
// reads the files backwards in blocks, so a page costs what it shows, not
// what the day holds.
func (rd Reader) Newest(ctx context.Context, f Filter, before Position, n int) ([]Entry, Position, error) {
	if n <= 0 {
		return nil, Position{}, nil
	}
	cf, err := f.compile()
	if err != nil {
		return nil, Position{}, err
	}
	files, err := rd.files(f.From, f.To)
	if err != nil {
		return nil, Position{}, err
	}
	var out []Entry
	var last Position
	stop := errors.New("page full")
	for i := len(files) - 1; i >= 0; i-- {
		df := files[i]
		end := int64(-1)
		if !before.Day.IsZero() {
			switch {
			case df.day.After(before.Day):
				continue
			case df.day.Equal(before.Day):
				end = before.Offset
			}
		}
		err := rd.scanBackward(ctx, df, end, func(off int64, line []byte) error {
			if !cf.mayMatch(line) {
				return nil
			}
			var r Receipt
			if json.Unmarshal(line, &r) != nil || !cf.match(&r) {
				return nil
			}
			if len(out) == n {
				// One more than the page: there is an older one.
				return stop
			}
			last = Position{Day: df.day, Offset: off}
			out = append(out, Entry{Receipt: r, At: last})
			return nil
		})
		if errors.Is(err, stop) {
			return out, last, nil
		}
		if err != nil {
			return nil, Position{}, err
		}
	}
	return out, Position{}, nil
}

// backBlock is the block size of a backward scan.
const backBlock = 64 << 10

// scanBackward calls fn with each complete line of df that ends at or
// before end (-1: the whole file), last line first, with the offset the
// line starts at.
func (rd Reader) scanBackward(ctx context.Context, df dayFile, end int64, fn func(off int64, line []byte) error) error {
	fh, err := os.Open(df.path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("receipts: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return fmt.Errorf("receipts: %w", err)
	}
	size := st.Size()
	if end < 0 || end > size {
		end = size
	}
	// tail holds the bytes after the last newline seen so far (the start
	// of a line whose beginning is in an earlier block).
	var tail, buf []byte
	pos := end
	first := true
	for pos > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := max(pos-backBlock, 0)
		// One buffer for the whole scan: the block, then the tail
		// carried over from the block after it (moved first: it lies
		// in the same buffer).
		n := int(pos - start)
		if need := n + len(tail); cap(buf) < need {
			nb := make([]byte, need, need+backBlock)
			copy(nb[n:], tail)
			buf = nb
		} else {
			buf = buf[:need]
			copy(buf[n:], tail)
		}
		data := buf
		if _, err := fh.ReadAt(data[:n], start); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("receipts: %w", err)
		}
		if first && end == size && len(data) > 0 && data[len(data)-1] != '\n' {
			// A line still being written at the end: not a receipt yet.
			if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
				data = data[:i+1]
			} else {
				data = nil
			}
		}
		first = false
		// Hand out every line that starts after a newline in data.
		for {
			body := bytes.TrimSuffix(data, []byte{'\n'})
			i := bytes.LastIndexByte(body, '\n')
			if i < 0 {
				break
			}
			line := body[i+1:]
			if len(bytes.TrimSpace(line)) > 0 {
				if err := fn(start+int64(i)+1, line); err != nil {
					return err
				}
			}
			data = data[:i+1]
		}
		tail = data
		if len(tail) > maxLine {
			// A line longer than any receipt: skip it.
			tail = nil
		}
		pos = start
	}
	if line := bytes.TrimSuffix(tail, []byte{'\n'}); len(bytes.TrimSpace(line)) > 0 {
		return fn(0, line)
	}
	return nil
}
