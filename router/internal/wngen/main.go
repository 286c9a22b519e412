// Command wngen derives the router's compact WordNet table
// (router/wordnet.txt) from the WordNet 3.0 database files, as Debian's
// wordnet-base package installs them (/usr/share/wordnet):
//
//	go run ./router/internal/wngen -dict /usr/share/wordnet -out router/wordnet.txt
//
// For every noun and verb that is one lower-case word of at least three
// letters and was seen in WordNet's sense-tagged corpus (tagsense_cnt > 0),
// it takes the word's most frequent senses (at most -senses of them, and
// only tagged ones) and writes one line:
//
//	word<TAB>synonyms<TAB>derived<TAB>hypernyms
//
// each a comma-separated list of one-word lemmas, in WordNet's order, the
// word itself left out: the other lemmas of the sense's synset, the
// derivationally related forms ("+" pointers), and the lemmas of its direct
// hypernyms ("@"). Lines are sorted by word; words with nothing to list are
// left out. The WordNet license (router/wordnet.LICENSE) applies to the
// table.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

type synset struct {
	words []string
	ptrs  []pointer
}

type pointer struct {
	symbol string
	offset string
	pos    string
	target int // 0: the whole synset; otherwise the 1-based word index
	source int
}

func main() {
	dict := flag.String("dict", "/usr/share/wordnet", "WordNet database directory")
	out := flag.String("out", "router/wordnet.txt", "output file")
	senses := flag.Int("senses", 2, "most frequent tagged senses per word")
	flag.Parse()
	if err := run(*dict, *out, *senses); err != nil {
		fmt.Fprintln(os.Stderr, "wngen:", err)
		os.Exit(1)
	}
}

func run(dict, out string, senses int) error {
	data := map[string]map[string]*synset{}
	for _, pos := range []string{"noun", "verb"} {
		d, err := readData(filepath.Join(dict, "data."+pos))
		if err != nil {
			return err
		}
		data[pos[:1]] = d
	}
	type entry struct{ syn, der, hyp []string }
	entries := map[string]*entry{}
	for _, pos := range []string{"noun", "verb"} {
		f, err := os.Open(filepath.Join(dict, "index."+pos))
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") {
				continue // license header
			}
			fs := strings.Fields(line)
			if len(fs) < 6 {
				continue
			}
			word := fs[0]
			if !plainWord(word) {
				continue
			}
			pcnt, err := strconv.Atoi(fs[3])
			if err != nil || len(fs) < 4+pcnt+2 {
				continue
			}
			tagged, err := strconv.Atoi(fs[4+pcnt+1])
			if err != nil || tagged == 0 {
				continue
			}
			offsets := fs[4+pcnt+2:]
			e := entries[word]
			if e == nil {
				e = &entry{}
				entries[word] = e
			}
			for _, off := range offsets[:min(senses, tagged, len(offsets))] {
				s := data[pos[:1]][off]
				if s == nil {
					continue
				}
				me := slices.Index(s.words, word) + 1
				for _, w := range s.words {
					e.syn = appendWord(e.syn, w, word)
				}
				for _, p := range s.ptrs {
					t := data[p.pos][p.offset]
					if t == nil {
						continue
					}
					switch p.symbol {
					case "+":
						if p.source != 0 && p.source != me {
							continue
						}
						if p.target > 0 && p.target <= len(t.words) {
							e.der = appendWord(e.der, t.words[p.target-1], word)
						}
					case "@":
						for _, w := range t.words {
							e.hyp = appendWord(e.hyp, w, word)
						}
					}
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	words := make([]string, 0, len(entries))
	for w, e := range entries {
		if len(e.syn)+len(e.der)+len(e.hyp) > 0 {
			words = append(words, w)
		}
	}
	slices.Sort(words)
	var b strings.Builder
	for _, w := range words {
		e := entries[w]
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\n", w, strings.Join(e.syn, ","), strings.Join(e.der, ","), strings.Join(e.hyp, ","))
	}
	return os.WriteFile(out, []byte(b.String()), 0o644)
}

// plainWord: one lower-case ASCII word of at least three letters.
func plainWord(w string) bool {
	if len(w) < 3 {
		return false
	}
	for i := 0; i < len(w); i++ {
		if w[i] < 'a' || w[i] > 'z' {
			return false
		}
	}
	return true
}

func appendWord(list []string, w, self string) []string {
	w = strings.ToLower(w)
	if i := strings.IndexByte(w, '('); i >= 0 { // adjective markers
		w = w[:i]
	}
	if w == self || !plainWord(w) || slices.Contains(list, w) {
		return list
	}
	return append(list, w)
}

// readData reads a data.* file into synsets by offset.
func readData(path string) (map[string]*synset, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]*synset{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, " ") {
			continue
		}
		if i := strings.Index(line, " | "); i >= 0 {
			line = line[:i]
		}
		fs := strings.Fields(line)
		if len(fs) < 4 {
			continue
		}
		n, err := strconv.ParseInt(fs[3], 16, 32)
		if err != nil || len(fs) < 4+2*int(n)+1 {
			continue
		}
		s := &synset{}
		for i := range int(n) {
			s.words = append(s.words, strings.ToLower(fs[4+2*i]))
		}
		at := 4 + 2*int(n)
		pc, err := strconv.Atoi(fs[at])
		if err != nil {
			continue
		}
		at++
		for i := 0; i < pc && at+3 < len(fs); i++ {
			st := fs[at+3]
			src, _ := strconv.ParseInt(st[:2], 16, 32)
			tgt, _ := strconv.ParseInt(st[2:], 16, 32)
			s.ptrs = append(s.ptrs, pointer{symbol: fs[at], offset: fs[at+1], pos: fs[at+2], source: int(src), target: int(tgt)})
			at += 4
		}
		out[fs[0]] = s
	}
	return out, sc.Err()
}
