package outpolicy

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestApply(t *testing.T) {
	const doc = `{"customer": {"name": "Ada Lovelace", "email": "ada@example.com", "card": {"number": "4111", "cvv": 123}},
		"orders": [{"id": 1, "email": "a@b.c", "total": 9.5}, {"id": 2, "email": "xy", "total": 3}],
		"note": "hi", "internal": {"token": "s3cret"}}`
	cases := []struct {
		name     string
		rules    map[string]Action
		want     string
		redacted []string
		masked   []string
	}{
		{"default deny", map[string]Action{"note": Allow}, `{"note":"hi"}`,
			[]string{"customer", "internal", "orders"}, nil},
		{"no rules", map[string]Action{}, `null`, []string{"$"}, nil},
		{"catch-all", map[string]Action{"*": Allow}, doc, nil, nil},
		{"catch-all with a masked glob", map[string]Action{"*": Allow, "*.email": Mask, "internal": Redact},
			`{"customer": {"name": "Ada Lovelace", "email": "a***m", "card": {"number": "4111", "cvv": 123}},
			 "orders": [{"id": 1, "email": "a***c", "total": 9.5}, {"id": 2, "email": "***", "total": 3}], "note": "hi"}`,
			[]string{"internal"}, []string{"customer.email", "orders.email"}},
		{"nested glob", map[string]Action{"customer.*": Allow, "customer.card": Redact}, `{"customer": {"name": "Ada Lovelace", "email": "ada@example.com"}}`,
			[]string{"customer.card", "internal", "note", "orders"}, nil},
		{"more specific allow under a redact", map[string]Action{"customer": Redact, "customer.name": Allow},
			`{"customer": {"name": "Ada Lovelace"}}`, []string{"customer.card", "customer.email", "internal", "note", "orders"}, nil},
		{"mask on an object redacts it", map[string]Action{"customer": Mask, "note": Allow}, `{"note":"hi"}`,
			[]string{"customer", "internal", "orders"}, nil},
		{"array elements share the path", map[string]Action{"orders.id": Allow, "orders.total": Mask},
			`{"orders": [{"id": 1, "total": "***"}, {"id": 2, "total": "***"}]}`,
			[]string{"customer", "internal", "note", "orders.email"}, []string{"orders.total"}},
		{"double star", map[string]Action{"**": Allow, "**.cvv": Redact, "**.token": Redact},
			`{"customer": {"name": "Ada Lovelace", "email": "ada@example.com", "card": {"number": "4111"}},
			 "orders": [{"id": 1, "email": "a@b.c", "total": 9.5}, {"id": 2, "email": "xy", "total": 3}], "note": "hi"}`,
			[]string{"customer.card.cvv", "internal"}, nil},
		{"segment glob", map[string]Action{"cust*.na?e": Allow}, `{"customer": {"name": "Ada Lovelace"}}`,
			[]string{"customer.card", "customer.email", "internal", "note", "orders"}, nil},
		{"the most specific rule wins", map[string]Action{"*.email": Allow, "customer.*": Mask, "customer.email": Redact},
			`{"customer": {"name": "A***e"}, "orders": [{"email": "a@b.c"}, {"email": "xy"}]}`,
			[]string{"customer.card", "customer.email", "internal", "note", "orders.id", "orders.total"}, []string{"customer.name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Compile(tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			in := decode(t, doc)
			before, _ := json.Marshal(in)
			got, rep := p.Apply(in)
			after, _ := json.Marshal(in)
			if string(before) != string(after) {
				t.Fatal("Apply modified its input")
			}
			if !reflect.DeepEqual(got, decode(t, tc.want)) {
				b, _ := json.Marshal(got)
				t.Errorf("got %s\nwant %s", b, tc.want)
			}
			if !reflect.DeepEqual(rep.Redacted, tc.redacted) && !(len(rep.Redacted) == 0 && len(tc.redacted) == 0) {
				t.Errorf("redacted %q, want %q", rep.Redacted, tc.redacted)
			}
			if !reflect.DeepEqual(rep.Masked, tc.masked) && !(len(rep.Masked) == 0 && len(tc.masked) == 0) {
				t.Errorf("masked %q, want %q", rep.Masked, tc.masked)
			}
		})
	}
}

func TestMaskValue(t *testing.T) {
	for in, want := range map[any]any{"secret": "s***t", "ab": Masked, "": Masked, "ünïcödé": "ü***é", 42.0: Masked, true: Masked} {
		if got := maskValue(in); got != want {
			t.Errorf("maskValue(%v) = %v, want %v", in, got, want)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, rules := range []map[string]Action{
		{"a": "keep"},
		{"": Allow},
		{"a..b": Allow},
		{"a.": Allow},
		{`a\`: Allow},
		{strings.Repeat("a", MaxPathLen+1): Allow},
	} {
		if _, err := Compile(rules); !errors.Is(err, ErrPolicy) {
			t.Errorf("Compile(%q) = %v, want ErrPolicy", rules, err)
		}
	}
	many := map[string]Action{}
	for i := 0; i <= MaxRules; i++ {
		many[strings.Repeat("x", i+1)] = Allow
	}
	if _, err := Compile(many); !errors.Is(err, ErrPolicy) {
		t.Errorf("%d rules: %v", len(many), err)
	}
}

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern string
		path    string
		want    bool
	}{
		{"*", "a", true},
		{"*", "a.b", false},
		{"**", "", true},
		{"**", "a.b.c", true},
		{"a.**", "a", true},
		{"a.**.z", "a.b.c.z", true},
		{"a.**.z", "a.z", true},
		{"a.**.z", "a.b", false},
		{"*.email", "customer.email", true},
		{"*.email", "email", false},
		{`a\.b`, "a.b", false},
		{"a?c", "abc", true},
	}
	for _, tc := range cases {
		var keys []string
		if tc.path != "" {
			keys = strings.Split(tc.path, ".")
		}
		if got := Match(tc.pattern, keys); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.pattern, tc.path, got, tc.want)
		}
	}
	// An escaped dot is one key with a dot in it.
	if !Match(`a\.b`, []string{"a.b"}) {
		t.Error(`a\.b does not match the key "a.b"`)
	}
}

func TestAllowsEverything(t *testing.T) {
	for rules, want := range map[string]bool{`{"*":"allow"}`: true, `{"**":"allow","a":"allow"}`: true,
		`{"*":"allow","a":"mask"}`: false, `{"a":"allow"}`: false} {
		var m map[string]Action
		_ = json.Unmarshal([]byte(rules), &m)
		p, err := Compile(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.AllowsEverything(); got != want {
			t.Errorf("%s: %v, want %v", rules, got, want)
		}
	}
	var nilp *Policy
	if nilp.AllowsEverything() {
		t.Error("a nil policy allows everything")
	}
}

func TestReportBounded(t *testing.T) {
	m := map[string]any{}
	for i := 0; i < 3*MaxReported; i++ {
		m[strings.Repeat("k", i+1)] = "v"
	}
	p, _ := Compile(map[string]Action{"k": Allow})
	_, rep := p.Apply(m)
	if len(rep.Redacted)+len(rep.Masked) != MaxReported || rep.More != 3*MaxReported-1-MaxReported {
		t.Errorf("reported %d+%d, more %d", len(rep.Redacted), len(rep.Masked), rep.More)
	}
}

func TestDeepValue(t *testing.T) {
	var v any = "leaf"
	for i := 0; i < 3*maxDepth; i++ {
		v = map[string]any{"a": v}
	}
	p, _ := Compile(map[string]Action{"**": Allow})
	got, rep := p.Apply(v)
	if got != nil || len(rep.Redacted) != 1 {
		t.Errorf("a value nested deeper than the bound: %v %v", got, rep)
	}
}

// FuzzMatch checks that the path matcher never panics and agrees with
// itself on the catch-alls.
func FuzzMatch(f *testing.F) {
	f.Add("customer.*", "customer.email")
	f.Add("**.a.**.b", "x.a.y.z.b")
	f.Add(`a\.b`, "a.b")
	f.Add("*?*?*", "abc")
	f.Fuzz(func(t *testing.T, pattern, path string) {
		if len(pattern) > MaxPathLen || len(path) > 4096 {
			return
		}
		keys := strings.Split(path, ".")
		_ = Match(pattern, keys)
		if !Match("**", keys) {
			t.Fatalf("** does not match %q", path)
		}
		p, err := Compile(map[string]Action{pattern: Allow})
		if err != nil {
			return
		}
		doc := map[string]any{}
		cur := doc
		for i, k := range keys {
			if i == len(keys)-1 {
				cur[k] = "value"
				break
			}
			next := map[string]any{}
			cur[k] = next
			cur = next
		}
		_, _ = p.Apply(doc)
	})
}
