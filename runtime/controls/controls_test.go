package controls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
	"github.com/quiver-mcp/quiver/runtime/state/statetest"
)

type codeErr string

func (c codeErr) Error() string { return string(c) }

func TestRetryDo(t *testing.T) {
	p := RetryPolicy{MaxAttempts: 4, BaseDelay: time.Millisecond, MaxDelay: 4 * time.Millisecond, RetryableCodes: []string{"T"}}
	classify := func(err error) Failure { return Failure{Code: err.Error(), Safe: !strings.HasPrefix(err.Error(), "W")} }
	cases := []struct {
		name     string
		policy   RetryPolicy
		errs     []string // per attempt; "" succeeds
		attempts int
		fail     bool
	}{
		{"success", p, []string{""}, 1, false},
		{"transient then success", p, []string{"T", "T", ""}, 3, false},
		{"attempts spent", p, []string{"T", "T", "T", "T", "T"}, 4, true},
		{"not retryable", p, []string{"X", ""}, 1, true},
		{"unsafe", p, []string{"WT", ""}, 1, true},
		{"off", RetryPolicy{}, []string{"T", ""}, 1, true},
		{"one attempt", RetryPolicy{MaxAttempts: 1, RetryableCodes: []string{"T"}}, []string{"T", ""}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			_, attempts, err := Do(context.Background(), tc.policy, func(context.Context) (int, error) {
				e := tc.errs[n]
				n++
				if e == "" {
					return n, nil
				}
				return 0, codeErr(e)
			}, func(err error) Failure {
				f := classify(err)
				if f.Code == "WT" {
					f.Code = "T"
				}
				return f
			})
			if attempts != tc.attempts || n != tc.attempts || (err != nil) != tc.fail {
				t.Fatalf("attempts %d (calls %d), err %v", attempts, n, err)
			}
		})
	}
}

func TestRetryStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := RetryPolicy{MaxAttempts: 5, BaseDelay: time.Hour, MaxDelay: time.Hour, RetryableCodes: []string{"T"}}
	done := make(chan int)
	go func() {
		_, n, _ := Do(ctx, p, func(context.Context) (int, error) { return 0, codeErr("T") }, func(error) Failure { return Failure{Code: "T", Safe: true} })
		done <- n
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case n := <-done:
		if n != 1 {
			t.Fatalf("%d attempts", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("backoff ignored the context")
	}
}

func TestRetryDelay(t *testing.T) {
	p := RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	for n, want := range map[int]time.Duration{2: 100 * time.Millisecond, 3: 200 * time.Millisecond, 4: 400 * time.Millisecond, 5: 800 * time.Millisecond, 6: time.Second, 30: time.Second} {
		if got := p.Delay(n, 0); got != want {
			t.Errorf("delay before attempt %d = %v, want %v", n, got, want)
		}
	}
	if got := p.Delay(2, 500*time.Millisecond); got != 500*time.Millisecond {
		t.Errorf("retry-after hint ignored: %v", got)
	}
	if got := p.Delay(2, time.Hour); got != time.Second {
		t.Errorf("hint not capped: %v", got)
	}
	p.Jitter = true
	for i := 0; i < 200; i++ {
		if d := p.Delay(4, 0); d <= 0 || d > 400*time.Millisecond {
			t.Fatalf("jittered delay %v out of (0, 400ms]", d)
		}
	}
}

func TestCache(t *testing.T) {
	c := NewCache[string](CacheOptions{TTL: time.Minute, MaxEntries: 2, Allow: []string{"math:*", "docs:get#*"}})
	for id, want := range map[string]bool{"math:add#1": true, "docs:get#2": true, "docs:put#2": false, "x:y": false} {
		if c.Allowed(id) != want {
			t.Errorf("Allowed(%s) != %v", id, want)
		}
	}
	var a, b map[string]any
	json.Unmarshal([]byte(`{"x":1,"y":{"b":2,"a":[1,2]}}`), &a)
	json.Unmarshal([]byte(`{"y":{"a":[1,2],"b":2},"x":1}`), &b)
	ka, _ := Key(1, "math:add#1", a)
	kb, _ := Key(1, "math:add#1", b)
	kc, _ := Key(2, "math:add#1", b)
	kd, _ := Key(1, "math:mul#1", b)
	if ka != kb || ka == kc || ka == kd {
		t.Fatalf("keys %q %q %q %q", ka, kb, kc, kd)
	}
	c.Put(ka, "v")
	if v, ok := c.Get(kb); !ok || v != "v" {
		t.Fatal("miss")
	}
	c.Put(kc, "2")
	c.Put(kd, "3")
	if c.Len() != 2 {
		t.Fatalf("LRU bound: %d", c.Len())
	}
	c.Purge()
	if _, ok := c.Get(kd); ok || c.Len() != 0 {
		t.Fatal("purge")
	}
	if !NewCache[int](CacheOptions{}).Allowed("anything") {
		t.Fatal("empty allow list must allow")
	}
}

func TestRateLimiter(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	l := NewRateLimiter(map[string]Limit{
		"tool_execute":    {PerMinute: 3},
		"tool_browse":     {PerSession: 2},
		"tool:github:*":   {PerSession: 1},
		"tool_view":       {},
		"tool:unused#abc": {PerMinute: 1},
	}, nil, clock)
	s1, s2 := "s1", "s2"
	type call struct {
		sess        any
		meta, tool  string
		advance     time.Duration
		scope, kind string
	}
	for i, c := range []call{
		{sess: s1, meta: "tool_execute", tool: "math:add"},
		{sess: s1, meta: "tool_execute", tool: "math:add"},
		{sess: s1, meta: "tool_execute", tool: "math:add", advance: 30 * time.Second},
		{sess: s1, meta: "tool_execute", tool: "math:add", scope: "tool_execute", kind: "max_calls_per_minute"},
		{sess: s2, meta: "tool_execute", tool: "math:add"},                                                                 // another session has its own window
		{sess: s1, meta: "tool_execute", tool: "math:add", advance: 30 * time.Second},                                      // the first two left the window
		{sess: s1, meta: "tool_execute", tool: "math:add"},                                                                 //
		{sess: s1, meta: "tool_execute", tool: "math:add", scope: "tool_execute", kind: "max_calls_per_minute"},            //
		{sess: s2, meta: "tool_execute", tool: "github:create_issue"},                                                      //
		{sess: s2, meta: "tool_execute", tool: "github:list_repos", scope: "tool:github:*", kind: "max_calls_per_session"}, // the glob counts its tools together
		{sess: s1, meta: "tool_browse"},                                                                                    //
		{sess: s1, meta: "tool_browse"},                                                                                    //
		{sess: s1, meta: "tool_browse", advance: time.Hour, scope: "tool_browse", kind: "max_calls_per_session"},           // session caps never reset
		{sess: s1, meta: "tool_view"},                                                                                      // no limits
		{sess: s1, meta: "tool_hydrate"},                                                                                   // not configured
	} {
		now = now.Add(c.advance)
		d := l.Take(ctx, c.sess, fmt.Sprint(c.sess), c.meta, c.tool)
		switch {
		case c.scope == "" && d != nil:
			t.Fatalf("call %d refused: %+v", i, d)
		case c.scope != "" && (d == nil || d.Scope != c.scope || d.Limit != c.kind):
			t.Fatalf("call %d: got %+v, want %s %s", i, d, c.scope, c.kind)
		case d != nil && c.kind == "max_calls_per_minute" && (d.RetryAfter <= 0 || d.RetryAfter > Window):
			t.Fatalf("call %d: retry_after %v", i, d.RetryAfter)
		}
	}
	// A refused call counted nothing; Check counts nothing either.
	s3 := "s3"
	for i := 0; i < 10; i++ {
		if d := l.Check(ctx, s3, s3, "tool_execute", "math:add"); d != nil {
			t.Fatalf("check %d: %+v", i, d)
		}
	}
	var none *RateLimiter
	if none.Take(ctx, s1, s1, "tool_execute", "x") != nil || NewRateLimiter(nil, nil, nil) != nil {
		t.Fatal("no limits must admit everything")
	}
}

func TestRateLimiterRetryAfter(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	l := NewRateLimiter(map[string]Limit{"tool_execute": {PerMinute: 2}}, nil, func() time.Time { return now })
	l.Take(ctx, nil, "p", "tool_execute", "")
	now = now.Add(20 * time.Second)
	l.Take(ctx, nil, "p", "tool_execute", "")
	now = now.Add(10 * time.Second)
	d := l.Take(ctx, nil, "p", "tool_execute", "")
	if d == nil || d.RetryAfter != 30*time.Second {
		t.Fatalf("%+v", d)
	}
	now = now.Add(d.RetryAfter)
	if d := l.Take(ctx, nil, "p", "tool_execute", ""); d != nil {
		t.Fatalf("after retry_after: %+v", d)
	}
}

func TestRateLimiterConcurrent(t *testing.T) {
	ctx := context.Background()
	l := NewRateLimiter(map[string]Limit{"tool_execute": {PerSession: 50}}, nil, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Take(ctx, "s", "p", "tool_execute", "") == nil {
				mu.Lock()
				ok++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if ok != 50 {
		t.Fatalf("%d admitted", ok)
	}
}

func TestRateLimiterSessionBound(t *testing.T) {
	ctx := context.Background()
	l := NewRateLimiter(map[string]Limit{"tool_execute": {PerSession: 1}}, nil, nil)
	for i := 0; i < MaxSessions+10; i++ {
		l.Take(ctx, i, "p", "tool_execute", "")
	}
	if len(l.sessions) > MaxSessions {
		t.Fatalf("%d sessions kept", len(l.sessions))
	}
}

// TestRateLimiterShared: two limiters on one KV are two replicas: a
// principal's per-minute window is one, whichever replica counts a call;
// session caps stay per process.
func TestRateLimiterShared(t *testing.T) {
	ctx := context.Background()
	kv := state.NewMemory(nil)
	limits := map[string]Limit{"tool_execute": {PerMinute: 5, PerSession: 100}}
	a, b := NewRateLimiter(limits, kv, nil), NewRateLimiter(limits, kv, nil)
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		l := a
		if i%2 == 1 {
			l = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if l.Take(ctx, fmt.Sprint("s", i), "alice", "tool_execute", "") == nil {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 5 {
		t.Fatalf("%d calls admitted by a limit of 5 per minute", n)
	}
	if d := b.Take(ctx, "s", "bob", "tool_execute", ""); d != nil {
		t.Fatalf("another principal shares alice's window: %+v", d)
	}
}

// TestRateLimiterUnavailable: a limiter that cannot reach its windows
// refuses (fail closed) and says why; session caps alone need no KV.
func TestRateLimiterUnavailable(t *testing.T) {
	ctx := context.Background()
	kv := statetest.NewFailing(state.NewMemory(nil))
	kv.SetDown(true)
	l := NewRateLimiter(map[string]Limit{"tool_execute": {PerMinute: 5, PerSession: 1}, "tool_view": {PerSession: 1}}, kv, nil)
	for _, take := range []bool{true, false} {
		d := l.Check(ctx, "s", "alice", "tool_execute", "")
		if take {
			d = l.Take(ctx, "s", "alice", "tool_execute", "")
		}
		if d == nil || !errors.Is(d.Err, state.ErrUnavailable) {
			t.Fatalf("take=%v: %+v", take, d)
		}
	}
	// The refused call gave its session count back.
	kv.SetDown(false)
	if d := l.Take(ctx, "s", "alice", "tool_execute", ""); d != nil {
		t.Fatalf("after recovery: %+v", d)
	}
	kv.SetDown(true)
	if d := l.Take(ctx, "s", "alice", "tool_view", ""); d != nil {
		t.Fatalf("a session cap needs no KV: %+v", d)
	}
}

func TestTolerantArgs(t *testing.T) {
	schema := map[string]any{}
	json.Unmarshal([]byte(`{"type":"object","properties":{
		"n":{"type":"integer"}, "big":{"type":"integer"}, "x":{"type":"number"}, "b":{"type":"boolean"}, "z":{"type":"null"},
		"s":{"type":"string"}, "sn":{"type":["string","null"]}, "in":{"type":["integer","null"]},
		"obj":{"type":"object","properties":{"k":{"type":"integer"}}},
		"arr":{"type":"array","items":{"type":"boolean"}},
		"any":{}}}`), &schema)
	cases := []struct {
		name    string
		args    string
		want    string
		repairs string
	}{
		{"integer", `{"n":"42"}`, `{"n":42}`, "str_to_integer /n"},
		{"negative integer", `{"n":"-7"}`, `{"n":-7}`, "str_to_integer /n"},
		{"huge integer kept exact", `{"big":"123456789012345678901234567890"}`, `{"big":123456789012345678901234567890}`, "str_to_integer /big"},
		{"not an exact integer", `{"n":"42.0"}`, `{"n":"42.0"}`, ""},
		{"leading zero", `{"n":"042"}`, `{"n":"042"}`, ""},
		{"plus sign", `{"n":"+4"}`, `{"n":"+4"}`, ""},
		{"spaces", `{"n":" 4"}`, `{"n":" 4"}`, ""},
		{"number", `{"x":"2.5e3"}`, `{"x":2500}`, "str_to_number /x"},
		{"infinite number", `{"x":"1e999"}`, `{"x":"1e999"}`, ""},
		{"NaN", `{"x":"NaN"}`, `{"x":"NaN"}`, ""},
		{"hex", `{"x":"0x10"}`, `{"x":"0x10"}`, ""},
		{"boolean", `{"b":"false"}`, `{"b":false}`, "str_to_boolean /b"},
		{"boolean case", `{"b":"True"}`, `{"b":"True"}`, ""},
		{"null", `{"z":"null"}`, `{"z":null}`, "str_to_null /z"},
		{"string never coerced", `{"s":"42"}`, `{"s":"42"}`, ""},
		{"string-or-null never coerced", `{"sn":"null"}`, `{"sn":"null"}`, ""},
		{"integer-or-null", `{"in":"null"}`, `{"in":null}`, "str_to_null /in"},
		{"nested", `{"obj":{"k":"3"}}`, `{"obj":{"k":3}}`, "str_to_integer /obj/k"},
		{"array items", `{"arr":["true","x",false]}`, `{"arr":[true,"x",false]}`, "str_to_boolean /arr/0"},
		{"untyped", `{"any":"1"}`, `{"any":"1"}`, ""},
		{"unknown key kept", `{"other":"1","n":"1"}`, `{"n":1,"other":"1"}`, "str_to_integer /n"},
		{"already typed", `{"n":1,"b":true}`, `{"b":true,"n":1}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args map[string]any
			dec := json.NewDecoder(strings.NewReader(tc.args))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range RepairArgs(args, schema) {
				got = append(got, r.String())
			}
			b, _ := json.Marshal(args)
			if string(b) != tc.want || strings.Join(got, ";") != tc.repairs {
				t.Fatalf("got %s %v, want %s %q", b, got, tc.want, tc.repairs)
			}
		})
	}
}

func TestParseStringifiedArgs(t *testing.T) {
	for raw, want := range map[string]string{
		`"{\"a\":1}"`:               `{"a":1}`,
		`"\ufeff  {\"a\":1} \n"`:    `{"a":1}`,
		` "{}" `:                    `{}`,
		`"[1]"`:                     "",
		`"{\"a\":1} {}"`:            "",
		`"{\"a\":"`:                 "",
		`"null"`:                    "",
		`{"a":1}`:                   "",
		`"42"`:                      "",
		`"{\"a\":\"{\\\"b\\\"}\"}"`: `{"a":"{\"b\"}"}`,
	} {
		got, ok := ParseStringifiedArgs(json.RawMessage(raw))
		if (want == "") == ok || string(got) != want {
			t.Errorf("%s: got %s %v, want %s", raw, got, ok, want)
		}
	}
}
