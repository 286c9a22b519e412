package codes

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeShape is what a wire code looks like.
var codeShape = regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)+$|^[A-Z]{4,}$`)

// camel is the constant name of a code: RATE_LIMITED -> RateLimited.
func camel(code string) string {
	var b strings.Builder
	for w := range strings.SplitSeq(code, "_") {
		b.WriteString(w[:1] + strings.ToLower(w[1:]))
	}
	return b.String()
}

// constants returns the exported string constants declared in this
// package's non-test files, by name.
func constants(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	out := map[string]string{}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i >= len(vs.Values) || !n.IsExported() {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						out[n.Name] = v
					}
				}
			}
		}
	}
	return out
}

// Every code constant is a row of the table under its camel-case name, and
// every row is a constant.
func TestTableHasEveryConstant(t *testing.T) {
	consts := constants(t)
	seen := map[string]bool{}
	for _, in := range All() {
		if seen[in.Code] {
			t.Errorf("%s: two rows", in.Code)
		}
		seen[in.Code] = true
		if consts[camel(in.Code)] != in.Code {
			t.Errorf("%s: no constant %s = %q", in.Code, camel(in.Code), in.Code)
		}
	}
	for name, v := range consts {
		if !seen[v] {
			t.Errorf("constant %s = %q is not in the table", name, v)
		}
		if camel(v) != name {
			t.Errorf("constant %s = %q should be named %s", name, v, camel(v))
		}
	}
}

// The rows are well formed, and an upstream's failure is never receipted
// as the gateway's refusal.
func TestTableRows(t *testing.T) {
	for _, in := range All() {
		if !codeShape.MatchString(in.Code) {
			t.Errorf("%q is not code-shaped", in.Code)
		}
		if in.Origin == 0 || in.Origin&^(Quiver|Upstream|Client) != 0 {
			t.Errorf("%s: origin %d", in.Code, in.Origin)
		}
		if in.Receipt < Deny || in.Receipt > AllowTimeout {
			t.Errorf("%s: receipt %d", in.Code, in.Receipt)
		}
		if in.Origin&Quiver == 0 && in.Receipt == Deny {
			t.Errorf("%s: only raised by %s, yet receipted deny", in.Code, originText(in.Origin))
		}
		if _, ok := rpcNames[in.JSONRPC]; !ok {
			t.Errorf("%s: JSON-RPC code %d", in.Code, in.JSONRPC)
		}
		if in.Description == "" || strings.ContainsAny(in.Description, "\n|") {
			t.Errorf("%s: description %q", in.Code, in.Description)
		}
	}
}

func TestLookups(t *testing.T) {
	for _, tc := range []struct {
		code      string
		from      Origin
		receipt   Receipt
		retryable bool
		rpc       int64
	}{
		{RateLimited, Quiver, Deny, true, jsonrpc.CodeInternalError},
		{RateLimited, Upstream, AllowError, true, jsonrpc.CodeInternalError},
		{UpstreamTimeout, Upstream, AllowTimeout, true, jsonrpc.CodeInternalError},
		{UpstreamTimeout, Quiver, AllowTimeout, true, jsonrpc.CodeInternalError},
		{UpstreamUnavailable, Quiver, AllowError, true, jsonrpc.CodeInternalError},
		{AuthFailed, Upstream, AllowError, false, jsonrpc.CodeInternalError},
		{Internal, Quiver, AllowError, false, jsonrpc.CodeInternalError},
		{PolicyDenied, Quiver, Deny, false, jsonrpc.CodeInternalError},
		{ArgsInvalid, Quiver, Deny, false, jsonrpc.CodeInvalidParams},
		{PromptNotFound, Quiver, Deny, false, jsonrpc.CodeInvalidParams},
		{IdempotencyKeyInProgress, Quiver, Deny, true, jsonrpc.CodeInternalError},
		{ClientError, Client, AllowError, false, jsonrpc.CodeInternalError},
		{RelayDenied, Quiver, Deny, false, jsonrpc.CodeInternalError},
		{"NOT_A_CODE", Quiver, Deny, false, jsonrpc.CodeInternalError},
		{"NOT_A_CODE", Upstream, Deny, false, jsonrpc.CodeInternalError},
		{PolicyDenied, 0, Deny, false, jsonrpc.CodeInternalError},
	} {
		if got := Receipted(tc.code, tc.from); got != tc.receipt {
			t.Errorf("Receipted(%s, %s) = %d, want %d", tc.code, originText(tc.from), got, tc.receipt)
		}
		if got := Retryable(tc.code); got != tc.retryable {
			t.Errorf("Retryable(%s) = %v", tc.code, got)
		}
		if got := JSONRPC(tc.code); got != tc.rpc {
			t.Errorf("JSONRPC(%s) = %d", tc.code, got)
		}
	}
}

// rpcNames are the JSON-RPC codes the table may use.
var rpcNames = map[int64]string{
	0:                                         "",
	jsonrpc.CodeParseError:                    "parse error",
	jsonrpc.CodeInvalidRequest:                "invalid request",
	jsonrpc.CodeMethodNotFound:                "method not found",
	jsonrpc.CodeInvalidParams:                 "invalid params",
	jsonrpc.CodeInternalError:                 "internal error",
	mcp.CodeHeaderMismatch:                    "header mismatch",
	mcp.CodeUnsupportedProtocolVersion:        "unsupported protocol version",
	mcp.CodeMissingRequiredClientCapabilities: "missing required client capabilities",
}

// The MCP codes the table spells out are the go-sdk's.
func TestMCPCodes(t *testing.T) {
	if headerMismatch != mcp.CodeHeaderMismatch || unsupportedProtocolVersion != mcp.CodeUnsupportedProtocolVersion ||
		missingClientCapabilities != mcp.CodeMissingRequiredClientCapabilities {
		t.Fatalf("go-sdk: header mismatch %d, unsupported protocol version %d", mcp.CodeHeaderMismatch, mcp.CodeUnsupportedProtocolVersion)
	}
}

// docsFile is where the codes are documented, from this directory.
const docsFile = "../../docs/errors.md"

func originText(o Origin) string {
	var parts []string
	for _, x := range []struct {
		o Origin
		s string
	}{{Quiver, "quiver"}, {Upstream, "upstream"}, {Client, "client"}} {
		if o&x.o != 0 {
			parts = append(parts, x.s)
		}
	}
	return strings.Join(parts, ", ")
}

func receiptText(r Receipt) string {
	return map[Receipt]string{Deny: "deny", AllowError: "allow, error", AllowTimeout: "allow, timeout"}[r]
}

// docRow renders one row of the table in docs/errors.md.
func docRow(in Info) string {
	receipt := receiptText(in.Receipt)
	if in.Origin&Quiver != 0 && in.Origin != Quiver {
		if other := Receipted(in.Code, in.Origin&^Quiver); other != in.Receipt {
			receipt = receiptText(in.Receipt) + " (quiver); " + receiptText(other) + " (" + originText(in.Origin&^Quiver) + ")"
		}
	}
	rpc := "—"
	if in.JSONRPC != 0 {
		rpc = fmt.Sprintf("%d %s", in.JSONRPC, rpcNames[in.JSONRPC])
	}
	retry := "no"
	if in.Retryable {
		retry = "yes"
	}
	return fmt.Sprintf("| `%s` | %s | %s | %s | %s | %s |", in.Code, retry, originText(in.Origin), receipt, rpc, in.Description)
}

// docTable returns the rows of the code table of docs/errors.md: the lines
// starting with "| `".
func docTable(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "| `") {
			rows = append(rows, strings.TrimRight(line, "\n"))
		}
	}
	return rows
}

// docs/errors.md lists every code of the table, as the table says, and no
// other code.
func TestDocsListEveryCode(t *testing.T) {
	var want []string
	for _, in := range All() {
		want = append(want, docRow(in))
	}
	got := docTable(t)
	if !slices.Equal(got, want) {
		t.Errorf("the table of %s differs from the codes package's; it should read:\n%s", docsFile, strings.Join(want, "\n"))
	}
	first := regexp.MustCompile("^\\| `([^`]*)`")
	for _, row := range got {
		code := first.FindStringSubmatch(row)[1]
		if !codeShape.MatchString(code) {
			t.Errorf("%s: %q is not code-shaped", docsFile, code)
		}
		if _, ok := Lookup(code); !ok {
			t.Errorf("%s documents %s, which is not in the table", docsFile, code)
		}
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "docs/errors.md") {
		t.Error("README.md does not point to docs/errors.md")
	}
}

// Every code the runtime's source names with a literal is in the table:
// the first argument of newError (runtime, runtime/upstream) and deny
// (runtime/guard), a Code or ErrorCode field, the code of a relayError,
// and a constant named Code*.
func TestSourceCodesAreInTheTable(t *testing.T) {
	fset := token.NewFileSet()
	check := func(pos token.Pos, e ast.Expr, what string) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		v, _ := strconv.Unquote(lit.Value)
		if _, ok := Lookup(v); !ok {
			t.Errorf("%s: %s %q is not in the codes table", fset.Position(pos), what, v)
		}
	}
	n := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		af, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		n++
		ast.Inspect(af, func(node ast.Node) bool {
			switch x := node.(type) {
			case *ast.CallExpr:
				if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "newError" || id.Name == "deny") && len(x.Args) > 0 {
					check(x.Pos(), x.Args[0], id.Name+" code")
				}
			case *ast.CompositeLit:
				if id, ok := x.Type.(*ast.Ident); ok && id.Name == "relayError" && len(x.Elts) > 0 {
					check(x.Pos(), x.Elts[0], "relayError code")
				}
				for _, el := range x.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "Code" || k.Name == "ErrorCode") {
							check(kv.Pos(), kv.Value, k.Name)
						}
					}
				}
			case *ast.AssignStmt:
				for i, lhs := range x.Lhs {
					if sel, ok := lhs.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Code" || sel.Sel.Name == "ErrorCode") && i < len(x.Rhs) {
						check(x.Pos(), x.Rhs[i], sel.Sel.Name)
					}
				}
			case *ast.ValueSpec:
				for i, name := range x.Names {
					if strings.HasPrefix(name.Name, "Code") && i < len(x.Values) {
						check(name.Pos(), x.Values[i], "constant "+name.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 50 {
		t.Fatalf("scanned %d files; is the walk rooted at runtime/?", n)
	}
}
