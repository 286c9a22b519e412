package upstream

import (
	"bytes"
	"encoding/json"
	"io"
)

// relayedNotifications are the notifications a client handles one after
// another, in order, in its handler queue. They are counted as they are
// read from the wire and again when the client has handled them; a call
// waits for the two counts to meet before it returns (see Client.drain).
var relayedNotifications = map[string]bool{
	"notifications/message": true, "notifications/progress": true, "notifications/cancelled": true,
	"notifications/resources/updated": true, "notifications/resources/list_changed": true,
	"notifications/tools/list_changed": true, "notifications/prompts/list_changed": true,
	"notifications/elicitation/complete": true,
}

// maxProbe bounds how much of one server-sent event is kept to find its
// JSON-RPC method; a notification's method comes before any large part in
// practice, and a miss only costs one call a bounded wait.
const maxProbe = 64 << 10

// sseCounter passes an HTTP response body (a text/event-stream) through and
// calls count for every event that carries a relayed notification. The
// go-sdk's streamable client connection cannot be wrapped (it has
// unexported methods the client relies on), so the messages are counted
// where they arrive instead.
type sseCounter struct {
	io.ReadCloser
	count func()
	line  []byte // the current line, up to maxProbe
	over  bool   // the current line exceeded maxProbe
	data  []byte // the current event's data, up to maxProbe
	// other is set when the current event is named, and not "message":
	// the go-sdk client skips such events.
	other bool
}

// Read implements io.Reader.
func (s *sseCounter) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.scan(p[:n])
	if err == io.EOF {
		// The go-sdk delivers an event the stream ends without a blank
		// line after, too.
		if len(s.line) > 0 {
			s.endLine()
		}
		s.endLine()
	}
	return n, err
}

func (s *sseCounter) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if !s.over {
			if len(s.line)+len(chunk) > maxProbe {
				s.line = append(s.line, chunk[:maxProbe-len(s.line)]...)
				s.over = true
			} else {
				s.line = append(s.line, chunk...)
			}
		}
		if i < 0 {
			return
		}
		s.endLine()
		b = b[i+1:]
	}
}

func (s *sseCounter) endLine() {
	line := bytes.TrimSuffix(s.line, []byte("\r"))
	s.line, s.over = s.line[:0], false
	switch {
	case len(line) == 0:
		if len(s.data) > 0 && !s.other && isRelayed(s.data) {
			s.count()
		}
		s.data, s.other = s.data[:0], false
	case bytes.HasPrefix(line, []byte("event:")):
		name := string(bytes.TrimSpace(bytes.TrimPrefix(line, []byte("event:"))))
		s.other = name != "" && name != "message"
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))
		if len(s.data) > 0 && len(s.data) < maxProbe {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, v[:min(len(v), maxProbe-min(len(s.data), maxProbe))]...)
	}
}

// isRelayed reports whether a JSON-RPC message (possibly cut short) is a
// relayed notification: its top-level "method" is one of them. Only
// notifications have methods under "notifications/", so the id need not be
// looked at.
func isRelayed(msg []byte) bool {
	// Most events are answers: skip the decoder unless a notification's
	// method (possibly with its slash escaped) can be in there.
	if !bytes.Contains(msg, []byte(`"notifications/`)) && !bytes.Contains(msg, []byte(`"notifications\/`)) {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return false
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		if k == "method" {
			var m string
			if dec.Decode(&m) != nil {
				return false
			}
			return relayedNotifications[m]
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return false
		}
	}
	return false
}
