package capability

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Narrowing is what an attenuation asks for: a subset of its parent.
type Narrowing struct {
	// Holder and Key are the new holder (a principal key) and its key.
	Holder string
	Key    JWK
	// Tools must be among the parent's; none keeps them all.
	Tools []string
	// ExpiresAt must not be after the parent's; zero keeps the parent's.
	ExpiresAt time.Time
	// MaxUses must be 1 to the parent's when it has a limit (the uses are
	// taken from it); zero is unlimited, for an unlimited parent only.
	MaxUses int
	// Args adds constraints: each applies on top of the parent's.
	Args map[string]json.RawMessage
}

// Attenuate turns a narrowing of parent into the grant of a child token:
// fewer tools, an earlier expiry, fewer uses, tighter argument
// constraints, the parent's session binding. Anything wider is
// ErrWidening. The child names its parent and every ancestor, so revoking
// any of them revokes it.
func Attenuate(parent *Claims, n Narrowing, now time.Time) (Grant, error) {
	g := Grant{Holder: n.Holder, Key: n.Key, NotBefore: now.Truncate(time.Second), Session: parent.Session, Parent: parent}
	if g.NotBefore.Before(parent.NotBefore.Time) {
		g.NotBefore = parent.NotBefore.Time
	}
	if len(parent.Chain) >= MaxChain {
		return Grant{}, fmt.Errorf("%w: attenuations nest at most %d deep", ErrWidening, MaxChain)
	}
	g.Tools = slices.Clone(parent.Tools)
	if len(n.Tools) > 0 {
		for _, t := range n.Tools {
			if !parent.Grants(t) {
				return Grant{}, fmt.Errorf("%w: the parent does not grant %q", ErrWidening, t)
			}
		}
		g.Tools = slices.Compact(slices.Sorted(slices.Values(n.Tools)))
	}
	g.ExpiresAt = parent.ExpiresAt.Time
	if !n.ExpiresAt.IsZero() {
		if n.ExpiresAt.After(g.ExpiresAt) {
			return Grant{}, fmt.Errorf("%w: the parent expires at %s", ErrWidening, g.ExpiresAt.UTC().Format(time.RFC3339))
		}
		g.ExpiresAt = n.ExpiresAt
	}
	switch {
	case n.MaxUses < 0:
		return Grant{}, fmt.Errorf("%w: max_uses is negative", ErrMalformed)
	case parent.MaxUses > 0 && n.MaxUses > parent.MaxUses:
		return Grant{}, fmt.Errorf("%w: the parent allows %d uses", ErrWidening, parent.MaxUses)
	case parent.MaxUses > 0 && n.MaxUses == 0:
		return Grant{}, fmt.Errorf("%w: the parent's uses are limited; say how many of them the child takes (max_uses)", ErrWidening)
	default:
		g.MaxUses = n.MaxUses
	}
	for t := range n.Args {
		if !slices.Contains(g.Tools, t) {
			return Grant{}, fmt.Errorf("%w: a constraint names %q, which the child does not grant", ErrMalformed, t)
		}
	}
	for _, t := range g.Tools {
		p, hasP := parent.Args[t]
		c, hasC := n.Args[t]
		switch {
		case hasP && hasC:
			both, err := json.Marshal(map[string]any{"allOf": []json.RawMessage{p, c}})
			if err != nil {
				return Grant{}, err
			}
			setArg(&g, t, both)
		case hasP:
			setArg(&g, t, p)
		case hasC:
			setArg(&g, t, c)
		}
	}
	return g, nil
}

func setArg(g *Grant, tool string, frag json.RawMessage) {
	if g.Args == nil {
		g.Args = map[string]json.RawMessage{}
	}
	g.Args[tool] = frag
}
