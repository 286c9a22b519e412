package firewall

import (
	"context"
	"testing"
)

func BenchmarkApplyLog5MB(b *testing.B) {
	f := newFirewall(b, nil)
	r := textResult(genLog(5<<20, 1))
	b.SetBytes(int64(len(r.Parts[0].Text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Apply(context.Background(), "bench", r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplyJSON1MB(b *testing.B) {
	f := newFirewall(b, nil)
	r := Result{Structured: genJSON(1<<20, 2)}
	b.SetBytes(int64(len(r.Structured)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Apply(context.Background(), "bench", r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkViewGrep5MB(b *testing.B) {
	f := newFirewall(b, nil)
	log := genLog(5<<20, 1)
	o := mustApply(b, f, "bench", textResult(log))
	for _, bc := range []struct{ name, sel string }{
		{"ERROR", `{"type":"grep","pattern":"ERROR","max_matches":50}`},
		{"rare", `{"type":"grep","pattern":"status=418","max_matches":50}`},
		{"case-insensitive", `{"type":"grep","pattern":"(?i)exception|panic","max_matches":200}`},
	} {
		sel, err := ParseSelector([]byte(bc.sel))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(log)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.View(context.Background(), "bench", o.Artifacts[0].Handle, sel); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkViewLines5MB(b *testing.B) {
	f := newFirewall(b, nil)
	o := mustApply(b, f, "bench", textResult(genLog(5<<20, 1)))
	for _, bc := range []struct{ name, sel string }{
		{"head", `{"type":"lines","start":1,"end":20}`},
		{"middle", `{"type":"lines","start":25000,"end":25020}`},
		{"tail", `{"type":"lines","start":-20}`},
	} {
		sel, _ := ParseSelector([]byte(bc.sel))
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := f.View(context.Background(), "bench", o.Artifacts[0].Handle, sel); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkViewJSONPointer1MB(b *testing.B) {
	f := newFirewall(b, nil)
	o := mustApply(b, f, "bench", Result{Structured: genJSON(1<<20, 2)})
	sel, _ := ParseSelector([]byte(`{"type":"json_pointer","pointer":"/items/4000/tags/2"}`))
	for b.Loop() {
		if _, err := f.View(context.Background(), "bench", o.Artifacts[0].Handle, sel); err != nil {
			b.Fatal(err)
		}
	}
}
