package mcpimport

import (
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// sandboxPlan is the sandbox block derived for a command server, for the
// user to review: its existing path arguments writable (code it runs
// read-only), and network only for a network server.
type sandboxPlan struct {
	off   string
	read  []string
	write []string
	allow []string
	// notes are comment lines written above the block.
	notes []string
	// fetches: its launcher downloads the package at start.
	fetches bool
}

// launchers fetch a package before running it: the registry they reach.
var launchers = map[string][]string{
	"npx":  {"registry.npmjs.org"},
	"bunx": {"registry.npmjs.org"},
	"pnpx": {"registry.npmjs.org"},
	"uvx":  {"pypi.org", "files.pythonhosted.org"},
	"pipx": {"pypi.org", "files.pythonhosted.org"},
}

// networkWords mark a server that reaches the network by what it is.
var networkWords = []string{"fetch", "browser", "puppeteer", "playwright", "search", "github", "gitlab", "slack",
	"http", "web", "crawl", "scrape", "brave", "tavily", "exa", "sentry", "notion", "linear", "jira", "atlassian",
	"google", "aws", "azure", "cloudflare", "stripe", "openai", "api"}

// codeExt are the extensions of code a server runs: bound read-only.
var codeExt = map[string]bool{".js": true, ".mjs": true, ".cjs": true, ".ts": true, ".py": true, ".jar": true,
	".rb": true, ".php": true, ".sh": true, ".exe": true, ".wasm": true}

// systemDirs are bound read-only in every sandbox already.
var systemDirs = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/etc/", "/opt/homebrew/"}

// plan derives the sandbox block of command server s.
func (c *conv) plan(s *server) *sandboxPlan {
	p := &sandboxPlan{}
	prog := filepath.Base(s.command[0])
	switch prog {
	case "docker", "podman":
		p.off = prog + " runs it in a container: review its flags (--network, -v) instead"
		return p
	}
	hosts := launchers[prog]
	switch {
	case prog == "npm" && slices.Contains(s.command, "exec"), (prog == "pnpm" || prog == "yarn") && slices.Contains(s.command, "dlx"):
		hosts = launchers["npx"]
	case prog == "uv" && (slices.Contains(s.command, "run") || slices.Contains(s.command, "tool")):
		hosts = launchers["uvx"]
	}
	if len(hosts) > 0 {
		p.allow = append(p.allow, hosts...)
		p.fetches = true
		p.notes = append(p.notes, prog+" fetches the package from "+strings.Join(hosts, " and "))
	}
	if abs := s.command[0]; filepath.IsAbs(abs) && !system(abs) {
		p.read = appendNew(p.read, abs)
	}
	seen := map[string]bool{}
	network := false
	prev := ""
	for _, a := range s.command[1:] {
		flag := prev
		prev = ""
		val := a
		if strings.HasPrefix(a, "-") {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				prev = a
				continue
			}
			flag, val = k, v
		}
		low := strings.ToLower(val)
		for _, w := range networkWords {
			if strings.Contains(low, w) && !strings.Contains(low, "/") || strings.Contains(low, "server-"+w) || strings.Contains(low, "mcp-"+w) || strings.Contains(low, w+"-mcp") {
				network = true
			}
		}
		if u, err := url.Parse(val); err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "ws" || u.Scheme == "wss" ||
			u.Scheme == "postgres" || u.Scheme == "postgresql" || u.Scheme == "mysql" || u.Scheme == "redis" || u.Scheme == "mongodb") && u.Host != "" {
			h := strings.ToLower(u.Host)
			if !seen[h] {
				seen[h] = true
				p.allow = append(p.allow, h)
				p.notes = append(p.notes, h+" is in its arguments")
			}
			continue
		}
		path, ok := c.pathArg(val)
		if !ok {
			continue
		}
		code := codeExt[strings.ToLower(filepath.Ext(path))] || flag == "--directory" || flag == "--project"
		switch {
		case c.o.Exists == nil || !c.o.Exists(path):
			p.notes = append(p.notes, path+" (in its arguments) does not exist here: add it to fs when it does")
		case code:
			p.read = appendNew(p.read, path)
		default:
			p.write = appendNew(p.write, path)
		}
	}
	for _, e := range s.env {
		v := string(e.val)
		if path, ok := c.pathArg(v); ok && filepath.IsAbs(v) && c.o.Exists != nil && c.o.Exists(path) {
			p.write = appendNew(p.write, path)
		}
	}
	if len(p.write) > 0 {
		p.notes = append(p.notes, "fs.write: the existing paths among its arguments")
	}
	// A sandboxed server's working directory must be bound: the first
	// writable directory when there is one, else its working directory
	// read-only.
	// Served as it is in dev, the block is only shown, and the server
	// keeps the working directory its client gave it.
	wd := s.dir
	if wd == "" {
		wd = c.o.OutDir
	}
	if (c.o.Skeleton || c.o.Environment == "prod") && wd != "" && !within(wd, p.write) && !within(wd, p.read) {
		moved := false
		for _, w := range p.write {
			if c.o.IsDir != nil && c.o.IsDir(w) {
				s.dir, moved = w, true
				p.notes = append(p.notes, "dir: its first writable directory (a sandboxed server's working directory must be bound)")
				break
			}
		}
		if !moved {
			p.read = append(p.read, wd)
			p.notes = append(p.notes, wd+" is its working directory, bound read-only (a sandboxed server's must be bound): set dir to a directory it may read")
		}
	}
	if network && len(p.allow) == len(hosts) {
		p.notes = append(p.notes, "it looks like a network server: add the hosts it must reach to net.allow")
	}
	return p
}

// pathArg reports whether an argument is a path, and returns it absolute
// (~ and relative paths resolved against Home and Workspace).
func (c *conv) pathArg(a string) (string, bool) {
	switch {
	case a == "~" || strings.HasPrefix(a, "~/"):
		if c.o.Home == "" {
			return "", false
		}
		return filepath.Join(c.o.Home, a[1:]), true
	case strings.HasPrefix(a, "${HOME}"):
		if c.o.Home == "" {
			return "", false
		}
		return filepath.Join(c.o.Home, a[len("${HOME}"):]), true
	case filepath.IsAbs(a):
		return filepath.Clean(a), true
	case a == "." || a == ".." || strings.HasPrefix(a, "./") || strings.HasPrefix(a, "../"):
		if c.o.Workspace == "" {
			return "", false
		}
		return filepath.Join(c.o.Workspace, a), true
	}
	return "", false
}

func system(p string) bool {
	for _, d := range systemDirs {
		if strings.HasPrefix(p, d) {
			return true
		}
	}
	return false
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// within reports whether p is one of roots or under one.
func within(p string, roots []string) bool {
	p = filepath.Clean(p)
	for _, r := range roots {
		r = filepath.Clean(r)
		if p == r || strings.HasPrefix(p, r+string(filepath.Separator)) || r == "/" {
			return true
		}
	}
	return false
}
