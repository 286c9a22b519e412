package firewall

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// errJSON reports malformed JSON met while scanning an artifact.
var errJSON = errors.New("invalid JSON")

// maxJSONDepth bounds the nesting the scanner accepts (as encoding/json does).
const maxJSONDepth = 10000

// JSON value kinds, as the scanner reports them.
const (
	kObject byte = 'o'
	kArray  byte = 'a'
	kString byte = 's'
	kNumber byte = 'n'
	kBool   byte = 'b'
	kNull   byte = 'z'
)

// kindName names a value kind.
func kindName(k byte) string {
	switch k {
	case kObject:
		return "object"
	case kArray:
		return "array"
	case kString:
		return "string"
	case kNumber:
		return "number"
	case kBool:
		return "boolean"
	case kNull:
		return "null"
	}
	return "value"
}

// kindOf maps the first byte of a value to its kind (0 if none).
func kindOf(c byte) byte {
	switch {
	case c == '{':
		return kObject
	case c == '[':
		return kArray
	case c == '"':
		return kString
	case c == '-' || (c >= '0' && c <= '9'):
		return kNumber
	case c == 't' || c == 'f':
		return kBool
	case c == 'n':
		return kNull
	}
	return 0
}

// jscan is a streaming JSON scanner: it walks a document byte by byte,
// validating it, skipping values without decoding them, and optionally
// capturing the raw bytes of one value up to a limit. Memory use is bounded by
// that limit and the nesting depth, whatever the document's size.
type jscan struct {
	r   *bufio.Reader
	off int64 // bytes consumed

	capOn   bool
	capMax  int
	capture []byte
	capOver bool // capture hit capMax

	stack    []byte
	maxDepth int
	steps    int
	check    func() error // called every few thousand values (context)
}

func newJScan(r io.Reader) *jscan {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 64<<10)
	}
	return &jscan{r: br}
}

func (s *jscan) syntax(msg string) error {
	return fmt.Errorf("%w at byte %d: %s", errJSON, s.off, msg)
}

// eof converts io.EOF in the middle of a value into a syntax error.
func (s *jscan) eof(err error) error {
	if err == io.EOF {
		return s.syntax("unexpected end of data")
	}
	return err
}

// read consumes one byte.
func (s *jscan) read() (byte, error) {
	c, err := s.r.ReadByte()
	if err != nil {
		return 0, s.eof(err)
	}
	s.off++
	if s.capOn {
		if len(s.capture) < s.capMax {
			s.capture = append(s.capture, c)
		} else {
			s.capOver = true
		}
	}
	return c, nil
}

// peek skips whitespace and returns the next byte without consuming it. At the
// end of the data it returns io.EOF.
func (s *jscan) peek() (byte, error) {
	for {
		b, err := s.r.Peek(1)
		if err != nil {
			return 0, err
		}
		switch b[0] {
		case ' ', '\t', '\n', '\r':
			if _, err := s.read(); err != nil {
				return 0, err
			}
		default:
			return b[0], nil
		}
	}
}

// expect consumes the next non-space byte, which must be c.
func (s *jscan) expect(c byte) error {
	p, err := s.peek()
	if err != nil {
		return s.eof(err)
	}
	if p != c {
		return s.syntax(fmt.Sprintf("expected %q, found %q", c, p))
	}
	_, err = s.read()
	return err
}

// startCapture begins capturing raw bytes (at most max).
func (s *jscan) startCapture(max int) {
	s.capOn, s.capMax, s.capture, s.capOver = true, max, s.capture[:0], false
}

// stopCapture ends capturing and returns the bytes (valid until the next
// startCapture) and whether the limit cut them.
func (s *jscan) stopCapture() ([]byte, bool) {
	s.capOn = false
	return s.capture, s.capOver
}

// skipString consumes a string, validating escapes and control characters.
func (s *jscan) skipString() error {
	if err := s.expect('"'); err != nil {
		return err
	}
	for {
		c, err := s.read()
		if err != nil {
			return err
		}
		switch {
		case c == '"':
			return nil
		case c == '\\':
			e, err := s.read()
			if err != nil {
				return err
			}
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				for range 4 {
					h, err := s.read()
					if err != nil {
						return err
					}
					if !isHex(h) {
						return s.syntax("bad \\u escape")
					}
				}
			default:
				return s.syntax("bad escape")
			}
		case c < 0x20:
			return s.syntax("control character in string")
		}
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// readKey consumes an object key and returns its decoded value when the raw
// key is at most max bytes long (ok false otherwise).
func (s *jscan) readKey(max int) (string, bool, error) {
	wasOn := s.capOn
	if !wasOn {
		s.startCapture(max + 2)
	}
	start := len(s.capture)
	if err := s.skipString(); err != nil {
		return "", false, err
	}
	if wasOn {
		// An enclosing capture holds the key too; decode from it if complete.
		if s.capOver {
			return "", false, nil
		}
		k, err := unquote(s.capture[start:])
		return k, err == nil, nil
	}
	raw, over := s.stopCapture()
	if over {
		return "", false, nil
	}
	k, err := unquote(raw)
	return k, err == nil, nil
}

// skipNumber consumes a number, validating its grammar.
func (s *jscan) skipNumber() error {
	digits := func() (int, error) {
		n := 0
		for {
			b, err := s.r.Peek(1)
			if err != nil || b[0] < '0' || b[0] > '9' {
				if err == io.EOF {
					err = nil
				}
				return n, err
			}
			if _, err := s.read(); err != nil {
				return n, err
			}
			n++
		}
	}
	optional := func(set string) (bool, error) {
		b, err := s.r.Peek(1)
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for i := 0; i < len(set); i++ {
			if b[0] == set[i] {
				_, err := s.read()
				return true, err
			}
		}
		return false, nil
	}
	if _, err := optional("-"); err != nil {
		return err
	}
	b, err := s.r.Peek(1)
	if err != nil {
		return s.eof(err)
	}
	if b[0] == '0' {
		if _, err := s.read(); err != nil {
			return err
		}
	} else if n, err := digits(); err != nil {
		return err
	} else if n == 0 {
		return s.syntax("bad number")
	}
	if ok, err := optional("."); err != nil {
		return err
	} else if ok {
		if n, err := digits(); err != nil {
			return err
		} else if n == 0 {
			return s.syntax("bad number")
		}
	}
	if ok, err := optional("eE"); err != nil {
		return err
	} else if ok {
		if _, err := optional("+-"); err != nil {
			return err
		}
		if n, err := digits(); err != nil {
			return err
		} else if n == 0 {
			return s.syntax("bad number")
		}
	}
	return nil
}

// skipLiteral consumes true, false or null.
func (s *jscan) skipLiteral() error {
	p, err := s.peek()
	if err != nil {
		return s.eof(err)
	}
	lit := "null"
	switch p {
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	}
	for i := 0; i < len(lit); i++ {
		c, err := s.read()
		if err != nil {
			return err
		}
		if c != lit[i] {
			return s.syntax("bad literal")
		}
	}
	return nil
}

// skipScalar consumes a string, number or literal starting with c.
func (s *jscan) skipScalar(c byte) error {
	switch kindOf(c) {
	case kString:
		return s.skipString()
	case kNumber:
		return s.skipNumber()
	case kBool, kNull:
		return s.skipLiteral()
	}
	return s.syntax(fmt.Sprintf("unexpected %q", c))
}

// skipValue consumes one value (iteratively, so deep nesting cannot overflow
// the stack). depth is the nesting depth of the value itself; the deepest
// container seen is recorded in maxDepth.
func (s *jscan) skipValue(depth int) error {
	stack := s.stack[:0]
	defer func() { s.stack = stack[:0] }()
	for {
		// Expect a value.
		c, err := s.peek()
		if err != nil {
			return s.eof(err)
		}
		if s.steps++; s.steps&0xfff == 0 && s.check != nil {
			if err := s.check(); err != nil {
				return err
			}
		}
		if c == '{' || c == '[' {
			if _, err := s.read(); err != nil {
				return err
			}
			if d := depth + len(stack) + 1; d > s.maxDepth {
				s.maxDepth = d
				if d > maxJSONDepth {
					return s.syntax("nesting too deep")
				}
			}
			e, err := s.peek()
			if err != nil {
				return s.eof(err)
			}
			if (c == '{' && e == '}') || (c == '[' && e == ']') {
				if _, err := s.read(); err != nil {
					return err
				}
			} else {
				stack = append(stack, c)
				if c == '{' {
					if err := s.skipString(); err != nil {
						return err
					}
					if err := s.expect(':'); err != nil {
						return err
					}
				}
				continue
			}
		} else if err := s.skipScalar(c); err != nil {
			return err
		}
		// A value ended: close containers or move to the next member.
	after:
		for {
			if len(stack) == 0 {
				return nil
			}
			c, err := s.peek()
			if err != nil {
				return s.eof(err)
			}
			top := stack[len(stack)-1]
			switch {
			case c == ',':
				if _, err := s.read(); err != nil {
					return err
				}
				if top == '{' {
					if err := s.skipString(); err != nil {
						return err
					}
					if err := s.expect(':'); err != nil {
						return err
					}
				}
				break after
			case (top == '{' && c == '}') || (top == '[' && c == ']'):
				if _, err := s.read(); err != nil {
					return err
				}
				stack = stack[:len(stack)-1]
			default:
				return s.syntax(fmt.Sprintf("unexpected %q", c))
			}
		}
	}
}

// captureValue consumes one value and returns its raw bytes (at most max) and
// whether they were cut.
func (s *jscan) captureValue(depth, max int) ([]byte, bool, error) {
	if _, err := s.peek(); err != nil {
		return nil, false, s.eof(err)
	}
	s.startCapture(max)
	err := s.skipValue(depth)
	raw, over := s.stopCapture()
	return raw, over, err
}

// members iterates the members of the object or elements of the array that
// starts at the next byte. For an object, fn gets the decoded key (ok false if
// longer than keyMax); for an array, the index. fn must consume the value (or
// return stop = true to end the iteration early, leaving the scanner inside the
// container).
func (s *jscan) members(keyMax int, fn func(key string, keyOK bool, index int) (stop bool, err error)) error {
	c, err := s.peek()
	if err != nil {
		return s.eof(err)
	}
	if c != '{' && c != '[' {
		return s.syntax("not a container")
	}
	if _, err := s.read(); err != nil {
		return err
	}
	closer := byte('}')
	if c == '[' {
		closer = ']'
	}
	for i := 0; ; i++ {
		p, err := s.peek()
		if err != nil {
			return s.eof(err)
		}
		if p == closer && i == 0 {
			_, err := s.read()
			return err
		}
		if i > 0 {
			if p == closer {
				_, err := s.read()
				return err
			}
			if p != ',' {
				return s.syntax(fmt.Sprintf("unexpected %q", p))
			}
			if _, err := s.read(); err != nil {
				return err
			}
		}
		var key string
		keyOK := false
		if c == '{' {
			if key, keyOK, err = s.readKey(keyMax); err != nil {
				return err
			}
			if err := s.expect(':'); err != nil {
				return err
			}
		}
		if _, err := s.peek(); err != nil {
			return s.eof(err)
		}
		stop, err := fn(key, keyOK, i)
		if err != nil || stop {
			return err
		}
	}
}
