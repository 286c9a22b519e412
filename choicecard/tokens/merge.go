package tokens

import (
	"strings"
	"unicode/utf8"
)

// longPiece is the piece length from which mergeCount's scan gives way to
// mergeCountLong. The scan looks at every boundary for each merge, O(n²) in
// the piece's length: harmless for words, but one piece can be a whole
// result (200 KB of one letter is one \p{L}+ piece), and an upstream must
// not be able to spend the firewall's CPU by sending one.
const longPiece = 256

// mergeCountLong is mergeCount in O(n log n): the boundaries form a linked
// list and the candidate merges a heap ordered by (rank, position), so the
// merge taken each time is the one the scan would take (the lowest rank,
// the leftmost of equal ranks). Heap entries are not removed when a merge
// changes a neighbour's rank; a popped entry counts only if its boundary is
// still there with that rank.
func (c *Counter) mergeCountLong(piece string) int {
	n := len(piece)
	next := make([]int32, n+1) // boundary i's successor; n is the end
	prev := make([]int32, n+1)
	rank := make([]int, n+1) // the rank of merging the token at i with the next
	gone := make([]bool, n+1)
	for i := range next {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	pairRank := func(i int32) int {
		j := next[i]
		if int(j) >= n {
			return noRank
		}
		if r, ok := c.ranks[piece[i:next[j]]]; ok {
			return r
		}
		return noRank
	}
	h := make(mergeHeap, 0, n)
	for i := int32(0); int(i) < n; i++ {
		if rank[i] = pairRank(i); rank[i] != noRank {
			h = append(h, mergeCand{rank[i], i})
		}
	}
	h.init()
	tokens := n
	for len(h) > 0 {
		m := h.pop()
		if gone[m.pos] || rank[m.pos] != m.rank {
			continue // stale: a merge beside it changed it
		}
		k := next[m.pos] // the boundary the merge removes
		gone[k] = true
		next[m.pos] = next[k]
		if int(next[k]) <= n {
			prev[next[k]] = m.pos
		}
		tokens--
		if rank[m.pos] = pairRank(m.pos); rank[m.pos] != noRank {
			h.push(mergeCand{rank[m.pos], m.pos})
		}
		if p := prev[m.pos]; p >= 0 {
			if rank[p] = pairRank(p); rank[p] != noRank {
				h.push(mergeCand{rank[p], p})
			}
		}
	}
	return tokens
}

// mergeCand is a merge the heap holds: the pair starting at boundary pos,
// whose merged bytes have rank.
type mergeCand struct {
	rank int
	pos  int32
}

// mergeHeap is a binary min-heap of candidates by rank, then position,
// kept by hand rather than through container/heap, whose interface boxes
// every pushed value.
type mergeHeap []mergeCand

func (h mergeHeap) less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}

func (h mergeHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *mergeHeap) push(m mergeCand) {
	*h = append(*h, m)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *mergeHeap) pop() mergeCand {
	old := *h
	m := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return m
}

func (h mergeHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		small := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			small = r
		}
		if !h.less(small, i) {
			return
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
}

// replaceInvalid returns s with each byte that is not part of valid UTF-8
// replaced by U+FFFD, as the encoder sees it (Go's []rune conversion, which
// regexp2 matches on, decodes each such byte to U+FFFD).
func replaceInvalid(s string) string {
	var b strings.Builder
	b.Grow(len(s) + len(s)/2)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString("\uFFFD")
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
