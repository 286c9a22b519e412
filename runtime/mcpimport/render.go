package mcpimport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// render writes the quiver configuration of servers.
func (c *conv) render(res *Result, servers []*server) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	prod := c.o.Environment == "prod"
	sandboxed := c.o.Skeleton || prod
	w("# quiver configuration imported from %s\n", c.file)
	w("# (%s, %d servers) by quiver %s.\n", res.Client, res.Servers, map[bool]string{true: "config import", false: "serve"}[c.o.Skeleton])
	if c.o.Skeleton {
		w("#\n# A prod skeleton to review: every \"review\" comment, each sandbox block (derived\n")
		w("# from the server's arguments), then classify the fleet's tools and serve:\n")
		w("#\n#   quiver registry init --config THIS_FILE     # writes registry/<server>.yaml from the tools' annotations\n")
		w("#   (review registry/*.yaml: read or write, document specs)\n")
		w("#   quiver serve --config THIS_FILE\n")
		w("#\n# Secrets are never written here: quiver reads them from its environment at start.\n")
	}
	if len(c.envUsed) > 0 {
		var names []string
		for k := range c.envUsed {
			names = append(names, k)
		}
		sort.Strings(names)
		w("# Environment variables it reads: %s.\n", strings.Join(names, ", "))
	}
	w("\nmode: gateway\n")
	if prod {
		w("environment: prod        # tools no registry manifest classifies are denied; sandbox blocks are required\n")
	} else {
		w("environment: dev         # tools without a registry classification are allowed, with a warning\n")
	}
	w("listen:\n  transport: stdio\n\nupstreams:\n")
	if len(servers) == 0 {
		w("  []\n")
	}
	for i, s := range servers {
		if i > 0 {
			b.WriteByte('\n')
		}
		w("  # from %s\n", s.origin)
		for _, n := range s.notes {
			w("  # %s\n", n)
		}
		w("  - name: %s\n", q(s.name))
		switch {
		case len(s.command) > 0:
			parts := make([]string, len(s.command))
			for j, a := range s.command {
				parts[j] = q(a)
			}
			w("    command: [%s]\n", strings.Join(parts, ", "))
			if s.dir != "" {
				w("    dir: %s\n", q(s.dir))
			}
			if len(s.env) > 0 {
				w("    env:\n")
				for _, e := range s.env {
					w("      %s: %s\n", q(e.key), q(string(e.val)))
				}
			}
		case s.url != "":
			w("    url: %s\n", q(s.url))
		default:
			w("    sse: %s   # the legacy HTTP+SSE transport\n", q(s.sse))
		}
		if s.bearerEnv != "" || len(s.headersEnv) > 0 {
			w("    credentials:\n")
			if s.bearerEnv != "" {
				w("      bearer_env: %s\n", q(s.bearerEnv))
			}
			if len(s.headersEnv) > 0 {
				w("      headers_env:\n")
				for _, h := range s.headersEnv {
					w("        %s: %s\n", q(h.key), q(string(h.val)))
				}
			}
		}
		w("    trust_level: unknown   # review: internal, verified, community or unknown\n")
		w("    risk: HIGH             # review: the default risk of its tools (LOW, MEDIUM, HIGH, CRITICAL)\n")
		if len(s.command) > 0 && s.sandbox != nil && s.sandbox.fetches {
			w("    connect_timeout: 60s   # the first start downloads the package\n")
		}
		if s.disabled {
			w("    enabled: false         # disabled in %s\n", c.file)
		}
		if len(s.command) > 0 && s.sandbox != nil {
			renderSandbox(&b, s.sandbox, sandboxed)
		}
	}
	w("\n")
	if c.o.Skeleton {
		w("# The tool_registry manifests `quiver registry init` writes (spec 000); until they\n")
		w("# exist this glob matches nothing and quiver refuses to start in prod.\n")
		w("registry: [registry/*.yaml]\n")
	} else {
		w("registry: []             # no manifests: `quiver config import` and `quiver registry init` make them\n")
	}
	return b.Bytes()
}

// renderSandbox writes a sandbox block, or (when the file is served in
// dev, where none is required) the same block commented out.
func renderSandbox(b *bytes.Buffer, p *sandboxPlan, active bool) {
	prefix := "    "
	if !active {
		prefix = "    # "
		fmt.Fprintf(b, "    # In environment prod it runs in this sandbox (derived from its arguments; review):\n")
	} else {
		fmt.Fprintf(b, "    # review: derived from its arguments\n")
	}
	for _, n := range p.notes {
		fmt.Fprintf(b, "    #   %s\n", n)
	}
	if p.off != "" {
		fmt.Fprintf(b, "%ssandbox: {off: %s}\n", prefix, q(p.off))
		return
	}
	fmt.Fprintf(b, "%ssandbox:\n", prefix)
	if len(p.write) > 0 || len(p.read) > 0 {
		fmt.Fprintf(b, "%s  fs:\n", prefix)
		if len(p.write) > 0 {
			fmt.Fprintf(b, "%s    write: [%s]\n", prefix, qs(p.write))
		}
		if len(p.read) > 0 {
			fmt.Fprintf(b, "%s    read: [%s]\n", prefix, qs(p.read))
		}
	}
	if len(p.allow) == 0 {
		fmt.Fprintf(b, "%s  net: none\n", prefix)
	} else {
		fmt.Fprintf(b, "%s  net: {allow: [%s]}\n", prefix, qs(p.allow))
	}
}

func qs(list []string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = q(s)
	}
	return strings.Join(out, ", ")
}

// q writes s as a YAML scalar: plain when that reads back as the same
// string, else double-quoted (JSON's quoting is valid YAML).
func q(s string) string {
	if plain(s) {
		return s
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// plain reports whether s can be a plain YAML scalar in flow and block
// context alike.
func plain(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", "none":
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_', r == '/':
		case r >= '0' && r <= '9', r == '.':
			if i == 0 {
				return false
			}
		case r == '-':
			if i == 0 && (len(s) == 1 || s[1] == '-' && len(s) == 2) {
				return false
			}
		default:
			return false
		}
	}
	return true
}
