package upstream

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestIsRelayed(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 200<<10) // larger than maxProbe
	tests := []struct {
		name string
		msg  string
		want bool
	}{
		// Relayed notifications, wherever the method is.
		{"method first", `{"method":"notifications/message","jsonrpc":"2.0","params":{"level":"info","data":"hi"}}`, true},
		{"method last", `{"jsonrpc":"2.0","params":{"level":"info","data":"hi"},"method":"notifications/message"}`, true},
		{"method after a large params", `{"jsonrpc":"2.0","params":{"data":"` + big + `","nested":[1,{"a":[true,null]}]},"method":"notifications/progress"}`, true},
		{"progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`, true},
		{"cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}`, true},
		{"resources/updated", `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x://y"}}`, true},
		{"resources/list_changed", `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`, true},
		{"tools/list_changed", `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`, true},
		{"prompts/list_changed", `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`, true},
		{"elicitation/complete", `{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"e"}}`, true},
		{"whitespace around", " \r\n\t{ \"jsonrpc\" : \"2.0\" ,\n \"method\" :\n\"notifications/message\" } \n", true},
		{"escaped slash in the method", `{"jsonrpc":"2.0","method":"notifications\/message"}`, true},
		{"unicode escape in the key", `{"jsonrpc":"2.0","meth\u006fd":"notifications/message"}`, true},
		{"cut short after the method", `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"in`, true},
		{"cut short after the method, no params", `{"jsonrpc":"2.0","method":"notifications/message"`, true},

		// Responses.
		{"response", `{"jsonrpc":"2.0","id":1,"result":{}}`, false},
		{"error response", `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"notifications/message"}}`, false},
		{"response carrying a method inside its result", `{"jsonrpc":"2.0","id":1,"result":{"method":"notifications/message"}}`, false},
		{"response with a large result", `{"jsonrpc":"2.0","id":"x","result":{"content":[{"type":"text","text":"` + big + `"}]}}`, false},

		// Requests.
		{"tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, false},
		{"sampling", `{"jsonrpc":"2.0","id":2,"method":"sampling/createMessage","params":{"messages":[]}}`, false},
		{"elicitation", `{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}}`, false},
		{"ping", `{"jsonrpc":"2.0","id":4,"method":"ping"}`, false},
		{"roots/list", `{"jsonrpc":"2.0","id":5,"method":"roots/list"}`, false},
		{"a nested method before the top-level one", `{"params":{"method":"notifications/message"},"method":"tools/call","id":1}`, false},

		// Notifications not in the set.
		{"initialized", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, false},
		{"roots/list_changed", `{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`, false},
		{"unknown notification", `{"jsonrpc":"2.0","method":"notifications/whatever"}`, false},
		{"bare prefix", `{"jsonrpc":"2.0","method":"notifications/"}`, false},
		{"trailing space", `{"jsonrpc":"2.0","method":"notifications/message "}`, false},
		{"upper case", `{"jsonrpc":"2.0","method":"Notifications/Message"}`, false},
		{"key in another case", `{"jsonrpc":"2.0","Method":"notifications/message"}`, false},
		{"prefix of a relayed one", `{"jsonrpc":"2.0","method":"notifications/messag"}`, false},

		// Truncated or invalid JSON.
		{"empty", ``, false},
		{"open brace", `{`, false},
		{"cut short inside the method", `{"jsonrpc":"2.0","method":"notifications/mess`, false},
		{"cut short before the method", `{"jsonrpc":"2.0","params":{"level":"info","da`, false},
		{"cut short after a key", `{"jsonrpc":"2.0","method":`, false},
		{"missing value", `{"method":}`, false},
		{"missing colon", `{"method" "notifications/message"}`, false},
		{"not json", `notifications/message`, false},
		{"single quotes", `{'method':'notifications/message'}`, false},
		{"bad value before the method", `{"params":nope,"method":"notifications/message"}`, false},
		{"method not a string", `{"jsonrpc":"2.0","method":5}`, false},
		{"method null", `{"jsonrpc":"2.0","method":null}`, false},
		{"method an object", `{"jsonrpc":"2.0","method":{"notifications/message":1}}`, false},

		// Valid JSON that is not an object.
		{"array (batch)", `[{"jsonrpc":"2.0","method":"notifications/message"}]`, false},
		{"string", `"notifications/message"`, false},
		{"number", `42`, false},
		{"null", `null`, false},
		{"true", `true`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := isRelayed([]byte(tc.msg)); got != tc.want {
				t.Errorf("isRelayed(%.120q) = %v, want %v", tc.msg, got, tc.want)
			}
		})
	}
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, len(r.data))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// splitReader returns its parts one per Read (p permitting).
type splitReader struct {
	parts [][]byte
}

func (r *splitReader) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][k:]
	return k, nil
}

// countThrough reads all of r through an sseCounter and returns what came
// out and how many times count was called.
func countThrough(t testing.TB, r io.Reader) ([]byte, int, *sseCounter) {
	t.Helper()
	n := 0
	s := &sseCounter{ReadCloser: io.NopCloser(r), count: func() { n++ }}
	out, err := io.ReadAll(s)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return out, n, s
}

// sseStream is an event stream of every shape the counter must handle,
// and the number of relayed notifications in it.
func sseStream() ([]byte, int) {
	var b strings.Builder
	want := 0
	ev := func(s string, relayed bool) {
		b.WriteString(s)
		if relayed {
			want++
		}
	}
	// A relayed notification with event and id lines.
	ev("event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"t\",\"progress\":1,\"total\":3}}\n\n", true)
	// A comment-only event: no data.
	ev(": keep-alive\n\n", false)
	// A priming event (id, empty data).
	ev("id: 2\ndata:\n\n", false)
	// A response.
	ev("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n", false)
	// CRLF line endings.
	ev("event: message\r\nid: 3\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"crlf\"}}\r\n\r\n", true)
	// Multi-line data, joined with newlines, with a comment in between.
	ev("data: {\"jsonrpc\":\"2.0\",\n: interleaved comment\ndata: \"method\":\n", false)
	ev("data: \"notifications/tools/list_changed\"}\n\n", true)
	// No space after the colon.
	ev("data:{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9}}\n\n", true)
	// A server-to-client request.
	ev("id: 7\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n", false)
	// A retry field alone.
	ev("retry: 100\n\n", false)
	// A notification that is not relayed.
	ev("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n\n", false)
	// Method after a sizeable params (still within maxProbe).
	ev("data: {\"jsonrpc\":\"2.0\",\"params\":{\"level\":\"debug\",\"data\":\""+strings.Repeat("y", 3000)+"\"},\"method\":\"notifications/message\"}\n\n", true)
	// Mixed line endings within one event, and several blank lines.
	ev("id: 10\r\ndata: {\"jsonrpc\":\"2.0\",\n", false)
	ev("data: \"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"a://b\"}}\r\n\n\n\r\n", true)
	// An event field naming something other than a message.
	ev("event: endpoint\ndata: /messages?session=1\n\n", false)
	// A field line that is not data ("database:" does not start with "data:").
	ev("database: {\"method\":\"notifications/message\"}\n\n", false)
	// The last event, a relayed one.
	ev("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/prompts/list_changed\"}\n\n", true)
	return []byte(b.String()), want
}

func TestSSECounterChunking(t *testing.T) {
	t.Parallel()
	stream, want := sseStream()
	// Every chunk size.
	for size := 1; size <= len(stream); size++ {
		out, n, _ := countThrough(t, &chunkReader{data: stream, n: size})
		if !bytes.Equal(out, stream) {
			t.Fatalf("chunk size %d: bytes changed in passing", size)
		}
		if n != want {
			t.Fatalf("chunk size %d: count called %d times, want %d", size, n, want)
		}
	}
	// One split anywhere.
	for i := 0; i <= len(stream); i++ {
		out, n, _ := countThrough(t, &splitReader{parts: [][]byte{bytes.Clone(stream[:i]), bytes.Clone(stream[i:])}})
		if !bytes.Equal(out, stream) {
			t.Fatalf("split at %d: bytes changed in passing", i)
		}
		if n != want {
			t.Fatalf("split at %d: count called %d times, want %d", i, n, want)
		}
	}
}

func TestSSECounterIncompleteEvent(t *testing.T) {
	t.Parallel()
	// An event is counted when its blank line is read, or when the stream
	// ends after it (the go-sdk delivers that last event too); a stream
	// that pauses mid-event counts nothing for it yet.
	msg := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n"
	for s, want := range map[string]int{msg: 1, msg[:len(msg)-1]: 1, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notif": 0} {
		if _, n, _ := countThrough(t, strings.NewReader(s)); n != want {
			t.Errorf("%q: count called %d times at the end of the stream, want %d", s, n, want)
		}
	}
	n := 0
	s := &sseCounter{ReadCloser: io.NopCloser(strings.NewReader("")), count: func() { n++ }}
	s.scan([]byte(msg))
	if n != 0 {
		t.Fatalf("counted before the blank line")
	}
	s.scan([]byte("\n"))
	if n != 1 {
		t.Fatalf("count = %d after the blank line, want 1", n)
	}
}

func TestSSECounterLongLines(t *testing.T) {
	t.Parallel()
	bounded := func(t *testing.T, s *sseCounter) {
		t.Helper()
		// append may round a capacity up, but never past twice the cap.
		if len(s.line) > maxProbe || cap(s.line) > 2*maxProbe {
			t.Errorf("line buffer len %d cap %d, want len <= %d", len(s.line), cap(s.line), maxProbe)
		}
		if len(s.data) > maxProbe || cap(s.data) > 2*maxProbe {
			t.Errorf("data buffer len %d cap %d, want len <= %d", len(s.data), cap(s.data), maxProbe)
		}
	}
	huge := strings.Repeat("z", 4*maxProbe)
	notif := "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n"
	tests := []struct {
		name   string
		stream string
		want   int
	}{
		// A comment line far longer than maxProbe, then a notification.
		{"long comment", ":" + huge + "\n" + notif, 1},
		// A long line without any newline at all.
		{"no newline", huge, 0},
		// A long data line: the probe keeps the method, which comes first.
		{"long data, method first", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"x\":\"" + huge + "\"}}\n\n" + notif, 2},
		// A method past the probe is missed (a bounded wait, not an error).
		{"long data, method last", "data: {\"jsonrpc\":\"2.0\",\"params\":{\"x\":\"" + huge + "\"},\"method\":\"notifications/progress\"}\n\n" + notif, 1},
		// Many data lines adding up to more than maxProbe.
		{"many data lines", strings.Repeat("data: "+strings.Repeat("q", 1000)+"\n", 300) + "\n" + notif, 1},
		// A long line with CRLF.
		{"long CRLF line", "data: " + huge + "\r\n\r\n" + notif, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, size := range []int{1 << 20, 4096, 1000, 7} {
				n := 0
				s := &sseCounter{ReadCloser: io.NopCloser(strings.NewReader("")), count: func() { n++ }}
				in := []byte(tc.stream)
				for len(in) > 0 {
					k := min(size, len(in))
					s.scan(in[:k])
					in = in[k:]
					bounded(t, s)
				}
				if n != tc.want {
					t.Errorf("chunk %d: count = %d, want %d", size, n, tc.want)
				}
			}
			out, _, s := countThrough(t, &chunkReader{data: []byte(tc.stream), n: 32 << 10})
			if string(out) != tc.stream {
				t.Error("bytes changed in passing")
			}
			bounded(t, s)
		})
	}
}

// TestSSECounterManyEmptyDataLines: one event of many data lines stays
// within the probe's bound however many lines it has.
func TestSSECounterManyEmptyDataLines(t *testing.T) {
	t.Parallel()
	s := &sseCounter{ReadCloser: io.NopCloser(strings.NewReader("")), count: func() {}}
	s.scan([]byte("data: " + strings.Repeat("a", maxProbe) + "\n"))
	s.scan(bytes.Repeat([]byte("data:\n"), 100_000))
	if len(s.data) > maxProbe {
		t.Errorf("event data buffer grew to %d bytes after 100000 empty data lines, want <= maxProbe (%d)", len(s.data), maxProbe)
	}
}

// blankLines counts the complete lines of stream that are empty (the
// lines that end an event).
func blankLines(stream []byte) int {
	lines := bytes.Split(stream, []byte("\n"))
	n := 0
	for _, l := range lines[:len(lines)-1] { // the last piece has no newline
		if len(l) == 0 || (len(l) == 1 && l[0] == '\r') {
			n++
		}
	}
	return n
}

func FuzzIsRelayed(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}`,
		`{"jsonrpc":"2.0","params":{"a":[1,2,{"b":null}]},"method":"notifications/progress"}`,
		`{"jsonrpc":"2.0","id":1,"result":{"method":"notifications/message"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/mess`,
		`[{"method":"notifications/message"}]`,
		`{"method":5}`,
		`"notifications/message"`,
		``, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !isRelayed(data) {
			return
		}
		// JSON escapes can spell the method without its plain bytes
		// ("notifications\/message"); otherwise the bytes are there.
		if !bytes.Contains(data, []byte("notifications/")) && !bytes.Contains(data, []byte(`\`)) {
			t.Fatalf("isRelayed(%q) = true without \"notifications/\" in it", data)
		}
	})
}

func FuzzSSECounter(f *testing.F) {
	stream, _ := sseStream()
	f.Add(stream, uint8(1))
	f.Add(stream, uint8(7))
	f.Add(stream, uint8(255))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\r\n\r\n"), uint8(3))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/progress\"}\n\n\n\n"), uint8(2))
	f.Add([]byte(":comment\n\nid: 1\ndata:\n\n"), uint8(0))
	f.Add([]byte("\n\n\n"), uint8(1))
	f.Add([]byte(""), uint8(0))
	f.Add([]byte("data: x\r"), uint8(4))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		size := int(chunk) + 1
		out, n, s := countThrough(t, &chunkReader{data: stream, n: size})
		if !bytes.Equal(out, stream) {
			t.Fatalf("chunk %d: bytes changed in passing", size)
		}
		if limit := blankLines(stream) + 1; n > limit {
			t.Fatalf("count called %d times for %d blank lines", n, limit-1)
		}
		// The count does not depend on how the stream was cut.
		_, whole, _ := countThrough(t, bytes.NewReader(stream))
		if n != whole {
			t.Fatalf("chunk %d: count %d, but %d reading the stream whole", size, n, whole)
		}
		if len(s.line) > maxProbe {
			t.Fatalf("line buffer holds %d bytes", len(s.line))
		}
	})
}

// TestDrainDeliversBeforeReturn: every progress and log notification an
// upstream sends before answering a call has reached the client's hooks
// when the call returns, even when the hooks are slow.
func TestDrainDeliversBeforeReturn(t *testing.T) {
	t.Parallel()
	for _, tr := range []string{"stdio", "http", "sse"} {
		t.Run(tr, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			progress := map[string]int{} // by progress token
			logs := map[string]int{}     // by log data
			opts := Options{
				OnProgress: func(p *mcp.ProgressNotificationParams) {
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					progress[fmt.Sprint(p.ProgressToken)]++
					mu.Unlock()
				},
				//lint:ignore SA1019 upstream log forwarding is still part of the 2025-11-25 protocol.
				OnLog: func(p *mcp.LoggingMessageParams) {
					time.Sleep(5 * time.Millisecond)
					mu.Lock()
					logs[fmt.Sprint(p.Data)]++
					mu.Unlock()
				},
			}
			var spec Spec
			switch tr {
			case "stdio":
				spec = stdioSpec("drain", "-extras")
			default:
				srv := startServer(t, tr, "", "-name", "drain", "-extras")
				spec = Spec{Name: "drain", ConnectTimeout: 10 * time.Second, CallTimeout: 10 * time.Second}
				if tr == "http" {
					spec.URL = srv.URL
				} else {
					spec.SSE = srv.URL
				}
			}
			c := start(t, New(spec, opts))
			waitReady(t, c.Client)
			ctx := context.Background()
			if err := c.SetLoggingLevel(ctx, "debug"); err != nil {
				t.Fatalf("SetLoggingLevel: %v", err)
			}
			const rounds, steps = 15, 3
			for i := range rounds {
				// progress: steps progress notifications, then a log message.
				token := fmt.Sprintf("tok-%d", i)
				//lint:ignore SA1019 see OnLog above.
				meta := mcp.Meta{"progressToken": token, mcp.MetaKeyLogLevel: "debug"}
				res, err := c.CallToolParams(ctx, &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{"steps": steps}, Meta: meta})
				if err != nil || text(t, res) != fmt.Sprintf("done %d steps", steps) {
					t.Fatalf("progress %d: %v %+v", i, err, res)
				}
				mu.Lock()
				gotP, gotL := progress[token], logs[fmt.Sprintf("progress done after %d steps", steps)]
				mu.Unlock()
				if gotP != steps {
					t.Fatalf("round %d: %d of %d progress notifications delivered when the call returned", i, gotP, steps)
				}
				if gotL != i+1 {
					t.Fatalf("round %d: %d of %d progress log messages delivered when the call returned", i, gotL, i+1)
				}

				// log: one log message.
				msg := fmt.Sprintf("msg-%d", i)
				//lint:ignore SA1019 see OnLog above.
				res, err = c.CallToolParams(ctx, &mcp.CallToolParams{Name: "log", Arguments: map[string]any{"level": "warning", "message": msg}, Meta: mcp.Meta{mcp.MetaKeyLogLevel: "debug"}})
				if err != nil || text(t, res) != "logged" {
					t.Fatalf("log %d: %v %+v", i, err, res)
				}
				mu.Lock()
				got := logs[msg]
				mu.Unlock()
				if got != 1 {
					t.Fatalf("round %d: log message %q delivered %d times when the call returned, want 1", i, msg, got)
				}
			}
		})
	}
}
