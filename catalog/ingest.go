package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/toolid"
)

// Finding codes of the ingest report.
const (
	CodeSchemaInvalid      = "SCHEMA_INVALID"        // not JSON, not an object, or fails meta-validation
	CodeSchemaTooLarge     = "SCHEMA_TOO_LARGE"      // over SchemaLimits.MaxBytes
	CodeSchemaTooDeep      = "SCHEMA_TOO_DEEP"       // over SchemaLimits.MaxDepth
	CodeSchemaTooManyProps = "SCHEMA_TOO_MANY_PROPS" // over SchemaLimits.MaxProperties
	CodeSchemaMissing      = "SCHEMA_MISSING"        // no inputSchema; treated as an empty object schema
	CodeOutputSchema       = "OUTPUT_SCHEMA_INVALID" // outputSchema failed the same checks
	CodeCardOverBudget     = "CARD_OVER_BUDGET"      // the card exceeds 80 tokens even after truncation
	CodeNameMapped         = "NAME_MAPPED"           // name outside the grammar, fitted deterministically
	CodeNamespaceMapped    = "NAMESPACE_FALLBACK"    // nothing of the server name fits the grammar
	CodeNamespaceCollision = "NAMESPACE_COLLISION"   // two servers fit to one namespace; both suffixed
	CodeDuplicate          = "DUPLICATE"             // same server and name listed again; first kept
	CodeIDCollision        = "ID_COLLISION"          // distinct items with one canonical id; ~N suffix
	CodeVersionInvalid     = "VERSION_INVALID"       // _meta.version outside the grammar; hash used
	CodeDescriptionEmpty   = "DESCRIPTION_EMPTY"     // nothing to route on but the name
)

// Severity ranks a finding. Errors reject the catalog in strict mode; in
// lenient mode the item is kept and flagged (or, when it cannot be carded
// at all, left out).
type Severity string

// Severities.
const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Finding is one observation of ingest about one item.
type Finding struct {
	Severity Severity    `json:"severity"`
	Code     string      `json:"code"`
	Kind     toolid.Kind `json:"kind"`
	Server   string      `json:"server"`
	Name     string      `json:"name"`
	ID       string      `json:"id,omitempty"`
	Message  string      `json:"message"`
}

// Report summarises one ingest.
type Report struct {
	Tools     int       `json:"tools"`
	Resources int       `json:"resources"`
	Prompts   int       `json:"prompts"`
	Servers   int       `json:"servers"`
	Dropped   int       `json:"dropped"` // listed items not in the snapshot
	Errors    int       `json:"errors"`
	Warnings  int       `json:"warnings"`
	Findings  []Finding `json:"findings"`
}

// Counts returns the number of findings per code.
func (r Report) Counts() map[string]int {
	m := map[string]int{}
	for _, f := range r.Findings {
		m[f.Code]++
	}
	return m
}

// ErrRejected is returned by Ingest in strict mode when any finding is an
// error. The report is still returned.
var ErrRejected = errors.New("catalog rejected")

// Options configure Ingest.
type Options struct {
	// Cards builds the ChoiceCards. Required.
	Cards *choicecard.Builder
	// Limits bound upstream schemas; zero fields take DefaultSchemaLimits.
	Limits SchemaLimits
	// Strict rejects the whole catalog on any error finding.
	Strict bool
	// Classify, when set, returns a registry's class of a tool ("read",
	// "write", or "" when the registry does not classify it; spec 000). A
	// registry class overrides the upstream's unverified hints on the card:
	// write tools get side_effects and the TagWrite tag, read tools the
	// read-only tag. It is called concurrently.
	Classify func(server, name string) string
}

// TagWrite is the card tag of a tool a registry classifies write.
const TagWrite = "write"

// Ingest derives ids, checks schemas and builds cards for everything in src
// and returns an immutable Snapshot with its Report. Item order is catalog
// order: tools, then resources, then prompts, each as listed.
func Ingest(src Source, opts Options) (*Snapshot, Report, error) {
	if opts.Cards == nil {
		return nil, Report{}, errors.New("catalog: Options.Cards is required")
	}
	lim := opts.Limits
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultSchemaLimits.MaxBytes
	}
	if lim.MaxDepth <= 0 {
		lim.MaxDepth = DefaultSchemaLimits.MaxDepth
	}
	if lim.MaxProperties <= 0 {
		lim.MaxProperties = DefaultSchemaLimits.MaxProperties
	}
	in := &ingester{opts: opts, lim: lim}
	in.assignNamespaces(src)
	in.tools(src.Tools)
	in.resources(src.Resources)
	in.prompts(src.Prompts)
	snap := in.finish()
	rep := snap.report
	if opts.Strict && rep.Errors > 0 {
		return nil, rep, fmt.Errorf("%w: %d error findings", ErrRejected, rep.Errors)
	}
	return snap, rep, nil
}

type ingester struct {
	opts     Options
	lim      SchemaLimits
	ns       map[string]string // server -> namespace
	items    []*Item
	findings []Finding
	dropped  int
}

func (in *ingester) add(f Finding) { in.findings = append(in.findings, f) }

// assignNamespaces gives every distinct server a namespace. Servers that fit
// to the same namespace are all suffixed with a hash of their own name, so
// the outcome does not depend on which was listed first.
func (in *ingester) assignNamespaces(src Source) {
	var servers []string
	seen := map[string]bool{}
	note := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			servers = append(servers, s)
		}
	}
	for _, t := range src.Tools {
		note(t.Server)
	}
	for _, r := range src.Resources {
		note(r.Server)
	}
	for _, p := range src.Prompts {
		note(p.Server)
	}
	in.ns = make(map[string]string, len(servers))
	owners := map[string][]string{}
	for _, s := range servers {
		ns := toolid.Namespace(s)
		if ns == "" {
			ns = "ns-" + shortHash(s)
			in.add(Finding{Severity: SeverityWarning, Code: CodeNamespaceMapped, Server: s,
				Message: fmt.Sprintf("server name has no characters the namespace grammar admits; namespace %s", ns)})
		}
		in.ns[s] = ns
		owners[ns] = append(owners[ns], s)
	}
	for ns, group := range owners {
		if len(group) < 2 {
			continue
		}
		for _, s := range group {
			base := ns
			if len(base) > 57 {
				base = base[:57]
			}
			in.ns[s] = base + "-" + shortHash(s)
			in.add(Finding{Severity: SeverityWarning, Code: CodeNamespaceCollision, Server: s,
				Message: fmt.Sprintf("%d servers fit to namespace %s; this one is %s", len(group), ns, in.ns[s])})
		}
	}
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:3])
}

type toolWork struct {
	def    *ToolDef
	raw    json.RawMessage // the input schema checked (a default when absent)
	input  schemaCheck
	output schemaCheck
	card   choicecard.Card
	cardEr error
	id     toolid.ID
}

func (in *ingester) tools(defs []ToolDef) {
	all := make([]*toolWork, len(defs))
	for i := range defs {
		all[i] = &toolWork{def: &defs[i]}
	}
	// Schema compilation and card building dominate ingest; both are pure
	// per tool, so they run on every core.
	parallel(len(all), func(i int) { in.prepareTool(all[i]) })

	// A server cannot have two tools of one name (dispatch would be
	// ambiguous), so its first listing wins (spec 003 §4.6). Without a
	// server, two same-named tools may be different tools of unknown
	// servers: only identical ids are duplicates there.
	type key struct{ server, name, id string }
	seen := make(map[key]bool, len(all))
	work := make([]*toolWork, 0, len(all))
	for _, w := range all {
		k := key{server: w.def.Server, name: w.def.Name}
		if k.server == "" {
			k.id = w.id.String()
		}
		if seen[k] {
			in.dropped++
			in.add(Finding{Severity: SeverityWarning, Code: CodeDuplicate, Kind: toolid.KindTool, Server: w.def.Server, Name: w.def.Name,
				Message: "tool listed again by the same server; the first definition is kept"})
			continue
		}
		seen[k] = true
		work = append(work, w)
	}

	ids := make([]string, len(work))
	for i, w := range work {
		ids[i] = w.id.String()
	}
	in.place(toolid.KindTool, ids, func(i int, key string) *Item {
		w := work[i]
		d := w.def
		it := &Item{ID: key, Canonical: w.id, Kind: toolid.KindTool, Server: d.Server, Namespace: w.id.Namespace,
			UpstreamName: d.Name, Tool: d, schemaOK: w.input.compiled != nil, inputRaw: w.raw, validator: &lazyValidator{}, output: &lazyValidator{}}
		base := Finding{Kind: toolid.KindTool, Server: d.Server, Name: d.Name, ID: key}
		flag := func(sev Severity, code, msg string) {
			f := base
			f.Severity, f.Code, f.Message = sev, code, msg
			it.Findings = append(it.Findings, f)
			in.add(f)
		}
		switch {
		case len(d.InputSchema) == 0:
			flag(SeverityWarning, CodeSchemaMissing, "no inputSchema; arguments are checked against an empty object schema")
		case w.input.code != "":
			flag(SeverityError, w.input.code, w.input.msg)
		}
		if len(d.OutputSchema) > 0 && w.output.code != "" {
			flag(SeverityError, CodeOutputSchema, w.output.code+": "+w.output.msg)
		}
		if !strings.Contains(d.Name, w.id.Name) { // the id name is not a verbatim part of the upstream name
			flag(SeverityWarning, CodeNameMapped, fmt.Sprintf("name %q is outside the tool_id grammar; id name %s", d.Name, w.id.Name))
		}
		if v := metaVersion(d.Meta); v != "" && !toolid.ValidVersion(v) {
			flag(SeverityWarning, CodeVersionInvalid, fmt.Sprintf("_meta.version %q is outside the grammar; hash8 used", v))
		}
		if d.Description == "" {
			flag(SeverityWarning, CodeDescriptionEmpty, "no description")
		}
		if w.cardEr != nil {
			flag(SeverityError, CodeCardOverBudget, oneLine(w.cardEr.Error()))
			return nil
		}
		it.Card = w.card
		it.Card.ID = key
		return it
	})
}

func (in *ingester) prepareTool(w *toolWork) {
	d := w.def
	raw := d.InputSchema
	if len(raw) == 0 {
		raw = json.RawMessage(`{"type":"object"}`)
	}
	w.raw = raw
	w.input = checkSchema(raw, in.lim)
	if len(d.OutputSchema) > 0 {
		w.output = checkSchema(d.OutputSchema, in.lim)
	}
	w.id = toolid.ForTool(in.ns[d.Server], d.Name, metaVersion(d.Meta), toolid.ShapeOf(w.input.doc))
	ro, _ := boolHint(d.Annotations, "readOnlyHint")
	destructive, _ := boolHint(d.Annotations, "destructiveHint")
	sideEffects := destructive
	var tags []string
	if in.opts.Classify != nil {
		switch in.opts.Classify(d.Server, d.Name) {
		case "write":
			ro, sideEffects, tags = false, true, []string{TagWrite}
		case "read":
			ro, destructive, sideEffects = true, false, false
		}
	}
	w.card, w.cardEr = in.opts.Cards.Build(choicecard.Input{
		ID:          w.id.String(),
		Name:        d.Name,
		Description: d.Description,
		Tags:        tags,
		Kind:        choicecard.KindTool,
		Namespace:   w.id.Namespace,
		HasSchema:   true,
		ReadOnly:    ro,
		Destructive: destructive,
		SideEffects: sideEffects,
	})
}

func (in *ingester) resources(defs []ResourceDef) {
	kept := firstOf(in, defs, toolid.KindResource, func(d *ResourceDef) (string, string) { return d.Server, d.URI })
	ids := make([]string, len(kept))
	cids := make([]toolid.ID, len(kept))
	for i, d := range kept {
		cids[i] = toolid.ForResource(in.ns[d.Server], d.Name, d.URI)
		ids[i] = toolid.FormatPrimitive(toolid.KindResource, cids[i])
	}
	in.place(toolid.KindResource, ids, func(i int, key string) *Item {
		d := kept[i]
		desc := d.Description
		if desc == "" {
			desc = d.Title
		}
		card, err := in.opts.Cards.Build(choicecard.Input{ID: key, Name: firstNonEmpty(d.Name, d.URI), Description: desc,
			Kind: choicecard.KindResource, Namespace: cids[i].Namespace, ReadOnly: true})
		if err != nil {
			in.add(Finding{Severity: SeverityError, Code: CodeCardOverBudget, Kind: toolid.KindResource, Server: d.Server, Name: d.URI, ID: key, Message: oneLine(err.Error())})
			return nil
		}
		return &Item{ID: key, Canonical: cids[i], Kind: toolid.KindResource, Server: d.Server, Namespace: cids[i].Namespace,
			UpstreamName: d.URI, Card: card, Resource: d}
	})
}

func (in *ingester) prompts(defs []PromptDef) {
	kept := firstOf(in, defs, toolid.KindPrompt, func(d *PromptDef) (string, string) { return d.Server, d.Name })
	ids := make([]string, len(kept))
	cids := make([]toolid.ID, len(kept))
	for i, d := range kept {
		args := make([]string, len(d.Arguments))
		for j, a := range d.Arguments {
			args[j] = a.Name
		}
		cids[i] = toolid.ForPrompt(in.ns[d.Server], d.Name, args)
		ids[i] = toolid.FormatPrimitive(toolid.KindPrompt, cids[i])
	}
	in.place(toolid.KindPrompt, ids, func(i int, key string) *Item {
		d := kept[i]
		card, err := in.opts.Cards.Build(choicecard.Input{ID: key, Name: d.Name, Description: firstNonEmpty(d.Description, d.Title),
			Kind: choicecard.KindPrompt, Namespace: cids[i].Namespace, HasSchema: len(d.Arguments) > 0, ReadOnly: true})
		if err != nil {
			in.add(Finding{Severity: SeverityError, Code: CodeCardOverBudget, Kind: toolid.KindPrompt, Server: d.Server, Name: d.Name, ID: key, Message: oneLine(err.Error())})
			return nil
		}
		return &Item{ID: key, Canonical: cids[i], Kind: toolid.KindPrompt, Server: d.Server, Namespace: cids[i].Namespace,
			UpstreamName: d.Name, Card: card, Prompt: d}
	})
}

// firstOf keeps the first definition of each (server, name) and reports
// the later ones as duplicates: one server cannot list two resources of one
// uri, or two prompts of one name, that a read could tell apart.
func firstOf[T any](in *ingester, defs []T, kind toolid.Kind, key func(*T) (server, name string)) []*T {
	type k struct{ server, name string }
	seen := make(map[k]bool, len(defs))
	kept := make([]*T, 0, len(defs))
	for i := range defs {
		d := &defs[i]
		server, name := key(d)
		if seen[k{server, name}] {
			in.dropped++
			in.add(Finding{Severity: SeverityWarning, Code: CodeDuplicate, Kind: kind, Server: server, Name: name,
				Message: string(kind) + " listed again by the same server; the first is kept"})
			continue
		}
		seen[k{server, name}] = true
		kept = append(kept, d)
	}
	return kept
}

// place disambiguates ids (§9.3), records collisions, and appends the items
// that build returns (nil means the item was dropped).
func (in *ingester) place(kind toolid.Kind, ids []string, build func(i int, key string) *Item) {
	keys := toolid.Disambiguate(ids)
	for i, key := range keys {
		it := build(i, key)
		if it == nil {
			in.dropped++
			continue
		}
		if key != ids[i] {
			f := Finding{Severity: SeverityWarning, Code: CodeIDCollision, Kind: kind, Server: it.Server, Name: it.UpstreamName, ID: key,
				Message: fmt.Sprintf("id %s is taken by an earlier item; this one is %s", ids[i], key)}
			it.Findings = append(it.Findings, f)
			in.add(f)
		}
		in.items = append(in.items, it)
	}
}

func (in *ingester) finish() *Snapshot {
	s := &Snapshot{
		items:     in.items,
		byID:      make(map[string]*Item, len(in.items)),
		byKind:    map[toolid.Kind][]*Item{},
		namespace: in.ns,
	}
	for _, it := range in.items {
		s.byID[it.ID] = it
		s.byKind[it.Kind] = append(s.byKind[it.Kind], it)
	}
	s.indexWire(wireName)
	rep := Report{
		Tools:     len(s.byKind[toolid.KindTool]),
		Resources: len(s.byKind[toolid.KindResource]),
		Prompts:   len(s.byKind[toolid.KindPrompt]),
		Servers:   len(in.ns),
		Dropped:   in.dropped,
		Findings:  in.findings,
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		a, b := rep.Findings[i], rep.Findings[j]
		if a.Severity != b.Severity {
			return a.Severity == SeverityError
		}
		return false
	})
	for _, f := range rep.Findings {
		if f.Severity == SeverityError {
			rep.Errors++
		} else {
			rep.Warnings++
		}
	}
	s.report = rep
	return s
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// parallel runs fn(0..n-1) on GOMAXPROCS workers and waits for all of them.
func parallel(n int, fn func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
