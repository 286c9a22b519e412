package router

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/choicecard"
	"github.com/quiver-mcp/quiver/toolid"
)

const realToolsFile = "../../shared/data/tools.jsonl"

var (
	graphBuilderOnce sync.Once
	graphBuilderVal  *choicecard.Builder
	graphBuilderErr  error

	realItemsOnce sync.Once
	realItemsVal  []*catalog.Item
	realItemsErr  error
)

// testCardBuilder returns one shared cl100k_base card builder.
func testCardBuilder(t testing.TB) *choicecard.Builder {
	t.Helper()
	graphBuilderOnce.Do(func() { graphBuilderVal, graphBuilderErr = choicecard.NewDefaultBuilder() })
	if graphBuilderErr != nil {
		t.Fatal(graphBuilderErr)
	}
	return graphBuilderVal
}

// realGraphItems ingests the real catalog once, or skips when it is absent.
func realGraphItems(t testing.TB) []*catalog.Item {
	t.Helper()
	if _, err := os.Stat(realToolsFile); err != nil {
		t.Skipf("real catalog not available: %v", err)
	}
	b := testCardBuilder(t)
	realItemsOnce.Do(func() {
		src, err := catalog.LoadFile(realToolsFile)
		if err != nil {
			realItemsErr = err
			return
		}
		snap, _, err := catalog.Ingest(src, catalog.Options{Cards: b})
		if err != nil {
			realItemsErr = err
			return
		}
		realItemsVal = snap.Items(toolid.KindTool)
	})
	if realItemsErr != nil {
		t.Fatal(realItemsErr)
	}
	return realItemsVal
}

// walkGraph browses g from "/" through every page of every node with page
// size topK and checks the browse contract on the way. It returns how many
// times each item id was reached.
func walkGraph(t *testing.T, g *Graph, b *choicecard.Builder, topK, maxChildren int) map[string]int {
	t.Helper()
	reached := map[string]int{}
	queue := []string{"/"}
	visited := map[string]bool{"/": true}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		cursor := ""
		got := 0
		for pages := 0; ; pages++ {
			page, err := g.Browse(path, topK, cursor)
			if err != nil {
				t.Fatalf("Browse(%q, %d, %q): %v", path, topK, cursor, err)
			}
			if len(page.Cards) > topK {
				t.Fatalf("Browse(%q): %d cards on a page, top_k %d", path, len(page.Cards), topK)
			}
			if path != "/" && page.Total > maxChildren {
				t.Fatalf("%s has %d children, cap %d", path, page.Total, maxChildren)
			}
			for _, c := range page.Cards {
				if n := b.Tokens(c); n > choicecard.HardCapTokens {
					t.Fatalf("card %s costs %d tokens", c.ID, n)
				}
				switch c.Kind {
				case choicecard.KindInternal:
					if c.HasSchema || c.Namespace == "" || c.Name == "" || c.Description == "" {
						t.Fatalf("internal card %+v is incomplete", c)
					}
					if visited[c.ID] {
						t.Fatalf("internal node %s listed twice", c.ID)
					}
					if _, err := ParsePath(c.ID); err != nil {
						t.Fatalf("internal card id %q is not a path: %v", c.ID, err)
					}
					if !strings.HasPrefix(c.ID, strings.TrimSuffix(path, "/")+"/") {
						t.Fatalf("child %s is not below %s", c.ID, path)
					}
					visited[c.ID] = true
					queue = append(queue, c.ID)
				default:
					reached[c.ID]++
				}
			}
			got += len(page.Cards)
			if page.NextCursor == "" {
				break
			}
			cursor = page.NextCursor
		}
		if n := g.byPath[path]; got != len(n.children) {
			t.Fatalf("%s: paged through %d of %d children", path, got, len(n.children))
		}
	}
	return reached
}

func TestGraphRealCatalog(t *testing.T) {
	items := realGraphItems(t)
	b := testCardBuilder(t)
	for _, max := range []int{DefaultMaxChildren, 5} {
		t.Run("max="+strconv.Itoa(max), func(t *testing.T) {
			g, err := NewGraph(items, GraphOptions{Cards: b, MaxChildren: max})
			if err != nil {
				t.Fatal(err)
			}
			st := g.Stats()
			t.Logf("%d items: %+v", len(items), st)
			if st.MaxFanOut > max {
				t.Errorf("a node has %d children, cap %d", st.MaxFanOut, max)
			}
			if st.Leaves != len(items) || g.Len() != len(items) {
				t.Errorf("graph holds %d leaves (Len %d), catalog %d items", st.Leaves, g.Len(), len(items))
			}
			reached := walkGraph(t, g, b, 7, max)
			for _, it := range items {
				if reached[it.ID] != 1 {
					t.Errorf("%s reached %d times", it.ID, reached[it.ID])
				}
			}
			if len(reached) != len(items) {
				t.Errorf("reached %d distinct ids, catalog has %d", len(reached), len(items))
			}
			// Every item's leaf path answers with its own single card.
			for _, it := range items {
				path, ok := g.PathOf(it.ID)
				if !ok {
					t.Fatalf("no path for %s", it.ID)
				}
				page, err := g.Browse(path, 0, "")
				if err != nil || len(page.Cards) != 1 || page.Cards[0].ID != it.ID || page.Total != 1 {
					t.Fatalf("Browse(%q) = %+v, %v; want the card of %s", path, page, err, it.ID)
				}
			}
			if _, ok := g.PathOf("nope:nope"); ok {
				t.Error("PathOf an unknown id")
			}
			// "/" costs top_k cards, not one per namespace.
			page, err := g.Browse("/", 0, "")
			if err != nil || len(page.Cards) != DefaultTopK || page.Total != st.Namespaces || page.NextCursor == "" {
				t.Fatalf("Browse(/) = %d cards of %d, cursor %q, %v", len(page.Cards), page.Total, page.NextCursor, err)
			}
			if max == DefaultMaxChildren && testing.Verbose() {
				for _, ns := range []string{"github-mcp-server", "azure-mcp"} {
					var sb strings.Builder
					outline(g, "/"+ns, 0, &sb)
					t.Logf("/%s\n%s", ns, sb.String())
				}
			}
		})
	}
}

// outline writes the clusters below path, one per line, indented, with
// the number of tools each holds and of tools loose beside sub-clusters.
func outline(g *Graph, path string, depth int, sb *strings.Builder) {
	n := g.byPath[path]
	loose, groups := 0, 0
	for _, c := range n.children {
		if c.leaf() {
			loose++
			continue
		}
		groups++
		fmt.Fprintf(sb, "%s%s (%d)\n", strings.Repeat("  ", depth), lastSegment(c.path), c.tools)
		outline(g, c.path, depth+1, sb)
	}
	if loose > 0 && groups > 0 {
		fmt.Fprintf(sb, "%s+ %d tools outside groups\n", strings.Repeat("  ", depth), loose)
	}
}

// dumpGraph renders every node of g: path, then its card as JSON.
func dumpGraph(t *testing.T, g *Graph) string {
	t.Helper()
	paths := make([]string, 0, len(g.byPath))
	for p := range g.byPath {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	var sb strings.Builder
	for _, p := range paths {
		n := g.byPath[p]
		j, err := json.Marshal(n.card)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "%s %s", p, j)
		for _, c := range n.children {
			sb.WriteString(" " + c.childID())
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func TestGraphDeterministic(t *testing.T) {
	items := realGraphItems(t)
	b := testCardBuilder(t)
	g1, err := NewGraph(items, GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	shuffled := slices.Clone(items)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	g2, err := NewGraph(shuffled, GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	if g1.Fingerprint() != g2.Fingerprint() {
		t.Errorf("fingerprints differ: %s vs %s", g1.Fingerprint(), g2.Fingerprint())
	}
	if d1, d2 := dumpGraph(t, g1), dumpGraph(t, g2); d1 != d2 {
		t.Errorf("graphs differ (%d vs %d bytes)", len(d1), len(d2))
	}
	// A different catalog has a different fingerprint.
	g3, err := NewGraph(items[1:], GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	if g3.Fingerprint() == g1.Fingerprint() {
		t.Error("a smaller catalog has the same fingerprint")
	}
}

// smallItems ingests tool definitions into catalog items.
func smallItems(t testing.TB, defs ...catalog.ToolDef) []*catalog.Item {
	t.Helper()
	snap, rep, err := catalog.Ingest(catalog.Source{Tools: defs}, catalog.Options{Cards: testCardBuilder(t)})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Dropped > 0 {
		t.Fatalf("ingest dropped %d tools", rep.Dropped)
	}
	return snap.Items(toolid.KindTool)
}

func tool(server, name, desc string) catalog.ToolDef {
	return catalog.ToolDef{Server: server, Name: name, Description: desc, InputSchema: []byte(`{"type":"object"}`)}
}

func githubLike(t testing.TB) []*catalog.Item {
	var defs []catalog.ToolDef
	for _, obj := range []string{"issue", "pull_request", "repository", "release", "gist"} {
		for _, verb := range []string{"create", "get", "list", "update", "delete"} {
			defs = append(defs, tool("github", verb+"_"+obj, verb+" a "+strings.ReplaceAll(obj, "_", " ")))
		}
	}
	defs = append(defs, tool("github", "get_me", "Who am I"), tool("slack", "send_message", "Send a message."))
	return smallItems(t, defs...)
}

func TestGraphBrowse(t *testing.T) {
	b := testCardBuilder(t)
	items := githubLike(t)
	g, err := NewGraph(items, GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(p Page) []string {
		var out []string
		for _, c := range p.Cards {
			out = append(out, c.ID)
		}
		return out
	}
	root, err := g.Browse("/", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/github", "/slack"}; !slices.Equal(ids(root), want) || root.Total != 2 || root.NextCursor != "" {
		t.Fatalf("Browse(/) = %v (total %d), want %v", ids(root), root.Total, want)
	}
	gh, err := g.Browse("/github", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	// 26 tools: clustered by object; get_me stays loose; clusters first.
	wantGH := []string{"/github/gist", "/github/issue", "/github/pull-request", "/github/release", "/github/repository"}
	if got := ids(gh); !slices.Equal(got[:5], wantGH) || gh.Total != 6 || got[5] != items[slices.IndexFunc(items, func(it *catalog.Item) bool { return it.UpstreamName == "get_me" })].ID {
		t.Fatalf("Browse(/github) = %v", got)
	}
	c := gh.Cards[1]
	if c.Kind != choicecard.KindInternal || c.Name != "issue" || c.Namespace != "github" || c.HasSchema ||
		c.Description != "5 tools: create_issue, delete_issue, get_issue, list_issue, update_issue" {
		t.Errorf("issue card = %+v", c)
	}
	if gh.Cards[5].Kind != choicecard.KindTool {
		t.Errorf("get_me card kind %q", gh.Cards[5].Kind)
	}
	nsCard := root.Cards[0]
	if !strings.HasPrefix(nsCard.Description, "26 tools; groups: gist (5), issue (5), pull-request (5)") {
		t.Errorf("namespace card description %q", nsCard.Description)
	}

	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/*", []string{"/github", "/slack"}},
		{"/github/*", ids(gh)},
		{"/github/issue/create_issue", []string{items[slices.IndexFunc(items, func(it *catalog.Item) bool { return it.UpstreamName == "create_issue" })].ID}},
		{"/github/issue/create_issue/*", []string{items[slices.IndexFunc(items, func(it *catalog.Item) bool { return it.UpstreamName == "create_issue" })].ID}},
		{"/slack/send_message", []string{items[len(items)-1].ID}},
	} {
		p, err := g.Browse(tc.path, 0, "")
		if err != nil {
			t.Fatalf("Browse(%q): %v", tc.path, err)
		}
		if !slices.Equal(ids(p), tc.want) {
			t.Errorf("Browse(%q) = %v, want %v", tc.path, ids(p), tc.want)
		}
	}

	// Paging: 6 children by 4 -> 4 + 2.
	p1, err := g.Browse("/github", 4, "")
	if err != nil || len(p1.Cards) != 4 || p1.NextCursor == "" || p1.Total != 6 {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, err := g.Browse("/github", 4, p1.NextCursor)
	if err != nil || len(p2.Cards) != 2 || p2.NextCursor != "" {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	if got := append(ids(p1), ids(p2)...); !slices.Equal(got, ids(gh)) {
		t.Errorf("pages = %v, want %v", got, ids(gh))
	}

	other, err := NewGraph(items[:len(items)-1], GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := other.Browse("/github", 4, "")
	if err != nil {
		t.Fatal(err)
	}
	rootCursor, _ := g.Browse("/", 1, "")

	for _, tc := range []struct {
		name, path string
		topK       int
		cursor     string
		want       error
	}{
		{"empty path", "", 0, "", ErrPathInvalid},
		{"trailing slash", "/github/", 0, "", ErrPathInvalid},
		{"upper case", "/GitHub", 0, "", ErrPathInvalid},
		{"absent namespace", "/gitlab", 0, "", ErrPathNotFound},
		{"absent cluster", "/github/nope", 0, "", ErrPathNotFound},
		{"below a leaf", "/github/issue/create_issue/x", 0, "", ErrPathNotFound},
		{"negative top_k", "/", -1, "", ErrArgsInvalid},
		{"top_k too large", "/", MaxTopK + 1, "", ErrArgsInvalid},
		{"garbage cursor", "/github", 4, "!!!", ErrArgsInvalid},
		{"long cursor", "/github", 4, strings.Repeat("A", 100), ErrArgsInvalid},
		{"cursor of another path", "/github", 1, rootCursor.NextCursor, ErrArgsInvalid},
		{"cursor of another catalog", "/github", 4, foreign.NextCursor, ErrArgsInvalid},
		{"cursor on a leaf", "/github/issue/create_issue", 4, p1.NextCursor, ErrArgsInvalid},
		{"cursor with offset 0", "/github", 4, zeroOffset(p1.NextCursor), ErrArgsInvalid},
		{"cursor past the end", "/github", 4, encodeCursor(6, g.cursorTag("/github", nil, false)), ErrArgsInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := g.Browse(tc.path, tc.topK, tc.cursor)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Browse(%q, %d, %q) = %v, want %v", tc.path, tc.topK, tc.cursor, err, tc.want)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("message is not one line: %q", err)
			}
		})
	}
	// The wildcard form pages with the same cursor.
	if p, err := g.Browse("/github/*", 4, p1.NextCursor); err != nil || len(p.Cards) != 2 {
		t.Errorf("Browse(/github/*, cursor) = %+v, %v", p, err)
	}
}

// zeroOffset rewrites the offset of a cursor to 0.
func zeroOffset(c string) string {
	raw, _ := base64.RawURLEncoding.DecodeString(c)
	copy(raw[:4], []byte{0, 0, 0, 0})
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestGraphFallbackAndCaps(t *testing.T) {
	// 60 tools with nothing in common: only alphabetical chunks can split
	// them.
	var defs []catalog.ToolDef
	for i := range 60 {
		defs = append(defs, tool("misc", fmt.Sprintf("t%03dx%c", i, 'a'+i%26), ""))
	}
	items := smallItems(t, defs...)
	b := testCardBuilder(t)
	for _, max := range []int{2, 3, 7, 20} {
		g, err := NewGraph(items, GraphOptions{Cards: b, MaxChildren: max})
		if err != nil {
			t.Fatal(err)
		}
		st := g.Stats()
		if st.Fallbacks == 0 || st.MaxFanOut > max {
			t.Errorf("max %d: %+v", max, st)
		}
		reached := walkGraph(t, g, b, MaxTopK, max)
		if len(reached) != len(items) {
			t.Errorf("max %d: reached %d of %d", max, len(reached), len(items))
		}
	}
}

func TestNewGraphErrors(t *testing.T) {
	b := testCardBuilder(t)
	items := githubLike(t)
	res := smallItemsWithResource(t)
	for _, tc := range []struct {
		name  string
		items []*catalog.Item
		opts  GraphOptions
	}{
		{"no builder", items, GraphOptions{}},
		{"cap 1", items, GraphOptions{Cards: b, MaxChildren: 1}},
		{"negative cap", items, GraphOptions{Cards: b, MaxChildren: -3}},
		{"nil item", append(slices.Clone(items), nil), GraphOptions{Cards: b}},
		{"duplicate", append(slices.Clone(items), items[0]), GraphOptions{Cards: b}},
		{"mixed kinds", append(slices.Clone(items), res...), GraphOptions{Cards: b}},
	} {
		if _, err := NewGraph(tc.items, tc.opts); err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	g, err := NewGraph(nil, GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := g.Browse("/", 0, ""); err != nil || len(p.Cards) != 0 || p.Total != 0 {
		t.Errorf("empty graph: %+v, %v", p, err)
	}
}

func smallItemsWithResource(t testing.TB) []*catalog.Item {
	snap, _, err := catalog.Ingest(catalog.Source{Resources: []catalog.ResourceDef{{Server: "docs", URI: "file:///a.txt", Name: "a"}}},
		catalog.Options{Cards: testCardBuilder(t)})
	if err != nil {
		t.Fatal(err)
	}
	return snap.Items(toolid.KindResource)
}

func TestGraphSegments(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"create_issue", "create_issue"},
		{"List_DAGs", "list_dags"},
		{"_9lives", "9lives"},
		{"foundry_agents_get-sdk-sample", "foundry_agents_get-sdk-sample"},
		{"a.b.c", "a_b_c"},
		{"__", "tool"},
		{"数据", "tool"},
		{"x数据y", "x__y"},
		{strings.Repeat("ab", 50), strings.Repeat("ab", 32)},
	} {
		if got := fitSegment(tc.in, "tool"); got != tc.want || !ValidSegment(got) {
			t.Errorf("fitSegment(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("z", 64)
	got := uniqueSegments([]string{"a", "a", "b", "a", "a-2", long, long})
	want := []string{"a", "a-2", "b", "a-3", "a-2-2", long, strings.Repeat("z", 62) + "-2"}
	if !slices.Equal(got, want) {
		t.Errorf("uniqueSegments = %q, want %q", got, want)
	}
	for _, s := range got {
		if !ValidSegment(s) {
			t.Errorf("%q is not a valid segment", s)
		}
	}
}

func TestGraphWords(t *testing.T) {
	for _, tc := range []struct {
		in    string
		camel bool
		want  []string
	}{
		{"get_stock_price", true, []string{"get", "stock", "price"}},
		{"getPythPriceFeedID", true, []string{"get", "pyth", "price", "feed", "id"}},
		{"HTTPServer", true, []string{"http", "server"}},
		{"listDAGs", true, []string{"list", "dags"}},
		{"GitHub Issues", false, []string{"github", "issues"}},
		{"搜索 web", false, []string{"web"}},
	} {
		if got := graphWords(tc.in, tc.camel); !slices.Equal(got, tc.want) {
			t.Errorf("graphWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for in, want := range map[string]string{"issues": "issue", "repositories": "repository", "status": "status",
		"matches": "match", "access": "access", "dags": "dag", "analysis": "analysis", "gas": "gas"} {
		if got := graphStem(in); got != want {
			t.Errorf("graphStem(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzBrowse(f *testing.F) {
	g, err := NewGraph(githubLike(f), GraphOptions{Cards: testCardBuilder(f), MaxChildren: 3})
	if err != nil {
		f.Fatal(err)
	}
	p, err := g.Browse("/github", 2, "")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []struct {
		path, cursor string
		topK         int
	}{
		{"/", "", 0}, {"/github", p.NextCursor, 2}, {"/github/*", p.NextCursor, 50}, {"/github/issue", "", 1},
		{"/github", "AAAAAQ", 3}, {"/nope", "", 0}, {"/github/", "x", -1},
	} {
		f.Add(seed.path, seed.cursor, seed.topK)
	}
	f.Fuzz(func(t *testing.T, path, cursor string, topK int) {
		page, err := g.Browse(path, topK, cursor)
		if err != nil {
			if !errors.Is(err, ErrArgsInvalid) && !errors.Is(err, ErrPathInvalid) && !errors.Is(err, ErrPathNotFound) {
				t.Fatalf("Browse(%q, %d, %q): unexpected error %v", path, topK, cursor, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("message is not one line: %q", err)
			}
			return
		}
		k := topK
		if k == 0 {
			k = DefaultTopK
		}
		if len(page.Cards) > k || len(page.Cards) > page.Total {
			t.Fatalf("Browse(%q, %d, %q): %d cards of %d", path, topK, cursor, len(page.Cards), page.Total)
		}
		// A caller who sees the issue tools only is shown nothing else.
		see := func(it *catalog.Item) bool { return strings.Contains(it.UpstreamName, "issue") }
		fp, err := g.BrowseFiltered(path, topK, cursor, see)
		if err != nil {
			if !errors.Is(err, ErrArgsInvalid) && !errors.Is(err, ErrPathInvalid) && !errors.Is(err, ErrPathNotFound) {
				t.Fatalf("BrowseFiltered(%q, %d, %q): unexpected error %v", path, topK, cursor, err)
			}
			return
		}
		if len(fp.Cards) > k || len(fp.Cards) > fp.Total {
			t.Fatalf("BrowseFiltered(%q, %d, %q): %d cards of %d", path, topK, cursor, len(fp.Cards), fp.Total)
		}
		for _, c := range fp.Cards {
			if c.Kind != choicecard.KindInternal && !strings.Contains(c.Name, "issue") {
				t.Fatalf("BrowseFiltered(%q): an invisible card %+v", path, c)
			}
		}
	})
}

// TestGraphNounsByKind: an internal card counts prompts as prompts and
// resources as resources.
func TestGraphNounsByKind(t *testing.T) {
	b := testCardBuilder(t)
	src := catalog.Source{}
	for _, n := range []string{"a", "b"} {
		src.Prompts = append(src.Prompts, catalog.PromptDef{Server: "docs", Name: "greet_" + n, Description: "Greet " + n})
		src.Resources = append(src.Resources, catalog.ResourceDef{Server: "docs", URI: "file:///" + n + ".txt", Name: n})
	}
	snap, _, err := catalog.Ingest(src, catalog.Options{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[toolid.Kind]string{toolid.KindPrompt: "2 prompts", toolid.KindResource: "2 resources"} {
		g, err := NewGraph(snap.Items(kind), GraphOptions{Cards: b})
		if err != nil {
			t.Fatal(err)
		}
		p, err := g.Browse("/", 0, "")
		if err != nil || len(p.Cards) != 1 {
			t.Fatalf("%s: %+v, %v", kind, p, err)
		}
		if d := p.Cards[0].Description; !strings.HasPrefix(d, want+":") || strings.Contains(d, "tool") {
			t.Fatalf("%s card: %q, want %q", kind, d, want)
		}
	}
}

// TestGraphBrowseFiltered: a filtered browse answers as a graph of the
// visible items alone would, over this graph's paths: invisible nodes
// answer like missing paths, counts, descriptions and paging cover what is
// visible only, and a cursor continues only the listing it came from.
func TestGraphBrowseFiltered(t *testing.T) {
	b := testCardBuilder(t)
	items := githubLike(t)
	g, err := NewGraph(items, GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	// The caller sees the issue tools and get_me, nothing of slack.
	see := func(it *catalog.Item) bool {
		return it.Namespace == "github" && (strings.Contains(it.UpstreamName, "issue") || it.UpstreamName == "get_me")
	}
	root, err := g.BrowseFiltered("/", 1, "", see)
	if err != nil || root.Total != 1 || len(root.Cards) != 1 || root.Cards[0].ID != "/github" || root.NextCursor != "" {
		t.Fatalf("/ = %+v, %v", root, err)
	}
	if d := root.Cards[0].Description; !strings.HasPrefix(d, "6 tools; groups: issue (5); tools: get_me") {
		t.Fatalf("/github card %q", d)
	}
	gh, err := g.BrowseFiltered("/github", 1, "", see)
	if err != nil || gh.Total != 2 || gh.Cards[0].ID != "/github/issue" || gh.NextCursor == "" {
		t.Fatalf("/github page 1 = %+v, %v", gh, err)
	}
	next, err := g.BrowseFiltered("/github", 1, gh.NextCursor, see)
	if err != nil || next.Total != 2 || next.Cards[0].Name != "get_me" || next.NextCursor != "" {
		t.Fatalf("/github page 2 = %+v, %v", next, err)
	}
	// A cursor of the unfiltered listing does not continue the filtered one.
	full, _ := g.Browse("/github", 1, "")
	if _, err := g.BrowseFiltered("/github", 1, full.NextCursor, see); !errors.Is(err, ErrArgsInvalid) {
		t.Fatalf("an unfiltered cursor: %v", err)
	}
	missing := func(path string) string {
		_, err := g.BrowseFiltered(path, 0, "", see)
		if !errors.Is(err, ErrPathNotFound) {
			t.Fatalf("%s: %v, want not found", path, err)
		}
		return strings.ReplaceAll(err.Error(), path, "P")
	}
	gist, _ := g.PathOf(items[slices.IndexFunc(items, func(it *catalog.Item) bool { return it.UpstreamName == "create_gist" })].ID)
	want := missing("/github/nosuch")
	for _, p := range []string{"/slack", "/github/gist", gist} {
		if got := missing(p); got != want {
			t.Fatalf("%s answers %q, a missing path %q", p, got, want)
		}
	}
	// Seeing nothing: an empty root, like an empty catalog.
	none, err := g.BrowseFiltered("/", 0, "", func(*catalog.Item) bool { return false })
	if err != nil || none.Total != 0 || len(none.Cards) != 0 {
		t.Fatalf("nothing visible: %+v, %v", none, err)
	}
	// Seeing everything: the unfiltered answer.
	all, err := g.BrowseFiltered("/github", 0, "", func(*catalog.Item) bool { return true })
	plain, _ := g.Browse("/github", 0, "")
	if err != nil || fmt.Sprint(all.Cards) != fmt.Sprint(plain.Cards) || all.Total != plain.Total {
		t.Fatalf("everything visible differs: %+v vs %+v", all, plain)
	}
}

// TestGraphBrowseFilteredSpelledClusters: an alphabetical chunk is named
// after its first and last members; one the caller sees only part of is
// replaced by its visible items, so its name shows no invisible member.
func TestGraphBrowseFilteredSpelledClusters(t *testing.T) {
	b := testCardBuilder(t)
	var defs []catalog.ToolDef
	for i := range 30 {
		defs = append(defs, tool("zeta", fmt.Sprintf("zz_%02d", i), "A tool."))
	}
	items := smallItems(t, defs...)
	g, err := NewGraph(items, GraphOptions{Cards: b})
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := g.Browse("/zeta", 0, "")
	if !strings.Contains(plain.Cards[0].ID, "--") {
		t.Skipf("no alphabetical chunk: %v", plain.Cards)
	}
	see := func(it *catalog.Item) bool { return it.UpstreamName < "zz_05" }
	page, err := g.BrowseFiltered("/zeta", 50, "", see)
	if err != nil || page.Total != 5 {
		t.Fatalf("/zeta = %+v, %v", page, err)
	}
	for _, c := range page.Cards {
		if c.Kind == choicecard.KindInternal {
			t.Fatalf("a partly visible chunk is listed: %+v", c)
		}
	}
	root, _ := g.BrowseFiltered("/", 0, "", see)
	if d := root.Cards[0].Description; strings.Contains(d, "--") || strings.Contains(d, "zz_1") {
		t.Fatalf("/zeta card names a chunk: %q", d)
	}
	if _, err := g.BrowseFiltered(plain.Cards[0].ID, 0, "", see); !errors.Is(err, ErrPathNotFound) {
		t.Fatalf("browsing the chunk's path: %v", err)
	}
}
