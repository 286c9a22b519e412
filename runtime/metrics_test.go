package runtime

import (
	"fmt"
	"testing"
)

// TestLabelBudget: label values are handed out up to the bounds, then
// calls count under _other, and a value once given stays.
func TestLabelBudget(t *testing.T) {
	var b labelBudget
	for i := range maxToolLabels {
		if s, tl := b.of(fmt.Sprintf("s%d", i%10), fmt.Sprintf("t%d", i)); tl != fmt.Sprintf("t%d", i) || s != fmt.Sprintf("s%d", i%10) {
			t.Fatalf("call %d labelled %s/%s", i, s, tl)
		}
	}
	if s, tl := b.of("s1", "new"); s != "s1" || tl != otherLabel {
		t.Fatalf("past the tool bound: %s/%s", s, tl)
	}
	if s, tl := b.of("s3", "t3"); s != "s3" || tl != "t3" {
		t.Fatalf("a known tool lost its label: %s/%s", s, tl)
	}
	for i := 10; i < maxServerLabels; i++ {
		b.of(fmt.Sprintf("s%d", i), "t0")
	}
	if s, tl := b.of("one-too-many", "x"); s != otherLabel || tl != otherLabel {
		t.Fatalf("past the server bound: %s/%s", s, tl)
	}
}
