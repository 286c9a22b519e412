package router

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/toolid"
)

// DefaultMaxChildren is the default fan-out cap of a ChoiceGraph node.
const DefaultMaxChildren = 20

// GraphOptions configure NewGraph.
type GraphOptions struct {
	// Cards builds the internal-node cards. Required.
	Cards *choicecard.Builder
	// MaxChildren caps the children of every node below the root; 0 means
	// DefaultMaxChildren. It must be at least 2.
	MaxChildren int
}

// Page is one page of a Browse answer.
type Page struct {
	// Cards are at most top_k cards, in the node's child order.
	Cards []choicecard.Card `json:"cards"`
	// NextCursor continues the listing; "" on the last page. It is opaque
	// and valid only for the same path of the same graph.
	NextCursor string `json:"next_cursor,omitempty"`
	// Total is the number of children of the addressed node (1 for a
	// leaf).
	Total int `json:"total"`
}

// GraphStats describes the shape of a Graph.
type GraphStats struct {
	Namespaces int `json:"namespaces"`
	// Clusters counts the internal nodes below the namespaces: the sum of
	// the five counts that follow.
	Clusters int `json:"clusters"`
	// ByName, ByDescription and ByVerb count the clusters named after a
	// word of the tool names, of the descriptions, or an action verb.
	ByName        int `json:"by_name"`
	ByDescription int `json:"by_description"`
	ByVerb        int `json:"by_verb"`
	// Others counts the clusters of leftover tools ("other").
	Others int `json:"others"`
	// Fallbacks counts the clusters made by alphabetical chunking because
	// no term split their group.
	Fallbacks int `json:"fallbacks"`
	Leaves    int `json:"leaves"`
	// MaxDepth is the depth of the deepest leaf (a namespace is at depth 1).
	MaxDepth int `json:"max_depth"`
	// MaxFanOut is the largest number of children of a node below the root.
	MaxFanOut int `json:"max_fan_out"`
}

// Graph is a ChoiceGraph (spec 003 §3): root -> namespaces -> clusters ->
// items, for browsing by path. It is immutable after NewGraph and safe for
// concurrent use.
//
// The root holds one internal card per namespace (a browse of "/" pages
// them, top_k at a time). Every other node holds at most MaxChildren
// children. A node's children are ordered by card id ascending: internal
// nodes (ids are paths, starting with "/") come first, sorted by path, then
// items sorted by id.
type Graph struct {
	root        *gnode
	byPath      map[string]*gnode
	byItem      map[string]string // item id -> leaf path
	fingerprint string
	stats       GraphStats
	// cards and noun rebuild internal cards for a caller who sees only
	// part of a node's subtree (BrowseFiltered).
	cards *choicecard.Builder
	noun  string
}

// gnode is one node of a Graph.
type gnode struct {
	path     string
	card     choicecard.Card
	item     *catalog.Item // leaves only
	children []*gnode      // internal nodes only, in child order
	tools    int           // leaves in the subtree
	// ns and name are the namespace and display name the internal card
	// was built with.
	ns, name string
	// spelled is true for a cluster named after the first and last of
	// its members (an alphabetical chunk): its name shows members.
	spelled bool
	// num numbers the nodes 0..len(byPath)-1, for per-browse tables.
	num int
}

func (n *gnode) leaf() bool { return n.item != nil }

// NewGraph builds the ChoiceGraph of items, which must all be of one kind
// (tools, or resources, or prompts) with distinct ids and valid namespaces.
// The same items in any order yield the same graph, byte for byte.
func NewGraph(items []*catalog.Item, opts GraphOptions) (*Graph, error) {
	if opts.Cards == nil {
		return nil, errors.New("router: GraphOptions.Cards is required")
	}
	max := opts.MaxChildren
	if max == 0 {
		max = DefaultMaxChildren
	}
	if max < 2 {
		return nil, fmt.Errorf("router: GraphOptions.MaxChildren %d is below 2", max)
	}
	byNS := map[string][]*gtool{}
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		if it == nil {
			return nil, fmt.Errorf("router: item %d is nil", i)
		}
		if it.Kind != items[0].Kind {
			return nil, fmt.Errorf("router: items mix kinds %s and %s", items[0].Kind, it.Kind)
		}
		if seen[it.ID] {
			return nil, fmt.Errorf("router: duplicate item id %q", it.ID)
		}
		seen[it.ID] = true
		if segmentProblem(it.Namespace, true) != "" {
			return nil, fmt.Errorf("router: item %q: namespace %q is not a valid path segment", it.ID, it.Namespace)
		}
		byNS[it.Namespace] = append(byNS[it.Namespace], newGTool(it))
	}
	nss := make([]string, 0, len(byNS))
	for ns := range byNS {
		nss = append(nss, ns)
	}
	slices.Sort(nss)

	g := &Graph{root: &gnode{path: "/"}, byPath: map[string]*gnode{}, byItem: make(map[string]string, len(items)), cards: opts.Cards}
	b := &graphBuilder{g: g, max: max, cards: opts.Cards, noun: string(toolid.KindTool)}
	if len(items) > 0 && items[0].Kind != "" {
		b.noun = string(items[0].Kind)
	}
	g.noun = b.noun
	g.byPath["/"] = g.root
	for _, ns := range nss {
		ms := byNS[ns]
		slices.SortFunc(ms, func(a, b *gtool) int { return strings.Compare(a.id(), b.id()) })
		dropGenericDesc(ms)
		n := &gnode{path: "/" + ns}
		g.byPath[n.path] = n
		g.root.children = append(g.root.children, n)
		excl := newTermSet()
		for _, w := range graphWords(ns, false) {
			excl.add(w, graphStem(w))
		}
		for _, t := range ms {
			for _, w := range graphWords(t.item.Server, true) {
				excl.add(w, graphStem(w))
			}
		}
		if err := b.fill(n, ns, ms, excl, 1); err != nil {
			return nil, err
		}
		if err := b.cardFor(n, ns, serverName(ms, ns)); err != nil {
			return nil, err
		}
	}
	for _, n := range g.root.children {
		g.root.tools += n.tools
	}
	num := 0
	for _, n := range g.byPath {
		n.num = num
		num++
	}
	g.stats = b.stats
	g.stats.Namespaces = len(nss)
	g.fingerprint = g.computeFingerprint()
	return g, nil
}

// serverName is the display name of a namespace card: the upstream server's
// own name when all of the namespace's items share one, else the namespace.
func serverName(ms []*gtool, ns string) string {
	s := ms[0].item.Server
	for _, t := range ms[1:] {
		if t.item.Server != s {
			return ns
		}
	}
	if s == "" {
		return ns
	}
	return s
}

// graphBuilder carries the state of one NewGraph.
type graphBuilder struct {
	g     *Graph
	max   int
	cards *choicecard.Builder
	stats GraphStats
	// noun is what the items are called in internal cards ("tool",
	// "resource", "prompt").
	noun string
}

// fill builds the children of n (in namespace ns, at depth depth) from its
// tools ms (in id order), splitting them into clusters when there are more
// than max.
func (b *graphBuilder) fill(n *gnode, ns string, ms []*gtool, excl termSet, depth int) error {
	n.tools = len(ms)
	var groups []group
	loose := ms
	if len(ms) > b.max {
		groups, loose = partition(ms, excl, b.max)
	}
	slices.SortStableFunc(groups, func(a, b group) int { return strings.Compare(a.name, b.name) })
	segs := make([]string, 0, len(groups)+len(loose))
	for _, gr := range groups {
		segs = append(segs, gr.name)
	}
	for _, t := range loose {
		segs = append(segs, leafSegment(t.item))
	}
	segs = uniqueSegments(segs)
	for i, gr := range groups {
		c := &gnode{path: joinPath(n.path, segs[i]), spelled: gr.how == byAlphabet}
		b.g.byPath[c.path] = c
		n.children = append(n.children, c)
		b.stats.Clusters++
		switch gr.how {
		case byName:
			b.stats.ByName++
		case byDescription:
			b.stats.ByDescription++
		case byVerb:
			b.stats.ByVerb++
		case byOther:
			b.stats.Others++
		case byAlphabet:
			b.stats.Fallbacks++
		}
		if err := b.fill(c, ns, gr.members, gr.excl, depth+1); err != nil {
			return err
		}
		if err := b.cardFor(c, ns, segs[i]); err != nil {
			return err
		}
	}
	for i, t := range loose {
		c := &gnode{path: joinPath(n.path, segs[len(groups)+i]), item: t.item, card: t.item.Card, tools: 1}
		b.g.byPath[c.path] = c
		b.g.byItem[t.id()] = c.path
		n.children = append(n.children, c)
		b.stats.Leaves++
		b.stats.MaxDepth = bigger(b.stats.MaxDepth, depth+1)
	}
	slices.SortStableFunc(n.children, func(a, b *gnode) int { return strings.Compare(a.childID(), b.childID()) })
	b.stats.MaxFanOut = bigger(b.stats.MaxFanOut, len(n.children))
	return nil
}

// cardFor builds the internal card of n, whose children are complete:
// id is the path, name the given display name, and the description counts
// the tools below and names the children, groups first:
//
//	117 tools; groups: issue (27), pull-request (22), ...; tools: get_me, ...
//
// The builder truncates the description to the token budget.
func (b *graphBuilder) cardFor(n *gnode, ns, name string) error {
	n.ns, n.name = ns, name
	card, err := b.g.internalCard(n, n.children, n.tools, func(c *gnode) int { return c.tools })
	if err != nil {
		return err
	}
	n.card = card
	return nil
}

// internalCard builds the card of internal node n listing children, with
// tools leaves below it and count(c) below each child.
func (g *Graph) internalCard(n *gnode, children []*gnode, tools int, count func(*gnode) int) (choicecard.Card, error) {
	var groups, leaves []string
	for _, c := range children {
		if c.leaf() {
			leaves = append(leaves, c.card.Name)
		} else {
			groups = append(groups, lastSegment(c.path)+" ("+strconv.Itoa(count(c))+")")
		}
	}
	var d strings.Builder
	d.WriteString(strconv.Itoa(tools) + " " + g.noun)
	if tools != 1 {
		d.WriteString("s")
	}
	switch {
	case len(groups) > 0 && len(leaves) > 0:
		d.WriteString("; groups: " + strings.Join(groups, ", ") + "; " + g.noun + "s: " + strings.Join(leaves, ", "))
	case len(groups) > 0:
		d.WriteString("; groups: " + strings.Join(groups, ", "))
	default:
		d.WriteString(": " + strings.Join(leaves, ", "))
	}
	in := choicecard.Input{
		ID:          n.path,
		Name:        n.name,
		Description: d.String(),
		Kind:        choicecard.KindInternal,
		Namespace:   n.ns,
	}
	card, err := g.cards.Build(in)
	if errors.Is(err, choicecard.ErrOverBudget) {
		// A very long path leaves no room: retry with a short name.
		in.Name = cutSeg(lastSegment(n.path), 16)
		card, err = g.cards.Build(in)
	}
	if err != nil {
		return choicecard.Card{}, fmt.Errorf("router: card of %s: %w", n.path, err)
	}
	return card, nil
}

func lastSegment(path string) string { return path[strings.LastIndexByte(path, '/')+1:] }

// childID is the id of the card that stands for n in its parent's listing.
func (n *gnode) childID() string {
	if n.leaf() {
		return n.item.ID
	}
	return n.path
}

func joinPath(parent, seg string) string {
	if parent == "/" {
		return "/" + seg
	}
	return parent + "/" + seg
}

// computeFingerprint hashes every node (path and card JSON) in depth-first
// child order: two graphs with the same fingerprint answer every browse
// alike.
func (g *Graph) computeFingerprint() string {
	h := sha256.New()
	var walk func(n *gnode)
	walk = func(n *gnode) {
		h.Write([]byte(n.path))
		h.Write([]byte{0})
		if n != g.root {
			j, _ := json.Marshal(n.card) // a built card always marshals
			h.Write(j)
		}
		h.Write([]byte{0})
		for _, c := range n.children {
			walk(c)
		}
	}
	walk(g.root)
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Fingerprint identifies the graph's content (16 hex characters): equal for
// graphs built from the same items, different (with overwhelming
// probability) otherwise.
func (g *Graph) Fingerprint() string { return g.fingerprint }

// Stats returns the shape of the graph.
func (g *Graph) Stats() GraphStats { return g.stats }

// PathOf returns the leaf path of the item with catalog id id, the path
// whose browse answers with that item's card alone.
func (g *Graph) PathOf(id string) (string, bool) {
	p, ok := g.byItem[id]
	return p, ok
}

// Len returns the number of items (leaves) in the graph.
func (g *Graph) Len() int { return g.root.tools }

// Browse answers tool_browse(path): the children of the addressed node as
// cards, at most topK of them (0 means DefaultTopK; otherwise 1..MaxTopK),
// starting where cursor (from a previous page of the same path, or "")
// says. Internal nodes are cards of kind internal whose id is the path to
// browse next; items are their catalog cards. A leaf path answers with
// the item's single card. Errors: a malformed path wraps ErrPathInvalid, a
// well-formed path naming no node ErrPathNotFound, a bad topK or cursor
// ErrArgsInvalid.
func (g *Graph) Browse(path string, topK int, cursor string) (Page, error) {
	return g.BrowseFiltered(path, topK, cursor, nil)
}

// BrowseFiltered is Browse for a caller who sees only the items see
// accepts (nil: every item). The answer is what Browse would give over a
// graph of the visible items alone, with the paths of this one: a node
// with no visible item below it answers ErrPathNotFound exactly like a
// path that does not exist, counts and descriptions count visible items
// only, and paging and Total run over the visible children, so nothing
// about an invisible item shows (spec 001 MUST 3). A cursor is bound to the
// visible listing it continues.
func (g *Graph) BrowseFiltered(path string, topK int, cursor string, see func(*catalog.Item) bool) (Page, error) {
	k, err := checkTopK(topK)
	if err != nil {
		return Page{}, err
	}
	p, err := ParsePath(path)
	if err != nil {
		return Page{}, err
	}
	node := p.Node()
	v := newVisibility(see, len(g.byPath))
	n, ok := g.byPath[node]
	if !ok || v.count(n) == 0 && n != g.root || v.spells(g, p) {
		return Page{}, fmt.Errorf("%w: %s", ErrPathNotFound, quotePath(node))
	}
	if n.leaf() {
		if cursor != "" {
			return Page{}, fmt.Errorf("%w: cursor given for leaf %s", ErrArgsInvalid, quotePath(node))
		}
		return Page{Cards: []choicecard.Card{cloneCard(n.card)}, Total: 1}, nil
	}
	children := v.children(n)
	tag := g.cursorTag(node, children, see != nil)
	total := len(children)
	off := 0
	if cursor != "" {
		if off, err = decodeCursor(cursor, node, tag); err != nil {
			return Page{}, err
		}
		if off >= total {
			return Page{}, fmt.Errorf("%w: cursor is past the end of %s", ErrArgsInvalid, quotePath(node))
		}
	}
	end := min(off+k, total)
	page := Page{Cards: make([]choicecard.Card, 0, end-off), Total: total}
	for _, c := range children[off:end] {
		card, err := g.cardOf(c, v)
		if err != nil {
			return Page{}, err
		}
		page.Cards = append(page.Cards, card)
	}
	if end < total {
		page.NextCursor = encodeCursor(end, tag)
	}
	return page, nil
}

// cardOf is the card of child c as a caller with visibility v sees it: the
// built card when every item below c is visible, else an internal card
// rebuilt over the visible children.
func (g *Graph) cardOf(c *gnode, v *visibility) (choicecard.Card, error) {
	if c.leaf() || v.count(c) == c.tools {
		return cloneCard(c.card), nil
	}
	card, err := g.internalCard(c, v.children(c), v.count(c), v.count)
	if err != nil {
		return choicecard.Card{}, err
	}
	return cloneCard(card), nil
}

// visibility counts the visible leaves below each node for one browse,
// asking see about each item once.
type visibility struct {
	see  func(*catalog.Item) bool
	memo []int32 // by node number: visible leaves + 1, 0 not counted yet
}

func newVisibility(see func(*catalog.Item) bool, nodes int) *visibility {
	v := &visibility{see: see}
	if see != nil {
		v.memo = make([]int32, nodes)
	}
	return v
}

// count returns the number of visible items below n (n itself for a leaf).
func (v *visibility) count(n *gnode) int {
	if v.see == nil {
		return n.tools
	}
	if c := v.memo[n.num]; c > 0 {
		return int(c - 1)
	}
	c := 0
	if n.leaf() {
		if v.see(n.item) {
			c = 1
		}
	} else {
		for _, ch := range n.children {
			c += v.count(ch)
		}
	}
	v.memo[n.num] = int32(c + 1)
	return c
}

// partial reports whether the caller sees some but not all of what is
// below n.
func (v *visibility) partial(n *gnode) bool {
	c := v.count(n)
	return c > 0 && c < n.tools
}

// children lists what the caller sees of n's children: those with a
// visible item below them, except that a cluster named after its first and
// last members (an alphabetical chunk) that the caller sees only part of
// is replaced by its visible items, since its name could name an item the
// caller may not see.
func (v *visibility) children(n *gnode) []*gnode {
	if v.see == nil {
		return n.children
	}
	out := make([]*gnode, 0, len(n.children))
	for _, c := range n.children {
		switch {
		case v.count(c) == 0:
		case c.spelled && v.partial(c):
			out = append(out, v.leaves(c, nil)...)
		default:
			out = append(out, c)
		}
	}
	if len(out) != len(n.children) {
		slices.SortStableFunc(out, func(a, b *gnode) int { return strings.Compare(a.childID(), b.childID()) })
	}
	return out
}

// leaves appends the visible leaves below n to out.
func (v *visibility) leaves(n *gnode, out []*gnode) []*gnode {
	if n.leaf() {
		if v.count(n) == 1 {
			out = append(out, n)
		}
		return out
	}
	for _, c := range n.children {
		out = v.leaves(c, out)
	}
	return out
}

// spells reports whether path p runs through a cluster whose name could
// name an item the caller may not see (see children): such a path is not
// shown to the caller, so it answers like a missing one.
func (v *visibility) spells(g *Graph, p Path) bool {
	if v.see == nil {
		return false
	}
	path := ""
	for _, seg := range p.Segments {
		path += "/" + seg
		if n, ok := g.byPath[path]; ok && n.spelled && v.partial(n) {
			return true
		}
	}
	return false
}

// checkTopK applies the top_k rule: 0 means DefaultTopK, else 1..MaxTopK.
func checkTopK(k int) (int, error) {
	switch {
	case k == 0:
		return DefaultTopK, nil
	case k < 0 || k > MaxTopK:
		return 0, fmt.Errorf("%w: top_k %d is outside 1..%d", ErrArgsInvalid, k, MaxTopK)
	}
	return k, nil
}

func cloneCard(c choicecard.Card) choicecard.Card {
	c.Tags = slices.Clone(c.Tags)
	if c.Tags == nil {
		c.Tags = []string{}
	}
	return c
}

// A cursor is base64url (unpadded) of 12 bytes: the big-endian uint32
// offset of the next page, then the first 8 bytes of
// sha256(fingerprint, 0, node path). A cursor is thus bound to one node of
// one graph: after a catalog refresh, or on another path, it is refused.
const (
	cursorBytes    = 12
	maxCursorChars = 64
)

func (g *Graph) cursorTag(node string, children []*gnode, filtered bool) []byte {
	h := sha256.New()
	h.Write([]byte(g.fingerprint))
	h.Write([]byte{0})
	h.Write([]byte(node))
	if filtered {
		// A filtered listing's cursor is bound to the visible children
		// too: it continues only the listing it came from.
		for _, c := range children {
			h.Write([]byte{0})
			h.Write([]byte(c.childID()))
		}
	}
	return h.Sum(nil)[:8]
}

func encodeCursor(off int, tag []byte) string {
	var raw [cursorBytes]byte
	binary.BigEndian.PutUint32(raw[:4], uint32(off))
	copy(raw[4:], tag)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

func decodeCursor(cursor, node string, tag []byte) (int, error) {
	if len(cursor) > maxCursorChars {
		return 0, fmt.Errorf("%w: malformed cursor", ErrArgsInvalid)
	}
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil || len(raw) != cursorBytes {
		return 0, fmt.Errorf("%w: malformed cursor", ErrArgsInvalid)
	}
	if string(raw[4:]) != string(tag) {
		return 0, fmt.Errorf("%w: cursor does not belong to %s in this catalog", ErrArgsInvalid, quotePath(node))
	}
	off := int(binary.BigEndian.Uint32(raw[:4]))
	if off == 0 {
		return 0, fmt.Errorf("%w: malformed cursor", ErrArgsInvalid)
	}
	return off, nil
}
