package idmatch

import (
	"slices"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, c := range []struct {
		ns, name, version string
		want              []string
	}{
		{"memory", "create_entities", "", []string{"memory:create_entities", "memory.create_entities"}},
		{"gh", "list", "2", []string{"gh:list", "gh.list", "gh:list@2"}},
	} {
		if got := Keys(c.ns, c.name, c.version); !slices.Equal(got, c.want) {
			t.Errorf("Keys(%q, %q, %q) = %v, want %v", c.ns, c.name, c.version, got, c.want)
		}
	}
}

func TestIsShort(t *testing.T) {
	for ref, want := range map[string]bool{
		"memory:create_entities":          true,
		"memory.create_entities":          true,
		"memory:create_entities#34afee88": false,
		"":                                false,
		strings.Repeat("a", MaxRef+1):     false,
	} {
		if got := IsShort(ref); got != want {
			t.Errorf("IsShort(%.20q) = %v, want %v", ref, got, want)
		}
	}
}

var fleet = []string{
	"memory:create_entities#0a1b2c3d",
	"memory:create_relations#1a1b2c3d",
	"memory:delete_entities#2a1b2c3d",
	"memory:read_graph#3a1b2c3d",
	"github:create_issue#34afee88",
	"github:list_repos#da62b2ed",
	"slack:slack_send_message#283a5dcf",
	"math:add#11111111",
	"math:add#22222222~2",
}

func TestRank(t *testing.T) {
	for _, c := range []struct {
		ref  string
		n    int
		want []string
	}{
		// A typo: the closest id first.
		{"memory:create_entitys", 3, []string{"memory:create_entities#0a1b2c3d", "memory:create_relations#1a1b2c3d", "memory:delete_entities#2a1b2c3d"}},
		// A wrong namespace: the words still match.
		{"github:create_entities", 1, []string{"memory:create_entities#0a1b2c3d"}},
		{"slack_send_message", 1, []string{"slack:slack_send_message#283a5dcf"}},
		// A full id with a stale hash.
		{"github:create_issue#00000000", 1, []string{"github:create_issue#34afee88"}},
		// Ties are ordered by id.
		{"math:add", 2, []string{"math:add#11111111", "math:add#22222222~2"}},
		// Nothing in common: no suggestion.
		{"zzzz", 3, nil},
		{"", 3, nil},
		{"memory:read_graph", 0, nil},
		{strings.Repeat("m", MaxRef+1), 3, nil},
	} {
		if got := Rank(c.ref, fleet, c.n); !slices.Equal(got, c.want) {
			t.Errorf("Rank(%.30q, %d) = %v, want %v", c.ref, c.n, got, c.want)
		}
	}
}

// FuzzRank: any name, however odd, is ranked without a panic, and every
// answer is one of the candidates.
func FuzzRank(f *testing.F) {
	f.Add("memory:create_entitys")
	f.Add("#~:.@")
	f.Add("ÿ\x00é")
	f.Fuzz(func(t *testing.T, ref string) {
		for _, id := range Rank(ref, fleet, 3) {
			if !slices.Contains(fleet, id) {
				t.Fatalf("Rank(%q) returned %q, not a candidate", ref, id)
			}
		}
		_ = IsShort(ref)
	})
}
