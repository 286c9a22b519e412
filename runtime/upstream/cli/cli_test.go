package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/quiver-mcp/quiver/runtime/codes"
)

const gitLog = `name: git_log
description: Recent commits.
class: read
permissions: [repo:read]
input:
  type: object
  properties:
    count: {type: integer, minimum: 1, maximum: 50}
    author: {type: string, maxLength: 64}
  additionalProperties: false
command: git
args: [log, {arg: count, prefix: "--max-count="}, {arg: author, prefix: "--author="}, "--format=%h %s"]
timeout: 5s
output: {parser: lines}
`

func TestParse(t *testing.T) {
	m, err := Parse("git_log.yaml", []byte(gitLog), "/base", []string{"git"})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "git_log" || m.Class != ClassRead || m.Timeout.String() != "5s" || m.Output.Parser != ParserLines ||
		m.Output.MaxBytes != DefaultMaxBytes || !*m.Output.StripANSI || !reflect.DeepEqual(m.OKExitCodes, []int{0}) {
		t.Errorf("parsed %+v", m)
	}
	if len(m.Args) != 4 || m.Args[1].Arg != "count" || m.Args[1].Prefix != "--max-count=" || m.Args[3].Literal != "--format=%h %s" {
		t.Errorf("args %+v", m.Args)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, edit, want string
		line             int
	}{
		{"command outside allowed_commands", "command: git\n|command: rm\n", `command "rm" is not in the upstream's allowed_commands`, 11},
		{"unknown key", "timeout: 5s\n|timeout: 5s\nshell: true\n", "additional properties 'shell' not allowed", 14},
		{"bad class", "class: read\n|class: admin\n", "value must be one of", 3},
		{"empty permissions", "permissions: [repo:read]\n|permissions: []\n", "minItems", 4},
		{"open input schema", "  additionalProperties: false\n|  additionalProperties: true\n", "value must be false", 10},
		{"template names an unknown field", "{arg: author, prefix: \"--author=\"}|{arg: path}", `names "path", which the input schema does not declare`, 12},
		{"bad timeout", "timeout: 5s\n|timeout: 11m\n", "must be a duration", 13},
		{"command with a space", "command: git\n|command: git log\n", "does not match pattern", 11},
		{"bad output policy action", "timeout: 5s\n|timeout: 5s\noutput_policy: {a: keep}\n", "value must be one of", 14},
		{"NUL in a literal", "log,|\"lo\\0g\",", "does not match pattern", 12},
		{"not YAML", "name: git_log\n|name: [\n", "not valid YAML", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			from, to, _ := strings.Cut(tc.edit, "|")
			src := strings.Replace(gitLog, from, to, 1)
			if src == gitLog {
				t.Fatalf("edit %q changed nothing", tc.edit)
			}
			_, err := Parse("git_log.yaml", []byte(src), "/base", []string{"git"})
			var me *ManifestError
			if !errors.As(err, &me) || !errors.Is(err, ErrManifest) {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			if tc.line > 0 && me.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", me.Line, tc.line, err)
			}
		})
	}
}

func TestParseBounds(t *testing.T) {
	big := gitLog + "# " + strings.Repeat("x", MaxManifestBytes) + "\n"
	if _, err := Parse("big.yaml", []byte(big), "/", []string{"git"}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("an oversized manifest: %v", err)
	}
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for i := 0; i < 8; i++ {
		n := string(rune('b' + i))
		bomb += n + ": &" + n + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n"
		prev = n
	}
	if _, err := Parse("bomb.yaml", []byte(bomb), "/", nil); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Errorf("an alias bomb: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", gitLog)
	ms, err := Load([]string{"*.yaml"}, dir, []string{"git"})
	if err != nil || len(ms) != 1 {
		t.Fatalf("Load = %v, %v", ms, err)
	}
	write("b.yaml", gitLog)
	if _, err := Load([]string{"*.yaml"}, dir, []string{"git"}); err == nil || !strings.Contains(err.Error(), "also defined") {
		t.Errorf("duplicate names: %v", err)
	}
	if _, err := Load([]string{"none/*.yaml"}, dir, []string{"git"}); !errors.Is(err, ErrManifest) {
		t.Errorf("a glob matching nothing: %v", err)
	}
}

func TestRequired(t *testing.T) {
	m := &Manifest{Class: ClassDestructive, Permissions: []string{"repo:write"},
		Elevated: &Elevation{If: map[string]any{"force": true}, Permissions: []string{"repo:admin"}}}
	if got := m.Required(map[string]any{"force": false}); !reflect.DeepEqual(got, []string{PermDestructive, "repo:write"}) {
		t.Errorf("not elevated: %v", got)
	}
	if got := m.Required(map[string]any{"force": true}); !reflect.DeepEqual(got, []string{PermDestructive, "repo:admin", "repo:write"}) {
		t.Errorf("elevated: %v", got)
	}
	m.Class = ClassRead
	if got := m.Required(map[string]any{}); !reflect.DeepEqual(got, []string{"repo:write"}) {
		t.Errorf("read: %v", got)
	}
}

func TestBuild(t *testing.T) {
	items := []ArgItem{{Literal: "log"}, {Arg: "count", Prefix: "--max-count="}, {Flag: "--stat", If: "stat"}, {Arg: "rev"}, {Literal: "--"}, {Arg: "paths"}}
	cases := []struct {
		name string
		args string
		want []string
		err  string
	}{
		{"all", `{"count": 5, "stat": true, "rev": "main", "paths": ["a b", "-x"]}`, []string{"log", "--max-count=5", "--stat", "main", "--", "a b", "-x"}, ""},
		{"absent", `{}`, []string{"log", "--"}, ""},
		{"flag off", `{"stat": false}`, []string{"log", "--"}, ""},
		{"option injection", `{"rev": "--upload-pack=touch /tmp/pwned"}`, nil, "would be read as an option"},
		{"short option injection", `{"rev": "-ofile"}`, nil, "would be read as an option"},
		{"joined value may start with -", `{"count": "-1"}`, []string{"log", "--max-count=-1", "--"}, ""},
		{"NUL", `{"rev": "a\u0000b"}`, nil, "NUL"},
		{"object", `{"rev": {"a": 1}}`, nil, "no argv form"},
		{"shell is inert", `{"rev": "$(rm -rf /); *"}`, []string{"log", "$(rm -rf /); *", "--"}, ""},
		{"newline is one argument", `{"rev": "a\nb"}`, []string{"log", "a\nb", "--"}, ""},
		{"too long", `{"paths": ["` + strings.Repeat("x", MaxArgvBytes) + `"]}`, nil, "exceed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var args map[string]any
			dec := json.NewDecoder(strings.NewReader(tc.args))
			dec.UseNumber()
			if err := dec.Decode(&args); err != nil {
				t.Fatal(err)
			}
			got, err := Build(items, args)
			if tc.err != "" {
				if !errors.Is(err, ErrArgRefused) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Build = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	cases := []struct {
		parser, text, want string
		err                bool
	}{
		{ParserText, "a\nb\n", `{"text":"a\nb\n"}`, false},
		{ParserLines, "a\nb\n", `{"lines":["a","b"]}`, false},
		{ParserLines, "", `{"lines":[]}`, false},
		{ParserJSON, `{"a":1}`, `{"a":1}`, false},
		{ParserJSON, `[1,2]`, `{"value":[1,2]}`, false},
		{ParserJSON, `{"a":1} x`, ``, true},
		{ParserJSONL, "{\"a\":1}\n\n{\"a\":2}\n", `{"records":[{"a":1},{"a":2}]}`, false},
		{ParserJSONL, "{\"a\":1}\nnope\n", ``, true},
		{ParserCSV, "name,email\nada,a@x\n", `{"rows":[{"email":"a@x","name":"ada"}]}`, false},
		{ParserCSV, "a,b\n1\n", ``, true},
	}
	for _, tc := range cases {
		got, err := parse(tc.parser, tc.text)
		if tc.err {
			if err == nil {
				t.Errorf("%s %q: no error", tc.parser, tc.text)
			}
			continue
		}
		b, _ := json.Marshal(got)
		if err != nil || string(b) != tc.want {
			t.Errorf("%s %q = %s, %v; want %s", tc.parser, tc.text, b, err, tc.want)
		}
	}
}

func TestStripANSI(t *testing.T) {
	in := "\x1b[1;31mred\x1b[0m \x1b]0;title\x07plain\x1b(B"
	if got := StripANSI(in); got != "red plain" {
		t.Errorf("StripANSI = %q", got)
	}
}

// manifest builds a manifest of a real command for the run tests.
func manifest(t *testing.T, body string, allowed ...string) *Manifest {
	t.Helper()
	m, err := Parse(t.Name()+".yaml", []byte(body), t.TempDir(), allowed)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func call(t *testing.T, m *Manifest, args map[string]any) (*mcp.CallToolResult, error) {
	t.Helper()
	u := New("local", []*Manifest{m}, Options{})
	return u.Call(context.Background(), m.Name, args)
}

func TestCallRealCommands(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("alpha\nbeta\ngamma beta\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	grep := manifest(t, `name: search
description: grep
class: read
permissions: [files:read]
input: {type: object, properties: {pattern: {type: string}}, additionalProperties: false}
command: grep
args: [-n, -e, {arg: pattern}, notes.txt]
cwd: `+dir+`
ok_exit_codes: [0, 1]
output: {parser: lines}
`, "grep")
	res, err := call(t, grep, map[string]any{"pattern": "beta"})
	if err != nil || res.IsError {
		t.Fatalf("grep: %v %+v", err, res)
	}
	if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"lines":["2:beta","3:gamma beta"]}` {
		t.Errorf("grep structured = %s", b)
	}
	res, err = call(t, grep, map[string]any{"pattern": "zeta"})
	if err != nil || res.IsError {
		t.Errorf("grep without a match (exit 1, listed as ok): %v %+v", err, res)
	}
	// -e puts the pattern where an option is expected; a pattern that
	// begins with '-' is still refused, as the template has no "--".
	if _, err := call(t, grep, map[string]any{"pattern": "--help"}); err == nil {
		t.Error("an option-like pattern ran")
	} else if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.CliArgRefused {
		t.Errorf("option-like pattern: %v", err)
	}

	cat := manifest(t, `name: cat
description: cat
class: read
permissions: [files:read]
input: {type: object, properties: {file: {type: string}}, additionalProperties: false}
command: cat
args: ["--", {arg: file}]
cwd: `+dir+`
`, "cat")
	res, err = call(t, cat, map[string]any{"file": "missing.txt"})
	if err != nil || !res.IsError {
		t.Fatalf("cat of a missing file: %v %+v", err, res)
	}
	if txt := res.Content[0].(*mcp.TextContent).Text; !strings.HasPrefix(txt, "exit status 1: ") || !strings.Contains(txt, "missing.txt") {
		t.Errorf("non-zero exit text %q", txt)
	}
	// After "--" a dash value is a file name, not an option.
	if err := os.WriteFile(filepath.Join(dir, "-n"), []byte("dash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = call(t, cat, map[string]any{"file": "-n"})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "dash\n" {
		t.Errorf("cat -- -n: %v %+v", err, res)
	}
}

func TestCallANSIAndLimits(t *testing.T) {
	color := manifest(t, `name: color
description: printf
class: read
permissions: [x]
input: {type: object, additionalProperties: false}
command: printf
args: ["\e[31mred\e[0m"]
`, "printf")
	res, err := call(t, color, map[string]any{})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "red" {
		t.Errorf("ANSI not stripped: %v %+v", err, res)
	}
	big := manifest(t, `name: big
description: yes
class: read
permissions: [x]
input: {type: object, additionalProperties: false}
command: yes
output: {max_bytes: 1000}
`, "yes")
	if _, err := call(t, big, map[string]any{}); err == nil {
		t.Error("unbounded output accepted")
	} else if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.ResultTooLarge {
		t.Errorf("too much output: %v", err)
	}
	slow := manifest(t, `name: slow
description: sleep
class: read
permissions: [x]
input: {type: object, additionalProperties: false}
command: sleep
args: ["60"]
timeout: 100ms
`, "sleep")
	if _, err := call(t, slow, map[string]any{}); err == nil {
		t.Error("timeout not enforced")
	} else if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.UpstreamTimeout {
		t.Errorf("timeout: %v", err)
	}
	bad := manifest(t, `name: notjson
description: echo
class: read
permissions: [x]
input: {type: object, additionalProperties: false}
command: echo
args: [not json]
output: {parser: json}
`, "echo")
	if _, err := call(t, bad, map[string]any{}); err == nil {
		t.Error("unparseable output accepted")
	} else if ce := (*CallError)(nil); !errors.As(err, &ce) || ce.Code != codes.OutputInvalid {
		t.Errorf("unparseable: %v", err)
	}
}

// FuzzParse checks that the manifest parser never panics and that what
// it accepts is complete.
func FuzzParse(f *testing.F) {
	f.Add([]byte(gitLog))
	f.Add([]byte("name: x\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("a: &a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse("fuzz.yaml", data, "/", []string{"git", "ls"})
		if err != nil {
			if !errors.Is(err, ErrManifest) && !strings.Contains(err.Error(), "schema") {
				t.Fatalf("error without ErrManifest: %v", err)
			}
			return
		}
		if m.Name == "" || m.Command == "" || m.Timeout <= 0 || m.Output.Parser == "" || len(m.Permissions) == 0 {
			t.Fatalf("accepted an incomplete manifest: %+v", m)
		}
	})
}

// FuzzBuild checks that a built argv never holds a NUL and never has an
// option-like value from input where no "--" or prefix allows it.
func FuzzBuild(f *testing.F) {
	f.Add("main", "--upload-pack=x", "-n")
	f.Add("a\x00b", "", "$(id)")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		items := []ArgItem{{Literal: "log"}, {Arg: "a"}, {Arg: "b", Prefix: "--x="}, {Literal: "--"}, {Arg: "c"}}
		argv, err := Build(items, map[string]any{"a": a, "b": b, "c": []any{c, a}})
		if err != nil {
			if !errors.Is(err, ErrArgRefused) {
				t.Fatalf("error %v", err)
			}
			return
		}
		for _, s := range argv {
			if strings.ContainsRune(s, 0) {
				t.Fatalf("NUL in %q", argv)
			}
		}
		if argv[1] != "--" && strings.HasPrefix(argv[1], "-") {
			t.Fatalf("option-like positional %q", argv[1])
		}
	})
}
