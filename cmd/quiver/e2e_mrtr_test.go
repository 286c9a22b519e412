package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mrtrConfig writes a configuration in mode with two test upstreams with
// -extras: "new" negotiates 2026-07-28 (it asks for input with
// input_required results) and "old" is held to 2025-11-25 (the go-sdk
// turns the same results into requests in the middle of the call).
func mrtrConfig(t *testing.T, mode string) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	fmt.Fprintf(&b, "mode: %s\nenvironment: dev\nstate_dir: %s\nupstreams:\n", mode, filepath.Join(dir, "state"))
	fmt.Fprintf(&b, "  - name: new\n    command: [%q, \"-extras\", \"-name\", \"new\"]\n", upstreamBin)
	fmt.Fprintf(&b, "  - name: old\n    command: [%q, \"-extras\", \"-name\", \"old\", \"-max-protocol\", \"2025-11-25\"]\n", upstreamBin)
	cfg := filepath.Join(dir, "quiver.yaml")
	must(t, os.WriteFile(cfg, []byte(b.String()), 0o644))
	return cfg
}

// mrtrCall calls tool of upstream with args: by its listed name in direct
// mode, through tool_execute in gateway mode.
func mrtrCall(t *testing.T, c *fwdClient, mode, upstream, tool string, args map[string]any) (string, bool) {
	t.Helper()
	name, callArgs := upstream+"__"+tool, args
	if mode == "gateway" {
		// tool_browse answers one card per line: id | name | ...
		text := c.mustCall(t, "tool_browse", map[string]any{"query": tool, "top_k": 50})
		id := ""
		for line := range strings.SplitSeq(text, "\n") {
			if f, _, _ := strings.Cut(line, " | "); strings.HasPrefix(f, upstream+":"+tool+"#") {
				id = f
			}
		}
		if id == "" {
			t.Fatalf("no card for %s:%s in %s", upstream, tool, text)
		}
		name, callArgs = "tool_execute", map[string]any{"tool_id": id, "args": args}
	}
	text, isErr, err := c.call(context.Background(), name, callArgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if mode == "gateway" && !isErr {
		// The envelope carries the upstream's result inline.
		var env struct {
			Status string `json:"status"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(text), &env); err != nil {
			t.Fatalf("envelope: %v: %s", err, text)
		}
		var parts []string
		for _, c := range env.Result.Content {
			parts = append(parts, c.Text)
		}
		return strings.Join(parts, "\n"), env.Status != "ok"
	}
	return text, isErr
}

// TestE2EForwardMRTR: elicitation and sampling of upstreams at 2026-07-28
// and 2025-11-25 reach clients at both revisions, in gateway and direct
// modes, over stdio and HTTP. A 2026-07-28 client gets them as
// input_required results relayed under quiver's sealed state (the go-sdk
// client's loop answers them with its handlers); a 2025-11-25 client gets
// them as requests on its session. A 2025-11-25 upstream's request in the
// middle of a call cannot reach a 2026-07-28 client: it is refused with
// RELAY_SESSIONLESS.
func TestE2EForwardMRTR(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"direct", "gateway"} {
		for _, transport := range []string{"stdio", "http"} {
			t.Run(mode+"/"+transport, func(t *testing.T) {
				t.Parallel()
				var srv *httpServer
				if transport == "http" {
					srv = startHTTP(t, "--config", mrtrConfig(t, mode))
				}
				for _, rev := range []string{"2026-07-28", "2025-11-25"} {
					c := newFwdClient("c" + strings.ReplaceAll(rev, "-", ""))
					c.so = &mcp.ClientSessionOptions{ProtocolVersion: rev}
					if transport == "http" {
						c.connectHTTP(t, srv, true)
					} else {
						// Each stdio client runs a quiver of its own,
						// with a state_dir of its own.
						c.connectStdio(t, true, "--config", mrtrConfig(t, mode))
					}
					if got := c.cs.InitializeResult().ProtocolVersion; got != rev {
						t.Fatalf("negotiated %s, want %s", got, rev)
					}
					if mode == "direct" {
						c.waitTools(t, "new__ask", "new__consult", "old__ask", "old__consult")
					}
					for _, up := range []string{"new", "old"} {
						q := fmt.Sprintf("question of %s via %s", c.name, up)
						p := fmt.Sprintf("prompt of %s via %s", c.name, up)
						ask, askErr := mrtrCall(t, c, mode, up, "ask", map[string]any{"question": q})
						consult, consultErr := mrtrCall(t, c, mode, up, "consult", map[string]any{"prompt": p})
						if rev >= "2026-07-28" && up == "old" {
							for _, got := range []string{ask, consult} {
								if !strings.Contains(got, "RELAY_SESSIONLESS") {
									t.Errorf("%s client, %s upstream: got %q, want RELAY_SESSIONLESS", rev, up, got)
								}
							}
							continue
						}
						if askErr || !strings.Contains(ask, `asked: accept {"answer":"answer-of-`+c.name+` to `+q+`"}`) {
							t.Errorf("%s client, %s upstream: ask = %q (error %v)", rev, up, ask, askErr)
						}
						if consultErr || !strings.Contains(consult, "consulted: model-"+c.name+" answer-of-"+c.name+" to "+p) {
							t.Errorf("%s client, %s upstream: consult = %q (error %v)", rev, up, consult, consultErr)
						}
					}
				}
				if t.Failed() && srv != nil {
					t.Logf("quiver log:\n%s", srv.log())
				}
			})
		}
	}
}
