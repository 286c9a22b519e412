package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary documents to Parse: it must never panic, every
// rejection must be an *Error, and every accepted configuration must come
// back equal from its own effective settings.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"full.yaml", "full.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	if data, err := os.ReadFile("../../examples/quiver.yaml"); err == nil {
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"mode: proxy",
		"upstreams: [{name: a, command: [x]}, {name: A, url: 'http://h'}]",
		"artifacts: {ttl: 1h30m, max_bytes: 1.5GiB}",
		"rate_limits: {'tool:a*': {max_calls_per_minute: 1}}",
		"x: &a [*a]",
		"a: &a {b: *a}",
		"state_dir: ~/s",
		"upstreams: [{name: n, command: [c], env: {A: '${B}'}, tool_prefix: ''}]",
		"listen: {transport: http, addr: '[::1]:0', tls: {cert: c, key: k}}",
		"browse: {top_k: 0x0a}",
		"schema: {max_bytes: 1e3}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, "/fuzz")
		if err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error is %T, not *Error: %v", err, err)
			}
			if c != nil {
				t.Fatal("config and error")
			}
			return
		}
		for _, enc := range []func() ([]byte, error){c.Effective, c.EffectiveJSON} {
			out, err := enc()
			if err != nil {
				t.Fatalf("effective: %v", err)
			}
			back, err := Parse("fuzz.yaml", out, "/fuzz")
			if err != nil {
				t.Fatalf("effective settings rejected: %v\ninput:\n%s\neffective:\n%s", err, data, out)
			}
			if !reflect.DeepEqual(back, c) {
				t.Fatalf("round trip differs\ninput:\n%s\neffective:\n%s\n got %+v\nwant %+v", data, out, back, c)
			}
		}
	})
}

// TestRoundTripStrings checks that awkward strings survive Effective and
// EffectiveJSON, and that strings that would not are refused at load.
func TestRoundTripStrings(t *testing.T) {
	fixedEnv(t)
	q := func(s string) string {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, s := range []string{
		"null", "~", "yes", "no", "on", "0x10", "1e3", "  lead", "trail  ", "a: b", "- x", "#c", "\t",
		"\u2028", "é", "'", "\"", strings.Repeat("word ", 40), "line1\nline2", "line1\n", "\r", "&a", "*a",
		"!t", "%", "@x", "`", "{}", ">", "|", "", "\ufeffbom", "\u00a0", "${X}",
	} {
		src := "upstreams: [{name: n, command: [x, " + q(s) + "], env: {A: " + q(s) + "}}]\n" +
			"registry: [" + q("r"+s) + "]\nexpose: {direct: [" + q("d"+s) + "]}"
		c, err := Parse("x.yaml", []byte(src), "/b")
		if err != nil {
			t.Errorf("%q rejected: %v", s, err)
			continue
		}
		for _, enc := range []func() ([]byte, error){c.Effective, c.EffectiveJSON} {
			out, err := enc()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse("x.yaml", out, "/b")
			if err != nil {
				t.Errorf("%q: effective settings rejected: %v\n%s", s, err, out)
			} else if !reflect.DeepEqual(back, c) {
				t.Errorf("%q: round trip differs", s)
			}
		}
	}
	// YAML escapes of control characters.
	for _, s := range []string{`"\x01"`, `"\x7f"`, `"\u0085"`, `"\N"`, `"\e[31m"`} {
		_, err := Parse("x.yaml", []byte("upstreams: [{name: n, command: [x, "+s+"]}]"), "/b")
		if err == nil || !strings.Contains(err.Error(), "upstreams[0].command[1]: string contains the control character") {
			t.Errorf("%q: got %v", s, err)
		}
	}
}
