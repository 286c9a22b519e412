package runtime

import (
	"context"
	"strings"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/idmatch"
	"github.com/quiver-mcp/quiver/toolid"
)

// maxSuggestions is how many "did you mean" ids a HYDRATE_FAILED carries.
const maxSuggestions = 3

// maxCandidates bounds the ids an ambiguous short name's error lists.
const maxCandidates = 10

// maxSuggestChecks bounds the visibility checks one suggestion list costs
// (each one asks the policy).
const maxSuggestChecks = 256

// resolveTool finds the tool a caller names: by tool_id, by the name proxy
// mode lists it under, or by a short name ("server:name", "server.name",
// "server:name@version") that stands for exactly one tool the caller may
// see. Short names resolve among visible tools only, so neither an answer
// nor an ambiguity tells of a tool the caller may not see. A name that
// matches nothing is HYDRATE_FAILED with up to three ids the caller may
// have meant; an ambiguous short name is HYDRATE_FAILED listing its
// candidates. An exact id is returned whoever asks: the caller's own
// checks (visibility, authorization) judge it.
func (r *Runtime) resolveTool(ctx context.Context, st *state, ref string) (*catalog.Item, *Error) {
	if it, ok := lookupTool(st, ref); ok && it.Kind == toolid.KindTool {
		// A tool the caller may not see answers exactly as a missing
		// one (its receipt keeps the reason).
		if r.concealed(ctx, st, it) {
			return nil, r.toolNotFound(ctx, st, ref)
		}
		return it, nil
	}
	if !idmatch.IsShort(ref) {
		return nil, r.toolNotFound(ctx, st, ref)
	}
	ctx = r.auth.pin(ctx)
	var matches []*catalog.Item
	for _, it := range st.snap.Items(toolid.KindTool) {
		c := it.Canonical
		for _, k := range idmatch.Keys(c.Namespace, c.Name, c.Version) {
			if k == ref {
				if r.visible(ctx, st, it) {
					matches = append(matches, it)
				}
				break
			}
		}
	}
	switch len(matches) {
	case 0:
		return nil, r.toolNotFound(ctx, st, ref)
	case 1:
		return matches[0], nil
	}
	ids := make([]string, 0, min(len(matches), maxCandidates))
	for _, it := range matches[:min(len(matches), maxCandidates)] {
		ids = append(ids, it.ID)
	}
	return nil, newError(CodeHydrateFailed, "%q names %d tools; give one of their tool_ids: %s", ref, len(matches), strings.Join(ids, ", ")).
		withPath("tool_id").withDetail("candidates", ids)
}

// toolNotFound is the HYDRATE_FAILED of a name that stands for no tool the
// caller may see, with the visible ids closest to it.
func (r *Runtime) toolNotFound(ctx context.Context, st *state, ref string) *Error {
	e := newError(CodeHydrateFailed, "no tool with id %q in the current catalog", ref).withPath("tool_id")
	if s := r.suggest(ctx, st, ref); len(s) > 0 {
		e = newError(CodeHydrateFailed, "no tool with id %q in the current catalog; did you mean %s?", ref, strings.Join(s, " or ")).
			withPath("tool_id").withDetail("did_you_mean", s)
	}
	return e
}

// suggest returns up to maxSuggestions ids of tools the caller may see
// that are closest to ref, best first.
func (r *Runtime) suggest(ctx context.Context, st *state, ref string) []string {
	items := st.snap.Items(toolid.KindTool)
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	ctx = r.auth.pin(ctx)
	var out []string
	for i, id := range idmatch.Ranked(ref, ids) {
		if len(out) == maxSuggestions || i == maxSuggestChecks {
			break
		}
		if it, ok := st.snap.Lookup(id); ok && r.visible(ctx, st, it) {
			out = append(out, id)
		}
	}
	return out
}
