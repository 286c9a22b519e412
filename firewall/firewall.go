package firewall

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/choicecard/tokens"
)

// Content part types, as MCP names them.
const (
	PartText         = "text"
	PartImage        = "image"
	PartAudio        = "audio"
	PartResource     = "resource"
	PartResourceLink = "resource_link"
)

// Firewall strategies reported in Stats.Strategy.
const (
	// StrategyInline: the result travels whole in Envelope.Result.
	StrategyInline = "inline"
	// StrategyBinary: text and structured content travel inline; binary parts
	// (which never do) were stored as artifacts.
	StrategyBinary = "binary"
	// StrategySummary: everything was stored as artifacts and the envelope
	// carries a summary, facts and suggested views instead.
	StrategySummary = "summary"
)

// Defaults for zero-valued Options fields.
const (
	// DefaultMaxInlineTokens is Options.MaxInlineTokens when zero.
	DefaultMaxInlineTokens = 800
	// DefaultMaxViewTokens is Options.MaxViewTokens when zero.
	DefaultMaxViewTokens = 800
	// DefaultExactTokenBytes is Options.ExactTokenBytes when zero.
	DefaultExactTokenBytes = 16 << 10
)

// Sentinel errors.
var (
	// ErrStore reports that the artifact store refused or failed to keep a
	// part (the error also wraps the store's own, e.g. artifacts.ErrTooLarge).
	// Nothing of the result was kept: artifacts stored for it are deleted.
	ErrStore = errors.New("firewall: storing the result failed")
	// ErrBadInput reports an unusable Apply or View call (an empty owner).
	ErrBadInput = errors.New("firewall: bad input")
	// ErrViewFailed wraps every error of View except context errors: a bad
	// selector, a pointer to nothing, a slice out of range, a selector that
	// does not fit the artifact's media type, or a missing artifact (which
	// also wraps artifacts.ErrNotFound).
	ErrViewFailed = errors.New("firewall: view failed")
)

// Part is one content item of an upstream result, converted from MCP by the
// runtime.
type Part struct {
	// Type is one of the Part* constants ("text", "image", "audio",
	// "resource", "resource_link"); unknown types are treated by content: Data
	// as binary, Text as text.
	Type string
	// Text is the text of a text item or of an embedded text resource.
	Text string
	// Data is the decoded content of an image, audio or embedded blob
	// resource.
	Data []byte
	// MIMEType, URI and Name are the item's metadata, where it has them.
	MIMEType, URI, Name string
	// Raw is the original MCP content item as JSON; an inline result returns
	// it unchanged. When empty, the firewall renders the item from the fields
	// above.
	Raw json.RawMessage
}

// Result is an upstream tool (or resource or prompt) result.
type Result struct {
	// Parts are the content items in order.
	Parts []Part
	// Structured is the structuredContent, if any.
	Structured json.RawMessage
	// IsError is the upstream's isError flag.
	IsError bool
}

// Options configure a Firewall.
type Options struct {
	// Store keeps the artifacts. Required.
	Store artifacts.Store
	// Counter counts cl100k_base tokens. Required.
	Counter *tokens.Counter
	// MaxInlineTokens bounds what an envelope carries in place of the
	// result (see Outcome); DefaultMaxInlineTokens when zero.
	MaxInlineTokens int
	// MaxViewTokens bounds the text of a View answer; DefaultMaxViewTokens
	// when zero.
	MaxViewTokens int
	// ExactTokenBytes is the size up to which content tokens are counted
	// exactly; larger content is estimated from samples (see Stats).
	// DefaultExactTokenBytes when zero.
	ExactTokenBytes int
	// Clock measures Apply's duration; time.Now when nil.
	Clock func() time.Time
}

// Firewall turns upstream results into envelope parts and answers tool_view.
// It is immutable and safe for concurrent use.
type Firewall struct {
	store      artifacts.Store
	m          meter
	maxInline  int
	maxView    int
	exactBytes int
	clock      func() time.Time
	text       *textRegexps
	handleRE   *regexp.Regexp
}

// New builds a Firewall. It panics if Store or Counter is nil, which is a
// programming error.
func New(opts Options) *Firewall {
	if opts.Store == nil || opts.Counter == nil {
		panic("firewall: New needs a Store and a Counter")
	}
	f := &Firewall{
		store:      opts.Store,
		m:          meter{opts.Counter},
		maxInline:  opts.MaxInlineTokens,
		maxView:    opts.MaxViewTokens,
		exactBytes: opts.ExactTokenBytes,
		clock:      opts.Clock,
		text:       newTextRegexps(),
		handleRE:   regexp.MustCompile(artifacts.HandlePrefix + `[a-z2-7]{26}`),
	}
	if f.maxInline <= 0 {
		f.maxInline = DefaultMaxInlineTokens
	}
	if f.maxView <= 0 {
		f.maxView = DefaultMaxViewTokens
	}
	if f.exactBytes <= 0 {
		f.exactBytes = DefaultExactTokenBytes
	}
	if f.clock == nil {
		f.clock = time.Now
	}
	return f
}

// Outcome is what Apply produced: the firewall's parts of an Envelope.
//
// InlineTokens (Stats) is the cl100k_base token count of the JSON object
// {"summary", "facts", "result", "artifacts", "views"} built from it, and is at
// most MaxInlineTokens: a result stays inline only if that holds, and a
// summary is cut (with the token counter) until it does. The one exception is
// a result with so many parts that its artifact list alone exceeds the budget:
// every stored artifact is always listed.
type Outcome struct {
	// Summary says what the result is; for a large result it is the useful
	// digest (head, notable lines, shape, columns) that stands in for it.
	Summary string `json:"summary"`
	// Facts are short statements about the result.
	Facts []string `json:"facts"`
	// Result is the result itself, when it stays inline (whole, or without
	// its binary parts).
	Result *Inline `json:"result,omitempty"`
	// Artifacts lists every part that was stored.
	Artifacts []Artifact `json:"artifacts"`
	// Views are ready-made tool_view selectors.
	Views []View `json:"views"`
	// Stats say what the firewall did.
	Stats Stats `json:"-"`
	// Elapsed is how long Apply took.
	Elapsed time.Duration `json:"-"`
}

// Fill copies the outcome into an envelope.
func (o Outcome) Fill(env *Envelope) {
	env.Summary = o.Summary
	env.Facts = o.Facts
	env.Result = o.Result
	env.Artifacts = o.Artifacts
	env.Views = o.Views
	env.Firewall = o.Stats
}

// item is a part (or the structured content) on its way through Apply.
type item struct {
	name      string
	part      *Part // nil for structuredContent
	text      string
	data      []byte
	binary    bool
	link      bool
	tokens    int
	estimated bool
}

// Apply runs a result through the firewall on behalf of owner (the principal
// whose call produced it; only that owner can View the artifacts).
//
// Small results stay inline, whole (strategy "inline"). Binary parts (images,
// audio, embedded blobs) never travel inline: they are always stored, and if
// the rest is small it stays inline (strategy "binary"). Anything larger is
// stored part by part, structuredContent as its own JSON artifact, and the
// envelope gets a token-bounded summary, facts and suggested views (strategy
// "summary"). If the store refuses a part, Apply deletes what it stored for
// this result and returns an error wrapping ErrStore and the store's error.
func (f *Firewall) Apply(ctx context.Context, owner string, r Result) (Outcome, error) {
	began := f.clock()
	if owner == "" {
		return Outcome{}, fmt.Errorf("%w: empty owner", ErrBadInput)
	}
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	items := make([]*item, 0, len(r.Parts)+1)
	var st Stats
	textTokens, nBinary := 0, 0
	estimated := false
	for i := range r.Parts {
		p := &r.Parts[i]
		it := &item{part: p, name: partName(p, i+1)}
		switch {
		case p.Type == PartResourceLink:
			it.link = true
		case p.Type == PartImage || p.Type == PartAudio || (len(p.Data) > 0 && p.Text == ""):
			it.binary, it.data = true, p.Data
			nBinary++
		default:
			it.text = p.Text
		}
		st.OriginalBytes += int64(len(p.Text) + len(p.Data))
		items = append(items, it)
	}
	if len(r.Structured) > 0 {
		items = append(items, &item{name: "structuredContent", text: string(r.Structured)})
		st.OriginalBytes += int64(len(r.Structured))
	}
	for _, it := range items {
		if it.binary || it.link || it.text == "" {
			continue
		}
		it.tokens, it.estimated = f.tokensOf(it.text)
		textTokens += it.tokens
		estimated = estimated || it.estimated
	}
	st.OriginalTokens, st.OriginalTokensEstimated = textTokens, estimated
	// doneCost finishes an outcome whose cost is known (cost marshals the
	// JSON fields only, so Stats and Elapsed do not change it).
	doneCost := func(o Outcome, strategy string, inline int) (Outcome, error) {
		o.Stats = st
		o.Stats.Strategy = strategy
		o.Stats.Triggered = strategy != StrategyInline
		o.Stats.InlineTokens = inline
		o.Elapsed = f.clock().Sub(began)
		return o, nil
	}
	done := func(o Outcome, strategy string) (Outcome, error) {
		return doneCost(o, strategy, f.cost(o))
	}

	small := !estimated && textTokens <= f.maxInline
	if small && nBinary == 0 {
		o := Outcome{Summary: inlineSummary(items, textTokens, r.IsError), Facts: []string{}, Artifacts: []Artifact{}, Views: []View{}}
		o.Result = inlineResult(items, r.Structured)
		if c := f.cost(o); c <= f.maxInline {
			return doneCost(o, StrategyInline, c)
		}
	}

	s := &storer{f: f, ctx: ctx, owner: owner, byHash: map[string]int{}}
	// Binary parts are stored whatever happens next.
	var binFacts []string
	for _, it := range items {
		if !it.binary {
			continue
		}
		d := binaryDigest(it)
		if _, err := s.put(it.data, d); err != nil {
			return Outcome{}, err
		}
		binFacts = append(binFacts, d.facts...)
	}
	if small {
		if err := s.verify(); err != nil {
			return Outcome{}, err
		}
		o := Outcome{Summary: binarySummary(items, textTokens, r.IsError), Facts: append([]string{}, binFacts...),
			Artifacts: slices.Clone(s.arts), Views: []View{}}
		o.Result = inlineResult(items, r.Structured)
		if f.fitCost(o) <= f.maxInline {
			return done(o, StrategyBinary)
		}
	}

	// Summary: store every non-binary part too.
	digests := make([]digest, 0, len(items))
	handles := make([]string, 0, len(items))
	var extra []string
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			s.rollback()
			return Outcome{}, err
		}
		switch {
		case it.binary:
			i := s.byHash[hashOf(it.data)]
			if slices.Contains(handles, s.arts[i].Handle) {
				extra = append(extra, it.name+": same content as "+s.names[i])
				continue
			}
			digests = append(digests, binaryDigest(it))
			handles = append(handles, s.arts[i].Handle)
			continue
		case it.link:
			extra = append(extra, linkFact(it))
			continue
		case it.text == "":
			extra = append(extra, it.name+": empty")
			continue
		}
		var d digest
		if it.part == nil {
			var err error
			if d, err = jsonDigest(it.name, []byte(it.text)); err != nil {
				d = f.analyzeText(it.name, it.text, "")
			}
		} else {
			d = f.analyzeText(it.name, it.text, it.part.MIMEType)
			if it.part.URI != "" {
				d.label += " " + clip(it.part.URI, 120)
			}
		}
		if prev, ok := s.byHash[hashOf([]byte(it.text))]; ok {
			extra = append(extra, it.name+": same content as "+s.names[prev])
			continue
		}
		a, err := s.put([]byte(it.text), d)
		if err != nil {
			return Outcome{}, err
		}
		digests = append(digests, d)
		handles = append(handles, a.Handle)
	}
	if err := s.verify(); err != nil {
		return Outcome{}, err
	}
	// List the artifacts in part order (binary parts were stored first).
	arts := make([]Artifact, 0, len(s.arts))
	seen := map[string]bool{}
	for _, h := range handles {
		for _, a := range s.arts {
			if a.Handle == h && !seen[h] {
				seen[h] = true
				arts = append(arts, a)
			}
		}
	}
	o := f.fitSummary(items, digests, handles, extra, arts, st, r.IsError)
	return done(o, StrategySummary)
}

// partName names a part for labels and facts: "text part 1".
func partName(p *Part, n int) string {
	switch p.Type {
	case PartText, PartImage, PartAudio, PartResource:
		return p.Type + " part " + commas(n)
	case PartResourceLink:
		return "resource link part " + commas(n)
	}
	return "part " + commas(n)
}

// tokensOf counts s exactly up to ExactTokenBytes and estimates above that.
//
// The estimate counts four samples of 4 KiB taken at evenly spaced offsets
// (each starting at a line start where one is near) and scales their
// bytes-per-token ratio to the whole length. Counting cl100k_base tokens costs
// about a microsecond per byte here (seconds for a 5 MB log), so this keeps
// Apply fast; on the log and JSON fixtures of the tests it is within a few
// percent.
func (f *Firewall) tokensOf(s string) (int, bool) {
	if len(s) <= f.exactBytes {
		return f.m.count(s), false
	}
	const samples, size = 4, 4 << 10
	sb, st := 0, 0
	for i := range samples {
		off := i * (len(s) - size) / (samples - 1)
		if j := strings.IndexByte(s[off:min(off+256, len(s))], '\n'); j >= 0 && off > 0 {
			off += j + 1
		}
		for off < len(s) && off > 0 && !isRuneStart(s[off]) {
			off++
		}
		end := min(off+size, len(s))
		seg := validPrefix(s[off:end])
		sb += len(seg)
		st += f.m.count(seg)
	}
	if sb == 0 || st == 0 {
		return (len(s) + 3) / 4, true
	}
	return int(float64(len(s))*float64(st)/float64(sb) + 0.5), true
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// cost is the token count of the envelope parts an outcome fills.
func (f *Firewall) cost(o Outcome) int {
	b, err := json.Marshal(o)
	if err != nil {
		return 0
	}
	return f.m.count(string(b))
}

// handlePlaceholder tokenises into more tokens than any real handle (36
// against at most 32 over 20,000 random handles, in a JSON string).
const handlePlaceholder = artifacts.HandlePrefix + "2a2a2a2a2a2a2a2a2a2a2a2a2a"

// fitCost is cost with every handle replaced by handlePlaceholder: decisions
// taken on it do not depend on how a random handle happens to tokenise, so
// the same result always gets the same summary, and the real cost is no
// larger.
func (f *Firewall) fitCost(o Outcome) int {
	b, err := json.Marshal(o)
	if err != nil {
		return 0
	}
	return f.m.count(f.handleRE.ReplaceAllLiteralString(string(b), handlePlaceholder))
}

// inlineResult assembles the inline form of the non-binary parts.
func inlineResult(items []*item, structured json.RawMessage) *Inline {
	in := &Inline{Content: []json.RawMessage{}}
	for _, it := range items {
		if it.part == nil || it.binary {
			continue
		}
		in.Content = append(in.Content, rawOf(it.part))
	}
	if len(structured) > 0 {
		in.StructuredContent = structured
	}
	return in
}

// rawOf returns a part's original JSON, or renders it from its fields.
func rawOf(p *Part) json.RawMessage {
	if len(p.Raw) > 0 {
		return p.Raw
	}
	m := map[string]any{"type": p.Type}
	switch p.Type {
	case PartResource:
		res := map[string]any{"uri": p.URI}
		if p.MIMEType != "" {
			res["mimeType"] = p.MIMEType
		}
		if p.Data != nil {
			res["blob"] = base64.StdEncoding.EncodeToString(p.Data)
		} else {
			res["text"] = p.Text
		}
		m["resource"] = res
	case PartResourceLink:
		m["uri"], m["name"] = p.URI, p.Name
		if p.MIMEType != "" {
			m["mimeType"] = p.MIMEType
		}
	case PartImage, PartAudio:
		m["data"], m["mimeType"] = base64.StdEncoding.EncodeToString(p.Data), p.MIMEType
	default:
		m["text"] = p.Text
	}
	b, _ := json.Marshal(m)
	return b
}

// describeParts says "2 text parts and structuredContent".
func describeParts(items []*item, withBinary bool) string {
	counts := map[string]int{}
	var order []string
	structured := false
	for _, it := range items {
		if it.part == nil {
			structured = true
			continue
		}
		if it.binary && !withBinary {
			continue
		}
		k := it.part.Type
		if k == PartResourceLink {
			k = "resource link"
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, plural(counts[k], k+" part", k+" parts"))
	}
	if structured {
		parts = append(parts, "structuredContent")
	}
	if len(parts) == 0 {
		return "empty result"
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func errorPrefix(isError bool) string {
	if isError {
		return "The tool reported an error. "
	}
	return ""
}

func inlineSummary(items []*item, tokens int, isError bool) string {
	return errorPrefix(isError) + describeParts(items, true) + " inline (" + plural(tokens, "token", "tokens") + ")."
}

func binarySummary(items []*item, tokens int, isError bool) string {
	var bins []string
	for _, it := range items {
		if it.binary {
			bins = append(bins, it.name)
		}
	}
	s := errorPrefix(isError)
	if rest := describeParts(items, false); rest != "empty result" {
		s += rest + " inline (" + plural(tokens, "token", "tokens") + "); "
	}
	return s + "binary content stored as artifacts, not inline: " + strings.Join(bins, ", ") + "."
}

// binaryDigest describes a binary part.
func binaryDigest(it *item) digest {
	media := cleanMedia(it.part.MIMEType)
	what := media + ", " + plural(len(it.data), "byte", "bytes")
	if it.part.URI != "" {
		what = clip(it.part.URI, 120) + ", " + what
	}
	return digest{
		name:  it.name,
		kind:  "binary",
		media: media,
		label: it.name + " (" + what + ")",
		facts: []string{it.name + ": " + what + " (binary, kept out of context)"},
	}
}

// cleanMedia returns a usable media type for the store.
func cleanMedia(m string) string {
	m = strings.TrimSpace(m)
	if m == "" || len(m) > artifacts.MaxMediaTypeBytes || strings.IndexFunc(m, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return artifacts.DefaultMediaType
	}
	return m
}

func linkFact(it *item) string {
	p := it.part
	s := it.name + ": " + clip(p.URI, 160)
	if p.Name != "" {
		s += " (" + clip(p.Name, 60)
		if p.MIMEType != "" {
			s += ", " + clip(p.MIMEType, 60)
		}
		s += ")"
	}
	return s
}

// storer puts the parts of one result, deduplicating identical content and
// undoing everything if one put fails.
type storer struct {
	f      *Firewall
	ctx    context.Context
	owner  string
	arts   []Artifact
	names  []string // the part each artifact was stored for
	byHash map[string]int
}

func hashOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (s *storer) put(data []byte, d digest) (Artifact, error) {
	h := hashOf(data)
	if i, ok := s.byHash[h]; ok {
		return s.arts[i], nil
	}
	label := d.label
	if len(label) > artifacts.MaxLabelBytes {
		label = validPrefix(label[:artifacts.MaxLabelBytes])
	}
	label = oneLine(label, artifacts.MaxLabelBytes)
	meta, err := s.f.store.Put(s.ctx, s.owner, artifacts.PutInput{MediaType: d.media, Label: label, Data: data})
	if err != nil {
		s.rollback()
		if ctxErr := s.ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			return Artifact{}, err
		}
		return Artifact{}, fmt.Errorf("%w: %s (%s bytes): %w", ErrStore, d.name, commas(len(data)), err)
	}
	a := Artifact{Handle: meta.Handle, MediaType: meta.MediaType, SizeBytes: meta.SizeBytes, Label: meta.Label, ContentHash: meta.ContentHash}
	s.byHash[h] = len(s.arts)
	s.arts = append(s.arts, a)
	s.names = append(s.names, d.name)
	return a, nil
}

// verify checks that every artifact of this result is still there: a store
// that evicts to stay under its quota may have evicted an earlier part to make
// room for a later one, and a result must never be listed with content gone.
func (s *storer) verify() error {
	for _, a := range s.arts {
		if _, err := s.f.store.Stat(s.ctx, s.owner, a.Handle); err != nil {
			s.rollback()
			if errors.Is(err, artifacts.ErrNotFound) {
				return fmt.Errorf("%w: the result does not fit the store's quota (an earlier part was evicted): %w", ErrStore, artifacts.ErrTooLarge)
			}
			return fmt.Errorf("%w: %w", ErrStore, err)
		}
	}
	return nil
}

// rollback deletes what this result stored so far.
func (s *storer) rollback() {
	ctx := context.WithoutCancel(s.ctx)
	for _, a := range s.arts {
		_ = s.f.store.Delete(ctx, s.owner, a.Handle)
	}
	s.arts, s.names = nil, nil
	clear(s.byHash)
}
