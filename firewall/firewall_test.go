package firewall

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-mcp/quiver/artifacts"
)

func TestApplyInline(t *testing.T) {
	f := newFirewall(t, nil)
	structured := json.RawMessage(`{"ok":true,"n":3,"tags":["a","b"]}`)
	link := json.RawMessage(`{"type":"resource_link","uri":"file:///tmp/x.txt","name":"x.txt"}`)
	tests := []struct {
		name string
		r    Result
		want []string // substrings of the summary
	}{
		{"one text", textResult("hello, world"), []string{"1 text part inline"}},
		{"two texts", textResult("first", "second"), []string{"2 text parts inline"}},
		{"structured", Result{Parts: textResult(`{"ok":true}`).Parts, Structured: structured}, []string{"structuredContent"}},
		{"error", func() Result { r := textResult("boom: file not found"); r.IsError = true; return r }(), []string{"The tool reported an error."}},
		{"link", Result{Parts: []Part{{Type: PartResourceLink, URI: "file:///tmp/x.txt", Name: "x.txt", Raw: link}}}, []string{"resource link part"}},
		{"empty", Result{}, []string{"empty result"}},
		{"raw rendered", Result{Parts: []Part{{Type: PartText, Text: "no raw given"}}}, []string{"1 text part"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := mustApply(t, f, "alice", tc.r)
			if o.Stats.Strategy != StrategyInline || o.Stats.Triggered {
				t.Fatalf("strategy %q triggered %v, want inline", o.Stats.Strategy, o.Stats.Triggered)
			}
			if o.Result == nil {
				t.Fatal("no inline result")
			}
			if len(o.Artifacts) != 0 || len(o.Views) != 0 {
				t.Fatalf("artifacts %v views %v, want none", o.Artifacts, o.Views)
			}
			if len(o.Result.Content) != len(tc.r.Parts) {
				t.Fatalf("%d content items, want %d", len(o.Result.Content), len(tc.r.Parts))
			}
			for i, p := range tc.r.Parts {
				if p.Raw != nil && !bytes.Equal(o.Result.Content[i], p.Raw) {
					t.Errorf("content %d = %s, want the raw item %s unchanged", i, o.Result.Content[i], p.Raw)
				}
				if p.Raw == nil {
					var m map[string]string
					if err := json.Unmarshal(o.Result.Content[i], &m); err != nil || m["text"] != p.Text || m["type"] != "text" {
						t.Errorf("rendered content %d = %s", i, o.Result.Content[i])
					}
				}
			}
			if !bytes.Equal(o.Result.StructuredContent, tc.r.Structured) {
				t.Errorf("structured = %s, want %s verbatim", o.Result.StructuredContent, tc.r.Structured)
			}
			for _, w := range tc.want {
				if !strings.Contains(o.Summary, w) {
					t.Errorf("summary %q lacks %q", o.Summary, w)
				}
			}
			if o.Stats.InlineTokens > DefaultMaxInlineTokens || o.Stats.InlineTokens <= 0 && len(tc.r.Parts) > 0 {
				t.Errorf("inline tokens %d", o.Stats.InlineTokens)
			}
			if got := counter(t).Count(marshal(t, o)); got != o.Stats.InlineTokens {
				t.Errorf("inline tokens %d, but the outcome JSON counts %d", o.Stats.InlineTokens, got)
			}
		})
	}
}

func marshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestInlineThreshold checks the boundary: just under the budget stays
// inline, just over is summarised.
func TestInlineThreshold(t *testing.T) {
	f := newFirewall(t, func(o *Options) { o.MaxInlineTokens = 200 })
	log := genLog(64<<10, 3)
	lines := strings.SplitAfter(log, "\n")
	small := strings.Join(lines[:3], "")  // ~150 tokens
	large := strings.Join(lines[:12], "") // ~550 tokens
	if o := mustApply(t, f, "alice", textResult(small)); o.Stats.Strategy != StrategyInline {
		t.Errorf("small: strategy %s", o.Stats.Strategy)
	}
	o := mustApply(t, f, "alice", textResult(large))
	if o.Stats.Strategy != StrategySummary || !o.Stats.Triggered || o.Result != nil {
		t.Fatalf("large: strategy %s result %v", o.Stats.Strategy, o.Result)
	}
	if o.Stats.InlineTokens > 200 {
		t.Errorf("inline tokens %d > 200", o.Stats.InlineTokens)
	}
}

func TestApplyLog5MB(t *testing.T) {
	t.Parallel()
	f := newFirewall(t, nil)
	log := genLog(5<<20, 1)
	lines := strings.Split(strings.TrimSuffix(log, "\n"), "\n")
	o := mustApply(t, f, "alice", textResult(log))

	env := Envelope{Status: StatusOK, Provenance: Provenance{ToolID: "ops:fetch_logs#1a2b3c4d", Server: "ops", UpstreamName: "fetch_logs", Attempts: 1, DurationMS: 812.5}}
	o.Fill(&env)
	envJSON := marshal(t, env)
	if n := counter(t).Count(envJSON); n >= 1000 {
		t.Fatalf("envelope is %d tokens, want < 1000:\n%s", n, envJSON)
	} else {
		t.Logf("envelope: %d tokens (inline_tokens %d), %d bytes", n, o.Stats.InlineTokens, len(envJSON))
	}
	st := o.Stats
	if !st.Triggered || st.Strategy != StrategySummary || st.OriginalBytes != int64(len(log)) || !st.OriginalTokensEstimated || st.InlineTokens > DefaultMaxInlineTokens {
		t.Errorf("stats %+v", st)
	}
	// The estimate is within 5% of the real count (measured on 256 KiB).
	sample := log[len(log)/2 : len(log)/2+256<<10]
	perByte := float64(f.m.count(sample)) / float64(len(sample))
	if est := float64(st.OriginalTokens) / float64(len(log)); est < perByte*0.95 || est > perByte*1.05 {
		t.Errorf("estimated %.3f tokens/byte, measured %.3f", est, perByte)
	}
	if len(o.Artifacts) != 1 {
		t.Fatalf("artifacts %+v", o.Artifacts)
	}
	a := o.Artifacts[0]
	if a.MediaType != MediaText || a.SizeBytes != int64(len(log)) || a.ContentHash != hashOf([]byte(log)) || !strings.Contains(a.Label, "log, "+commas(len(lines))+" lines") {
		t.Errorf("artifact %+v", a)
	}
	var scratch []byte
	nErr := 0
	for _, l := range lines {
		if f.text.classify(l, &scratch)&(1<<catError) != 0 {
			nErr++
		}
	}
	for _, want := range []string{"first ", "notable lines", "ERROR", "last line:", fmt.Sprint(len(lines)) + ": " + lines[len(lines)-1][:40]} {
		if !strings.Contains(o.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, o.Summary)
		}
	}
	for _, want := range []string{commas(len(lines)) + " lines, " + commas(len(log)) + " bytes", commas(nErr) + " ERROR", "time span 2026-03-01T12:00:00.000Z"} {
		if !strings.Contains(strings.Join(o.Facts, "\n"), want) {
			t.Errorf("facts lack %q: %q", want, o.Facts)
		}
	}

	// The suggested views work as given.
	ctx := context.Background()
	byType := map[string]View{}
	for _, v := range o.Views {
		sel, err := ParseSelector(v.Selector)
		if err != nil {
			t.Fatalf("view %s selector %s: %v", v.ViewID, v.Selector, err)
		}
		byType[sel.Type] = v
		res, err := f.View(ctx, "alice", v.Handle, sel)
		if err != nil {
			t.Fatalf("view %s (%s): %v", v.ViewID, v.Selector, err)
		}
		if res.Tokens > DefaultMaxViewTokens || res.Text == "" {
			t.Errorf("view %s: %d tokens, %q", v.ViewID, res.Tokens, res.What)
		}
	}
	for _, typ := range []string{SelHead, SelLines, SelGrep} {
		if _, ok := byType[typ]; !ok {
			t.Errorf("no %s view among %+v", typ, o.Views)
		}
	}

	// Any line range, the last line, and grep ERROR.
	h := a.Handle
	for _, rg := range [][2]int{{1, 3}, {1000, 1010}, {25000, 25001}, {len(lines) - 5, len(lines)}, {len(lines), len(lines)}} {
		v := mustView(t, f, "alice", h, fmt.Sprintf(`{"type":"lines","start":%d,"end":%d}`, rg[0], rg[1]))
		want := strings.Join(lines[rg[0]-1:rg[1]], "\n") + "\n"
		if v.Text != want {
			t.Errorf("lines %v = %q, want %q", rg, v.Text, want)
		}
		wantWhat := fmt.Sprintf("lines %s-%s of %s", commas(rg[0]), commas(rg[1]), commas(len(lines)))
		if rg[0] == rg[1] {
			wantWhat = fmt.Sprintf("line %s of %s", commas(rg[0]), commas(len(lines)))
		}
		if !strings.HasPrefix(v.What, wantWhat) {
			t.Errorf("what %q, want %q", v.What, wantWhat)
		}
		if (rg[1] == len(lines)) != (v.Next == nil) {
			t.Errorf("lines %v: next %s", rg, v.Next)
		}
	}
	last := mustView(t, f, "alice", h, `{"type":"lines","start":-1}`)
	if last.Text != lines[len(lines)-1]+"\n" || last.Next != nil {
		t.Errorf("last line = %q next %s", last.Text, last.Next)
	}
	g := mustView(t, f, "alice", h, `{"type":"grep","pattern":"ERROR","max_matches":200}`)
	if !strings.HasPrefix(g.What, commas(nErr)+" matching lines") && nErr > 0 {
		t.Errorf("grep what %q, want %d matches", g.What, nErr)
	}
	for _, l := range strings.Split(strings.TrimSuffix(g.Text, "\n"), "\n") {
		no, text, ok := strings.Cut(l, ":")
		var n int
		if _, err := fmt.Sscan(no, &n); !ok || err != nil || n < 1 || n > len(lines) || lines[n-1] != text {
			t.Fatalf("grep line %q does not match the log", l)
		}
	}
	// Paging lines with Next covers a stretch of the log without gaps.
	sel, _ := ParseSelector(json.RawMessage(`{"type":"lines","start":40000}`))
	var got strings.Builder
	for range 5 {
		v, err := f.View(ctx, "alice", h, sel)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(v.Text)
		if sel, err = ParseSelector(v.Next); err != nil {
			t.Fatalf("next %s: %v", v.Next, err)
		}
	}
	if want := strings.Join(lines[39999:], "\n"); !strings.HasPrefix(want, strings.TrimSuffix(got.String(), "\n")) || got.Len() < 2000 {
		t.Errorf("paged lines are not contiguous (%d bytes)", got.Len())
	}
}

func TestApplyBinaryNeverInline(t *testing.T) {
	f := newFirewall(t, nil)
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 1, 2, 3}, 50)...)
	raw, _ := json.Marshal(map[string]string{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(png)})
	r := textResult("chart rendered")
	r.Parts = append(r.Parts,
		Part{Type: PartImage, Data: png, MIMEType: "image/png", Raw: raw},
		Part{Type: PartAudio, Data: []byte("RIFF....WAVEfmt "), MIMEType: "audio/wav"},
		Part{Type: PartResource, Data: []byte("%PDF-1.7 tiny"), MIMEType: "application/pdf", URI: "file:///r.pdf"})
	o := mustApply(t, f, "alice", r)
	if o.Stats.Strategy != StrategyBinary || !o.Stats.Triggered {
		t.Fatalf("strategy %s", o.Stats.Strategy)
	}
	if o.Result == nil || len(o.Result.Content) != 1 || !bytes.Equal(o.Result.Content[0], r.Parts[0].Raw) {
		t.Fatalf("inline result %+v, want only the text item", o.Result)
	}
	if strings.Contains(marshal(t, o), base64.StdEncoding.EncodeToString(png)[:20]) {
		t.Fatal("image data leaked inline")
	}
	if len(o.Artifacts) != 3 {
		t.Fatalf("artifacts %+v", o.Artifacts)
	}
	want := []struct{ media, label string }{{"image/png", "image part 2"}, {"audio/wav", "audio part 3"}, {"application/pdf", "file:///r.pdf"}}
	for i, w := range want {
		if a := o.Artifacts[i]; a.MediaType != w.media || !strings.Contains(a.Label, w.label) {
			t.Errorf("artifact %d = %+v, want %+v", i, a, w)
		}
	}
	if !strings.Contains(strings.Join(o.Facts, "\n"), "image part 2: image/png, 208 bytes") {
		t.Errorf("facts %q", o.Facts)
	}
	// Binary views answer in base64; line selectors do not fit.
	v := mustView(t, f, "alice", o.Artifacts[0].Handle, `{"type":"head","chars":40}`)
	dec, err := base64.StdEncoding.DecodeString(v.Text)
	if err != nil || !bytes.HasPrefix(png, dec) || len(dec) == 0 {
		t.Errorf("head of image = %q (%v)", v.Text, err)
	}
	all := mustView(t, f, "alice", o.Artifacts[0].Handle, `{"type":"bytes","offset":8,"length":1000}`)
	if dec, _ := base64.StdEncoding.DecodeString(all.Text); !bytes.Equal(dec, png[8:]) || all.Next != nil {
		t.Errorf("bytes of image = %d bytes, next %s", len(dec), all.Next)
	}
	_, err = f.View(context.Background(), "alice", o.Artifacts[0].Handle, Selector{Type: SelLines, Start: 1})
	if !errors.Is(err, ErrViewFailed) || !strings.Contains(err.Error(), "binary") {
		t.Errorf("lines on an image: %v", err)
	}
	// A tiny image alone is still not inline.
	o = mustApply(t, f, "alice", Result{Parts: []Part{{Type: PartImage, Data: []byte{1, 2, 3}, MIMEType: "image/gif"}}})
	if o.Stats.Strategy != StrategyBinary || len(o.Result.Content) != 0 || len(o.Artifacts) != 1 {
		t.Errorf("tiny image: %+v", o)
	}
}

func TestApplyStructuredOwnArtifact(t *testing.T) {
	f := newFirewall(t, nil)
	doc := genJSON(200<<10, 5)
	r := textResult("Found 900 items; see structured content.")
	r.Structured = doc
	o := mustApply(t, f, "alice", r)
	if o.Stats.Strategy != StrategySummary {
		t.Fatalf("strategy %s", o.Stats.Strategy)
	}
	var sc *Artifact
	for i := range o.Artifacts {
		if strings.HasPrefix(o.Artifacts[i].Label, "structuredContent") {
			sc = &o.Artifacts[i]
		}
	}
	if sc == nil || sc.MediaType != MediaJSON || sc.SizeBytes != int64(len(doc)) || len(o.Artifacts) != 2 {
		t.Fatalf("artifacts %+v", o.Artifacts)
	}
	v := mustView(t, f, "alice", sc.Handle, `{"type":"json_keys","keys":["total","next_cursor"]}`)
	var got map[string]any
	if err := json.Unmarshal([]byte(v.Text), &got); err != nil || got["next_cursor"] != "eyJvZmZzZXQiOjUwMDB9" {
		t.Errorf("json_keys = %q (%v)", v.Text, err)
	}
	// The same content in a text part and structuredContent is stored once.
	r = Result{Parts: textResult(string(doc)).Parts, Structured: doc}
	o = mustApply(t, f, "alice", r)
	if len(o.Artifacts) != 1 {
		t.Errorf("duplicate content stored %d times", len(o.Artifacts))
	}
}

func TestApplyStoreRefuses(t *testing.T) {
	st, err := artifacts.OpenBadger(artifacts.Options{Dir: t.TempDir(), SweepInterval: -1, MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	f := New(Options{Store: st, Counter: counter(t)})
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"one part too large", textResult(genLog(2<<20, 1)), "text part 1"},
		// Each part fits, both do not: the store evicts the first to make
		// room for the second, which Apply must notice.
		{"parts evict each other", textResult(genLog(600<<10, 1), genLog(700<<10, 2)), "evicted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Apply(context.Background(), "alice", tc.r)
			if !errors.Is(err, ErrStore) || !errors.Is(err, artifacts.ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrStore wrapping ErrTooLarge (%q)", err, tc.want)
			}
			if u := st.Usage(); u != 0 {
				t.Errorf("store holds %d bytes after a refused result", u)
			}
		})
	}
}

func TestApplyBadInput(t *testing.T) {
	f := newFirewall(t, nil)
	if _, err := f.Apply(context.Background(), "", textResult("x")); !errors.Is(err, ErrBadInput) {
		t.Errorf("empty owner: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Apply(ctx, "alice", textResult(genLog(100<<10, 1))); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := f.View(ctx, "alice", "art_aaaaaaaaaaaaaaaaaaaaaaaaaa", Selector{Type: SelHead}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled view: %v", err)
	}
}

// TestApplyPathological feeds inputs that make the BPE encoder quadratic if it
// sees them whole; Apply must stay fast (bounded segments).
func TestApplyPathological(t *testing.T) {
	t.Parallel()
	f := newFirewall(t, nil)
	for name, s := range map[string]string{
		"letters": strings.Repeat("a", 256<<10),
		"spaces":  strings.Repeat(" ", 256<<10),
		"nl":      strings.Repeat("\n", 256<<10),
		"mixed":   strings.Repeat("x ", 64<<10) + strings.Repeat("\t", 64<<10),
	} {
		t.Run(name, func(t *testing.T) {
			o := mustApply(t, f, "alice", textResult(s))
			if o.Stats.InlineTokens > DefaultMaxInlineTokens {
				t.Errorf("inline tokens %d", o.Stats.InlineTokens)
			}
			v := mustView(t, f, "alice", o.Artifacts[0].Handle, `{"type":"lines","start":1}`)
			if v.Tokens > DefaultMaxViewTokens {
				t.Errorf("view tokens %d", v.Tokens)
			}
		})
	}
}

func TestApplyJSONL(t *testing.T) {
	f := newFirewall(t, nil)
	var b strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&b, `{"seq":%d,"event":"click","user":"u%d","props":{"x":%d,"y":%d}}`+"\n", i, i%97, i%640, i%480)
	}
	o := mustApply(t, f, "alice", textResult(b.String()))
	a := o.Artifacts[0]
	if a.MediaType != MediaJSONL || !strings.Contains(strings.Join(o.Facts, "\n"), "JSON Lines, 3,000 records (objects)") {
		t.Fatalf("artifact %+v facts %q", a, o.Facts)
	}
	v := mustView(t, f, "alice", a.Handle, `{"type":"rows","start":-2}`)
	if v.Text != `{"seq":2999,"event":"click","user":"u89","props":{"x":439,"y":119}}`+"\n"+`{"seq":3000,"event":"click","user":"u90","props":{"x":440,"y":120}}`+"\n" {
		t.Errorf("last rows = %q", v.Text)
	}
	if !strings.HasPrefix(v.What, "rows 2,999-3,000 of 3,000") || v.Next != nil {
		t.Errorf("what %q next %s", v.What, v.Next)
	}
}

func TestConcurrentApplyView(t *testing.T) {
	t.Parallel()
	f := newFirewall(t, nil)
	log := genLog(300<<10, 9)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("user%d", i%3)
			o, err := f.Apply(context.Background(), owner, textResult(log))
			if err != nil {
				errs <- err
				return
			}
			sel, _ := ParseSelector(o.Views[len(o.Views)-1].Selector)
			if _, err := f.View(context.Background(), owner, o.Artifacts[0].Handle, sel); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMeterMatchesCounter(t *testing.T) {
	f := newFirewall(t, nil)
	c := counter(t)
	samples := []string{genLog(20<<10, 4), string(genJSON(8<<10, 1)), "short", "", strings.Repeat("word ", 900)}
	for i, s := range samples {
		if got, want := f.m.count(s), c.Count(s); got != want {
			t.Errorf("sample %d: meter %d, counter %d", i, got, want)
		}
		for _, budget := range []int{1, 7, 100, 1000} {
			p, n, cut := f.m.cut(s, budget)
			if !strings.HasPrefix(s, p) || n > budget || c.Count(p) > budget || cut != (p != s) {
				t.Errorf("sample %d budget %d: cut to %d bytes, %d tokens (counter %d), cut %v", i, budget, len(p), n, c.Count(p), cut)
			}
		}
	}
}

// TestApplyManyParts: every stored part is listed even when the list alone
// outgrows the budget (the one documented exception), and duplicates are
// stored once.
func TestApplyManyParts(t *testing.T) {
	f := newFirewall(t, nil)
	var texts []string
	for i := range 40 {
		texts = append(texts, genLog(2<<10, uint64(i)))
	}
	texts = append(texts, texts[0])
	o := mustApply(t, f, "alice", textResult(texts...))
	if len(o.Artifacts) != 40 || o.Stats.Strategy != StrategySummary {
		t.Fatalf("%d artifacts, strategy %s", len(o.Artifacts), o.Stats.Strategy)
	}
	if got := counter(t).Count(marshal(t, o)); got != o.Stats.InlineTokens {
		t.Errorf("inline tokens %d, counted %d", o.Stats.InlineTokens, got)
	}
	if !strings.Contains(strings.Join(o.Facts, "\n"), "text part 41: same content as text part 1") && len(o.Facts) > 1 {
		t.Logf("facts %q", o.Facts)
	}
}

// TestInlineThresholdEveryStep grows a result a word at a time across the
// inline budget: every step stays inline exactly while its envelope counts
// at most the budget, reports that count as inline_tokens (counted once)
// and the text's own count as original_tokens; the first step over the
// budget is summarised, and so is every later one.
func TestInlineThresholdEveryStep(t *testing.T) {
	const budget = 200
	f := newFirewall(t, func(o *Options) { o.MaxInlineTokens = budget })
	c := counter(t)
	words := strings.Fields(genLog(8<<10, 5))
	crossed := false
	for n := 40; n < len(words) && n < 400; n++ {
		text := strings.Join(words[:n], " ") + " it's done, we'll see\r\n"
		r := textResult(text)
		o := mustApply(t, f, "alice", r)
		if got := c.Count(text); o.Stats.OriginalTokens != got || o.Stats.OriginalTokensEstimated {
			t.Fatalf("%d words: original_tokens %d (estimated %v), the text counts %d", n, o.Stats.OriginalTokens, o.Stats.OriginalTokensEstimated, got)
		}
		p := r.Parts[0]
		items := []*item{{part: &p, name: partName(&p, 1), text: text}}
		cand := Outcome{Summary: inlineSummary(items, c.Count(text), false), Facts: []string{},
			Result: inlineResult(items, nil), Artifacts: []Artifact{}, Views: []View{}}
		fits := c.Count(marshal(t, cand)) <= budget
		switch {
		case fits && o.Stats.Strategy != StrategyInline:
			t.Fatalf("%d words: the inline envelope fits (%d tokens) but the strategy is %s", n, c.Count(marshal(t, cand)), o.Stats.Strategy)
		case !fits && o.Stats.Strategy == StrategyInline:
			t.Fatalf("%d words: the inline envelope counts %d > %d but stayed inline", n, c.Count(marshal(t, cand)), budget)
		case fits && crossed:
			t.Fatalf("%d words: inline again after a longer text was summarised", n)
		}
		crossed = crossed || !fits
		if got := c.Count(marshal(t, o)); o.Stats.InlineTokens != got {
			t.Fatalf("%d words: inline_tokens %d, the envelope counts %d", n, o.Stats.InlineTokens, got)
		}
	}
	if !crossed {
		t.Fatal("the texts never crossed the budget")
	}
}
