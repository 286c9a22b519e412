package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
	"github.com/quiver-mcp/quiver/runtime/policy"
	"github.com/quiver-mcp/quiver/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// testClock is a settable clock.
type testClock struct{ ns atomic.Int64 }

func newTestClock(t time.Time) *testClock {
	c := &testClock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

var day1 = time.Date(2026, 3, 1, 23, 59, 58, 0, time.UTC)

func receiptSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Receipt))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "https://quiver-mcp.dev/schemas/receipt.schema.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// lines returns the lines of every receipts file in dir, by file name.
func lines(t testing.TB, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			out[e.Name()] = append(out[e.Name()], sc.Text())
		}
		f.Close()
	}
	return out
}

// sample builds a realistic receipt.
func sample(c *testClock, sub, tool string, effect policy.Effect) Receipt {
	r := New("tools/call:tool_execute", c.Now())
	r.Principal = PrincipalOf(identity.Principal{Sub: sub, ActorType: "agent", ClientID: "claude-code", OrgID: "acme", Issuer: "corp"})
	r.MCP.ServerID, r.MCP.ToolName, r.MCP.ToolID, r.MCP.TrustLevel, r.MCP.SessionID = "github", "create_issue", tool, "verified", "sess-1"
	r.Request.ArgsHash, r.Request.SizeBytesIn, _ = ArgsHash([]byte(`{"title":"x"}`))
	r.Decision = DecisionOf(policy.Decision{Effect: effect, PolicyID: "fleet", PolicyVersion: "sha256:ab", RuleID: "r1", ReasonCodes: []string{"POLICY_ALLOWED"}})
	r.Outcome = Outcome{Status: StatusSuccess, DurationMS: 12.5, SizeBytesOut: 300}
	return r
}

func TestEmittedReceiptsValidate(t *testing.T) {
	dir := t.TempDir()
	c := newTestClock(day1)
	var copyBuf bytes.Buffer
	w, err := NewWriter(WriterOptions{Dir: dir, Now: c.Now, Copy: &copyBuf})
	if err != nil {
		t.Fatal(err)
	}
	w.Emit(sample(c, "alice", "github:create_issue#34afee88", policy.EffectAllow))
	// A denied, unauthenticated request refused before MCP routing.
	deny := New("http", c.Now())
	deny.Decision.ReasonCodes = []string{"missing_token"}
	deny.Outcome.ErrorCode = "AUTH_FAILED"
	w.Emit(deny)
	// An approval flow receipt.
	ap := sample(c, "bob", "github:delete_repo#22222222", policy.EffectRequireApproval)
	ap.Approval = Approval{Required: true, ApprovalID: NewID(), ApprovedBy: "ops@example", ApprovedAt: c.Now().Format(time.RFC3339), StepUp: "none"}
	ap.IncidentMode = true
	ap.Tool = &Tool{Class: "destructive", DenialStage: StagePermission, OutputSHA256: strings.Repeat("ab", 32),
		RedactedPaths: []string{"customer.email"}, DocumentHashes: []string{"/content=sha256:" + strings.Repeat("0", 64)}, BatchTotalBytes: 12}
	w.Emit(ap)
	// The zero receipt, and one with every field out of bounds: Emit
	// makes both valid.
	w.Emit(Receipt{})
	bad := Receipt{ReceiptID: "not-a-uuid", TraceID: "XYZ", TS: c.Now().In(time.FixedZone("x", 3600))}
	bad.Principal.ActorType = "robot"
	bad.Principal.Sub = strings.Repeat("é", 2000)
	bad.MCP.Method = strings.Repeat("m", 500)
	bad.MCP.TrustLevel = "total"
	bad.Request = Request{ArgsHash: "nothex", SizeBytesIn: -5}
	bad.Decision = Decision{Result: "maybe", ReasonCodes: []string{"bad code!", "", strings.Repeat("X", 300)}}
	bad.TokenHandling.Mode = "passthrough"
	bad.Sandbox = Sandbox{FSPolicy: "all", NetPolicy: "open"}
	bad.Approval.StepUp = "yubikey"
	many := make([]string, 300)
	for i := range many {
		many[i] = strings.Repeat("p\n", 400)
	}
	bad.Tool = &Tool{Class: "admin", DenialStage: "later", OutputSHA256: "nothex", RedactedPaths: many, BatchTotalBytes: -3}
	bad.Outcome = Outcome{Status: "fine", DurationMS: -1, SizeBytesOut: -1, ErrorCode: strings.Repeat("E", 100),
		Message: "upstream said: Authorization: Bearer abcdefghijklmnop\nand token=hunter2hunter2 " + strings.Repeat("z", 2000)}
	w.Emit(bad)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sch := receiptSchema(t)
	got := lines(t, dir)
	all := got[FileName(day1)]
	if len(all) != 5 {
		t.Fatalf("files %v", got)
	}
	for i, l := range all {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("receipt %d does not validate: %v\n%s", i, err, l)
		}
	}
	if copyBuf.String() != strings.Join(all, "\n")+"\n" {
		t.Fatal("the copy differs from the file")
	}
	last := all[4]
	if strings.Contains(last, "abcdefghijklmnop") || strings.Contains(last, "hunter2") {
		t.Fatalf("secret in receipt: %s", last)
	}
	var r Receipt
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		t.Fatal(err)
	}
	if r.TS.Location() != time.UTC || r.Decision.Result != "deny" || r.Outcome.Status != StatusError || r.TokenHandling.Mode != TokenNone {
		t.Fatalf("%+v", r)
	}
	if tl := r.Tool; tl == nil || tl.Class != "unclassified" || tl.DenialStage != "" || tl.OutputSHA256 != "" || len(tl.RedactedPaths) != maxListed || tl.BatchTotalBytes != 0 {
		t.Fatalf("tool section %+v", r.Tool)
	}
	if !strings.Contains(all[2], `"tool":{"tool_class":"destructive","denial_stage":"permission"`) {
		t.Fatalf("tool section not written: %s", all[2])
	}
	// The passthrough flag is never invented.
	if strings.Contains(strings.Join(all, ""), `"passthrough_detected":true`) {
		t.Fatal("passthrough_detected true")
	}
}

func TestArgsHash(t *testing.T) {
	h1, n1, err := ArgsHash([]byte(`{"b": 1, "a": {"y": [1, 2.50], "x": "<&>"}}`))
	if err != nil {
		t.Fatal(err)
	}
	h2, _, _ := ArgsHash([]byte(`{"a":{"x":"<&>","y":[1,2.50]},"b":1}`))
	if h1 != h2 || len(h1) != 64 || n1 == 0 {
		t.Fatalf("%s %s", h1, h2)
	}
	h3, _, _ := ArgsHash([]byte(`{"a":{"x":"<&>","y":[1,2.5]},"b":1}`))
	if h3 == h1 {
		t.Fatal("numbers are hashed as written")
	}
	e1, _, _ := ArgsHash(nil)
	e2, _, _ := ArgsHash([]byte("{}"))
	e3, _, _ := ArgsHash([]byte(" null "))
	if e1 != e2 || e2 != e3 {
		t.Fatal("empty arguments")
	}
	// sha256("{}")
	if e1 != "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("sha256 of {}: %s", e1)
	}
	for _, bad := range []string{"{", `{"a":1} x`, "nope"} {
		if _, _, err := ArgsHash([]byte(bad)); !errors.Is(err, ErrArgs) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, secret string }{
		{"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.sig_nature-x", "eyJhbGciOiJIUzI1NiJ9"},
		{"bearer abcdef0123456789", "abcdef0123456789"},
		{"key sk-proj-AbCdEf0123456789xyzXYZ failed", "sk-proj-AbCdEf0123456789xyzXYZ"},
		{"sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"},
		{"token ghp_0123456789abcdefghijABCDEFGHIJ0123 rejected", "ghp_0123456789abcdefghijABCDEFGHIJ0123"},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "11ABCDEFG0123456789"},
		{"AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE"},
		{"aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"},
		{"password=hunter2 user=bob", "hunter2"},
		{`{"password": "s3cr3t!"}`, "s3cr3t!"},
		{"db_password: 'quoted value'", "quoted value"},
		{"api_key=abc123&x=1", "abc123"},
		{"client_secret=xyz789", "xyz789"},
		{"https://user:pa55word@db.example/x", "pa55word"},
		{"slack xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"},
		{"-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"},
		{"AIzaSyA-0123456789abcdefghijklmnopqrstu", "AIzaSyA-0123456789"},
	}
	for _, tc := range tests {
		got := Redact(tc.in)
		if strings.Contains(got, tc.secret) || !strings.Contains(got, Redacted) {
			t.Errorf("Redact(%q) = %q", tc.in, got)
		}
	}
	for _, keep := range []string{"tool github:create_issue#34afee88 failed", "max_tokens=800", "status 401", "token budget exceeded", "user=bob"} {
		if got := Redact(keep); got != keep {
			t.Errorf("Redact(%q) = %q", keep, got)
		}
	}
	if got := Redact("password=hunter2"); got != "password="+Redacted {
		t.Errorf("key kept: %q", got)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestBatching(t *testing.T) {
	dir := t.TempDir()
	c := newTestClock(day1)
	w, err := NewWriter(WriterOptions{Dir: dir, Now: c.Now, BatchSize: 3, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for range 3 {
		w.Emit(sample(c, "a", "t:x", policy.EffectAllow))
	}
	// A full batch is written without waiting for the interval.
	waitFor(t, "a full batch", func() bool { return w.Stats().Written == 3 })
	if st := w.Stats(); st.Batches != 1 || st.Emitted != 3 {
		t.Fatalf("%+v", st)
	}
	w.Emit(sample(c, "a", "t:x", policy.EffectAllow))
	time.Sleep(20 * time.Millisecond)
	if w.Stats().Written != 3 {
		t.Fatal("a partial batch was written before the interval")
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Written != 4 || st.Batches != 2 {
		t.Fatalf("%+v", st)
	}
	// After Flush the lines are on disk.
	if n := len(lines(t, dir)[FileName(day1)]); n != 4 {
		t.Fatalf("%d lines on disk", n)
	}
	// The interval writes a partial batch on its own.
	w2, _ := NewWriter(WriterOptions{Dir: t.TempDir(), Now: c.Now, BatchSize: 100, FlushInterval: 5 * time.Millisecond})
	defer w2.Close()
	w2.Emit(sample(c, "a", "t:x", policy.EffectAllow))
	waitFor(t, "the interval flush", func() bool { return w2.Stats().Written == 1 })
}

func TestDayRollover(t *testing.T) {
	dir := t.TempDir()
	c := newTestClock(day1)
	w, _ := NewWriter(WriterOptions{Dir: dir, Now: c.Now})
	w.Emit(sample(c, "a", "t:1", policy.EffectAllow)) // 23:59:58
	c.Advance(time.Second)
	w.Emit(sample(c, "a", "t:2", policy.EffectAllow)) // 23:59:59
	c.Advance(2 * time.Second)
	w.Emit(sample(c, "a", "t:3", policy.EffectAllow)) // 00:00:01 next day
	// A late receipt of the previous day goes to its own day's file.
	late := sample(c, "a", "t:4", policy.EffectAllow)
	late.TS = day1.Add(time.Second / 2)
	w.Emit(late)
	// Receipts in another time zone are filed by their UTC day.
	tz := sample(c, "a", "t:5", policy.EffectAllow)
	tz.TS = c.Now().In(time.FixedZone("UTC-5", -5*3600))
	w.Emit(tz)
	_ = w.Close()
	got := lines(t, dir)
	d1, d2 := FileName(day1), FileName(day1.Add(24*time.Hour))
	if d2 != "receipts-2026-03-02.jsonl" || len(got) != 2 || len(got[d1]) != 3 || len(got[d2]) != 2 {
		t.Fatalf("files: %v", got)
	}
	if !strings.Contains(got[d2][0], `"ts":"2026-03-02T00:00:01Z"`) {
		t.Fatalf("%s", got[d2][0])
	}
}

// blockingWriter blocks every Write until released.
type blockingWriter struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	b.once.Do(func() { close(b.entered) })
	<-b.release
	return len(p), nil
}

func TestDropsWhenFull(t *testing.T) {
	c := newTestClock(day1)
	bw := &blockingWriter{entered: make(chan struct{}), release: make(chan struct{})}
	w, _ := NewWriter(WriterOptions{Copy: bw, Now: c.Now, QueueSize: 2, BatchSize: 1})
	w.Emit(sample(c, "a", "t:x", policy.EffectAllow))
	<-bw.entered // the flusher is stuck writing the first receipt
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			w.Emit(sample(c, "a", "t:x", policy.EffectAllow))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Emit blocked on a full queue")
	}
	if st := w.Stats(); st.Dropped != 8 || st.Emitted != 3 {
		t.Fatalf("%+v", st)
	}
	close(bw.release)
	_ = w.Close()
	w.Emit(sample(c, "a", "t:x", policy.EffectAllow))
	if st := w.Stats(); st.Written != 3 || st.Dropped != 9 {
		t.Fatalf("after close: %+v", st)
	}
	if err := w.Flush(); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
}

// failWriter always fails.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestWriteFailuresAreCounted(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "receipts")
	c := newTestClock(day1)
	w, err := NewWriter(WriterOptions{Dir: dir, Now: c.Now, Copy: failWriter{}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// The directory disappears under the writer (and a file takes its
	// place, so that even root cannot write there).
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	w.Emit(sample(c, "a", "t:x", policy.EffectAllow)) // never fails the caller
	if err := w.Flush(); err == nil {
		t.Fatal("Flush reported no error")
	}
	if st := w.Stats(); st.WriteErrors != 2 || st.Written != 0 {
		t.Fatalf("%+v", st)
	}
	// Writes resume when the directory is back.
	_ = os.Remove(dir)
	_ = os.MkdirAll(dir, 0o700)
	w.Emit(sample(c, "a", "t:x", policy.EffectAllow))
	_ = w.Flush()
	if st := w.Stats(); st.Written != 1 {
		t.Fatalf("%+v", st)
	}
}

// writeFixture writes receipts over three days and returns the dir.
func writeFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	c := newTestClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	w, _ := NewWriter(WriterOptions{Dir: dir, Now: c.Now})
	for d := range 3 {
		for i, who := range []string{"alice", "bob", "alice", "carol"} {
			eff := policy.EffectAllow
			if i%2 == 1 {
				eff = policy.EffectDeny
			}
			tool := []string{"github:create_issue#34afee88", "slack:send#283a5dcf"}[i%2]
			if who == "carol" {
				tool = "github:list_repos#da62b2ed"
			}
			w.Emit(sample(c, who, tool, eff))
			c.Advance(time.Minute)
		}
		c.Set(time.Date(2026, 3, 2+d, 10, 0, 0, 0, time.UTC))
	}
	_ = w.Close()
	// A foreign file and a bad line are ignored.
	_ = os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	f, _ := os.OpenFile(filepath.Join(dir, "receipts-2026-03-02.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString("{broken\n")
	f.Close()
	return dir
}

func TestReaderFilters(t *testing.T) {
	dir := writeFixture(t)
	var bad int
	rd := Reader{Dir: dir, OnBadLine: func(string, int, error) { bad++ }}
	count := func(f Filter) int {
		t.Helper()
		n := 0
		if err := rd.Query(context.Background(), f, func(Receipt) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{"all", Filter{}, 12},
		{"sub", Filter{Sub: "alice"}, 6},
		{"result", Filter{Result: "deny"}, 6},
		{"tool glob", Filter{ToolID: "github:*"}, 9},
		{"tool glob exact", Filter{ToolID: "slack:send#283a5dcf"}, 3},
		{"sub and result", Filter{Sub: "alice", Result: "deny"}, 0},
		{"from", Filter{From: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)}, 8},
		{"to", Filter{To: time.Date(2026, 3, 2, 10, 1, 0, 0, time.UTC)}, 5},
		{"range in a day", Filter{From: time.Date(2026, 3, 3, 10, 1, 0, 0, time.UTC), To: time.Date(2026, 3, 3, 10, 3, 0, 0, time.UTC)}, 2},
		{"method", Filter{Method: "tools/call:tool_execute"}, 12},
		{"other method", Filter{Method: "tools/list"}, 0},
	}
	for _, tc := range tests {
		if got := count(tc.f); got != tc.want {
			t.Errorf("%s: %d receipts, want %d", tc.name, got, tc.want)
		}
	}
	if bad == 0 {
		t.Error("the bad line was not reported")
	}
	last, err := rd.Last(context.Background(), Filter{Sub: "alice"}, 4)
	if err != nil || len(last) != 4 {
		t.Fatal(err, len(last))
	}
	for i := 1; i < len(last); i++ {
		if last[i].TS.Before(last[i-1].TS) {
			t.Fatal("Last is not oldest first")
		}
	}
	if !last[3].TS.Equal(time.Date(2026, 3, 3, 10, 2, 0, 0, time.UTC)) {
		t.Fatalf("last = %v", last[3].TS)
	}
	n := 0
	_ = rd.Query(context.Background(), Filter{}, func(Receipt) error {
		n++
		if n == 2 {
			return ErrStop
		}
		return nil
	})
	if n != 2 {
		t.Fatal("ErrStop")
	}
	if err := rd.Query(context.Background(), Filter{ToolID: `x\`}, func(Receipt) error { return nil }); err == nil {
		t.Fatal("bad glob accepted")
	}
	if err := (Reader{Dir: filepath.Join(dir, "missing")}).Query(context.Background(), Filter{}, func(Receipt) error { return nil }); err == nil {
		t.Fatal("missing dir")
	}
}

func TestFollow(t *testing.T) {
	dir := writeFixture(t)
	c := newTestClock(time.Date(2026, 3, 3, 23, 59, 59, 0, time.UTC))
	rd := Reader{Dir: dir}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Receipt, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	var ferr error
	go func() {
		defer wg.Done()
		ferr = rd.Follow(ctx, Filter{Sub: "dave"}, 5*time.Millisecond, func(r Receipt) error {
			got <- r
			return nil
		})
	}()
	time.Sleep(30 * time.Millisecond) // Follow starts at the end: old receipts are not replayed
	w, _ := NewWriter(WriterOptions{Dir: dir, Now: c.Now, FlushInterval: time.Millisecond})
	w.Emit(sample(c, "dave", "t:1", policy.EffectAllow))
	w.Emit(sample(c, "erin", "t:2", policy.EffectAllow))
	_ = w.Flush()
	c.Advance(2 * time.Second) // the next day: a new file
	w.Emit(sample(c, "dave", "t:3", policy.EffectAllow))
	_ = w.Close()
	for _, want := range []string{"t:1", "t:3"} {
		select {
		case r := <-got:
			if r.MCP.ToolID != want {
				t.Fatalf("followed %s, want %s", r.MCP.ToolID, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Follow did not deliver %s", want)
		}
	}
	cancel()
	wg.Wait()
	if ferr != nil {
		t.Fatal(ferr)
	}
	select {
	case r := <-got:
		t.Fatalf("extra receipt %+v", r)
	default:
	}
}

// TestFollowPartialLine: a line being written is delivered once complete.
func TestFollowPartialLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "receipts-2026-03-01.jsonl")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan Receipt, 4)
	done := make(chan error, 1)
	go func() {
		done <- Reader{Dir: dir}.Follow(ctx, Filter{}, 2*time.Millisecond, func(r Receipt) error { got <- r; return ErrStop })
	}()
	time.Sleep(20 * time.Millisecond)
	c := newTestClock(day1)
	line, _ := json.Marshal(sample(c, "a", "t:p", policy.EffectAllow))
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.Write(line[:20])
	time.Sleep(20 * time.Millisecond)
	select {
	case <-got:
		t.Fatal("a partial line was delivered")
	default:
	}
	_, _ = f.Write(append(line[20:], '\n'))
	f.Close()
	select {
	case r := <-got:
		if r.MCP.ToolID != "t:p" {
			t.Fatal(r.MCP.ToolID)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("line not delivered")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
