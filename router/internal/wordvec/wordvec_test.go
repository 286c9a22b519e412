package wordvec

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"testing"
)

// The shape and checksum of the committed table (regenerate with ./gen;
// see the package doc). A changed table must change these on purpose.
const (
	goldenDims   = 100
	goldenWords  = 21494
	goldenSHA256 = "f8364c8ff9eae966af5f5400f25187728cb645ddd78baecc93d49bee75bff9dd"
	goldenBytes  = 2408330
)

func TestEmbeddedGolden(t *testing.T) {
	sum := sha256.Sum256(Embedded())
	if got := hex.EncodeToString(sum[:]); got != goldenSHA256 {
		t.Errorf("sha256 %s, want %s", got, goldenSHA256)
	}
	if len(Embedded()) != goldenBytes {
		t.Errorf("%d bytes, want %d", len(Embedded()), goldenBytes)
	}
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if tab.Dims() != goldenDims || tab.Len() != goldenWords {
		t.Fatalf("%d words of %d dims, want %d of %d", tab.Len(), tab.Dims(), goldenWords, goldenDims)
	}
	// GloVe's frequency order: "the" is its first word; the catalog's
	// own words are kept beyond the 20,000 most frequent.
	for _, tc := range []struct {
		word string
		ok   bool
	}{
		{"the", true}, {"balance", true}, {"repository", true}, {"github", true},
		{"The", false}, {"create_entities", false}, {"", false},
	} {
		if _, ok := tab.Rank(tc.word); ok != tc.ok {
			t.Errorf("Rank(%q) ok %v, want %v", tc.word, ok, tc.ok)
		}
	}
	if r, _ := tab.Rank("the"); r != 0 {
		t.Errorf("rank of the %d, want 0", r)
	}
}

// TestNeighbourhood checks that the quantized vectors keep GloVe's
// geometry: related words are closer than unrelated ones.
func TestNeighbourhood(t *testing.T) {
	tab, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	cos := func(a, b string) float32 {
		va, vb := make([]float32, tab.Dims()), make([]float32, tab.Dims())
		if !tab.AddTo(va, a, 1) || !tab.AddTo(vb, b, 1) {
			t.Fatalf("%s or %s missing", a, b)
		}
		return Dot(va, vb)
	}
	for _, tc := range []struct{ word, near, far string }{
		{"money", "cash", "forest"},
		{"weather", "forecast", "invoice"},
		{"song", "music", "database"},
		{"stock", "market", "river"},
	} {
		if n, f := cos(tc.word, tc.near), cos(tc.word, tc.far); n <= f {
			t.Errorf("cos(%s, %s) %.2f <= cos(%s, %s) %.2f", tc.word, tc.near, n, tc.word, tc.far, f)
		}
	}
}

func TestSIF(t *testing.T) {
	for _, tc := range []struct {
		rank     int
		min, max float64
	}{
		{0, 0, 0.02},     // "the"
		{100, 0.5, 0.7},  // common words
		{10000, 0.99, 1}, // rare words
	} {
		if w := SIF(tc.rank, 1e-3); w < tc.min || w > tc.max {
			t.Errorf("SIF(%d) = %.3f, want in [%.2f, %.2f]", tc.rank, w, tc.min, tc.max)
		}
	}
	if SIF(10, 1e-3) >= SIF(11, 1e-3) {
		t.Error("SIF does not grow with rank")
	}
}

func TestNormalizeDot(t *testing.T) {
	for _, tc := range []struct {
		v    []float32
		norm float32
	}{
		{[]float32{3, 4}, 5},
		{[]float32{0, 0, 0}, 0},
		{[]float32{1, 1, 1, 1, 1}, float32(math.Sqrt(5))},
	} {
		v := append([]float32(nil), tc.v...)
		if n := Normalize(v); math.Abs(float64(n-tc.norm)) > 1e-6 {
			t.Errorf("Normalize(%v) = %v, want %v", tc.v, n, tc.norm)
		}
		if d := Dot(v, v); tc.norm != 0 && math.Abs(float64(d-1)) > 1e-6 {
			t.Errorf("|%v| after Normalize: %v", tc.v, d)
		}
	}
	if d := Dot([]float32{1, 2, 3, 4, 5}, []float32{5, 4, 3, 2, 1}); d != 35 {
		t.Errorf("Dot = %v, want 35", d)
	}
}

// build writes a table of the given words (dims components each).
func build(dims int, words []string, vecs [][]int8) []byte {
	var b bytes.Buffer
	b.WriteString("QWV1")
	binary.Write(&b, binary.LittleEndian, uint16(dims))
	binary.Write(&b, binary.LittleEndian, uint32(len(words)))
	for i, w := range words {
		b.WriteByte(byte(len(w)))
		b.WriteString(w)
		binary.Write(&b, binary.LittleEndian, uint32(i))
	}
	for _, v := range vecs {
		for _, c := range v {
			b.WriteByte(byte(c))
		}
	}
	return b.Bytes()
}

func TestParse(t *testing.T) {
	good := build(2, []string{"ab", "cd"}, [][]int8{{1, 0}, {0, -2}})
	tab, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	v := make([]float32, 2)
	if !tab.AddTo(v, "cd", 2) || v[0] != 0 || v[1] != -2 {
		t.Errorf("AddTo(cd, 2) = %v, want [0 -2]", v)
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte("QWV2"), good[4:]...)},
		{"truncated words", good[:14]},
		{"truncated vectors", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte(nil), good...), 0)},
		{"duplicate word", build(2, []string{"ab", "ab"}, [][]int8{{1, 0}, {0, 1}})},
		{"zero dims", build(0, nil, nil)},
		{"huge header", append([]byte("QWV1\xff\xff\xff\xff\xff\xff"), good[10:]...)},
		{"empty word", build(2, []string{""}, [][]int8{{1, 0}})},
	} {
		if _, err := Parse(tc.b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err %v, want ErrFormat", tc.name, err)
		}
	}
}

// FuzzParse: any bytes parse into a table whose every word has a vector,
// or fail with ErrFormat; never a panic.
func FuzzParse(f *testing.F) {
	f.Add(build(2, []string{"ab", "cd"}, [][]int8{{1, 0}, {0, -2}}))
	f.Add([]byte("QWV1"))
	f.Add(Embedded()[:200])
	f.Fuzz(func(t *testing.T, b []byte) {
		tab, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		v := make([]float32, tab.Dims())
		for w := range tab.index {
			if !tab.AddTo(v, w, 1) {
				t.Fatalf("word %q listed but has no vector", w)
			}
		}
	})
}
