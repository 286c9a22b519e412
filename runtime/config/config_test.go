package config

import (
	"errors"
	"flag"
	"github.com/quiver-mcp/quiver/runtime/identity"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/catalog"
	"github.com/quiver-mcp/quiver/runtime/guard"
	"github.com/quiver-mcp/quiver/runtime/units"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixedEnv pins what Load reads from the environment.
func fixedEnv(t *testing.T) {
	t.Helper()
	t.Setenv("HOME", "/home/op")
	t.Setenv("XDG_STATE_HOME", "")
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("output differs from %s (run with -update to accept):\n%s", path, got)
	}
}

// parse parses src as a file named quiver.yaml in /etc/quiver.
func parse(src string) (*Config, error) {
	return Parse("quiver.yaml", []byte(src), "/etc/quiver")
}

func TestFullExample(t *testing.T) {
	fixedEnv(t)
	data, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("full.yaml", data, "/etc/quiver")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Source:      "full.yaml",
		Dir:         "/etc/quiver",
		Mode:        ModeProxy,
		Environment: guard.EnvDev,
		Listen: Listen{
			Transport:          TransportHTTP,
			Addr:               "0.0.0.0:9443",
			Path:               "/gateway/mcp",
			TLS:                &TLS{Cert: "/etc/quiver/certs/server.crt", Key: "/etc/quiver/server.key"},
			AllowedHosts:       []string{"quiver.internal", "quiver.internal:9443"},
			AllowedOrigins:     []string{"https://app.example.com"},
			SessionIdleTimeout: units.Duration(15 * time.Minute),
			Sessions:           Sessions{MaxPerPrincipal: 8, MaxTotal: 256},
			MetricsTokenEnv:    "QUIVER_METRICS_TOKEN",
			ReadyTimeout:       units.Duration(3 * time.Second),
			MRTRHold:           units.Duration(2 * time.Minute),
		},
		StateDir: "/etc/quiver/state",
		Upstreams: []Upstream{
			{
				Name: "GitHub", URL: "https://mcp.github.example/mcp",
				TrustLevel: TrustVerified, Risk: RiskMedium,
				Credentials:    Credentials{BearerEnv: "GITHUB_TOKEN", HeadersEnv: map[string]string{"X-GitHub-Org": "GITHUB_ORG"}},
				ConnectTimeout: units.Duration(5 * time.Second), CallTimeout: units.Duration(2 * time.Minute),
				ToolPrefix: "gh_", Sessions: SessionsShared, Enabled: true,
				Egress: &Egress{Allow: []string{"api.github.example", "*.githubusercontent.example", "127.0.0.1:8443"}, URLArgs: []string{"url", "endpoint"}},
			},
			{
				Name: "legacy-search", SSE: "http://127.0.0.1:9001/sse",
				Credentials: Credentials{BearerFile: "/etc/quiver/secrets/search.token"},
				TrustLevel:  TrustCommunity, Risk: RiskLow,
				ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
				ToolPrefix: "legacy-search__", Sessions: SessionsShared, Enabled: true, StrictArgs: new(false),
			},
			{
				Name: "billing", URL: "https://billing.example/mcp",
				Credentials: Credentials{TokenExchange: &TokenExchange{
					TokenURL: "https://auth.example/oauth2/token", ClientID: "quiver-gateway", ClientSecretEnv: "QUIVER_TX_SECRET",
					Audience: "https://billing.example/mcp", Scope: "billing.read", Subject: SubjectCaller,
					SubjectTokenType: SubjectTokenJWT, GatewayTokenEnv: "QUIVER_GATEWAY_TOKEN",
				}},
				TrustLevel: TrustUnknown, Risk: RiskHigh,
				ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
				ToolPrefix: "billing__", Sessions: SessionsShared, Enabled: true,
			},
			{
				Name:    "files",
				Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "."},
				Env:     map[string]string{"NODE_OPTIONS": "--max-old-space-size=256", "API_KEY": "${FILES_API_KEY}"},
				Dir:     "/etc/quiver/work", TrustLevel: TrustInternal, Risk: RiskCritical,
				ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
				ToolPrefix: "", Sessions: SessionsPerClient, Enabled: true,
				Workspace: &Workspace{Roots: []string{"/etc/quiver/work", "/srv/shared"}, PathArgs: DefaultPathArgs()},
				Sandbox: &Sandbox{
					FS:     SandboxFS{Read: []string{"/opt/models"}, Write: []string{"/etc/quiver/out"}},
					Net:    SandboxNet{Allow: []string{"registry.npmjs.org", "*.example.org", "10.0.0.5:443"}},
					Env:    []string{"FILES_LICENSE"},
					Limits: SandboxLimits{Memory: 512 << 20, Processes: 64, OpenFiles: 512, CPUTime: units.Duration(10 * time.Minute)},
				},
			},
			{
				Name: "repo", CLI: &CLI{Manifests: []string{"/etc/quiver/tools/*.yaml"}, AllowedCommands: []string{"git", "grep", "ls", "cat"}},
				TrustLevel: TrustUnknown, Risk: RiskHigh,
				ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
				ToolPrefix: "repo__", Enabled: true,
				OutputPolicies: map[string]map[string]string{"*": {"**": "allow", "**.email": "mask", "secrets": "redact"}},
				Sandbox:        &Sandbox{FS: SandboxFS{Read: []string{"/srv/repo"}}, Limits: SandboxLimits{Memory: 1 << 30, Processes: 256, OpenFiles: 1024, CPUTime: units.Duration(time.Hour)}},
			},
			{
				Name: "vendor", Command: []string{"/opt/vendor/bin/mcp"}, Dir: "/etc/quiver",
				TrustLevel: TrustUnknown, Risk: RiskHigh,
				ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
				ToolPrefix: "vendor__", Sessions: SessionsShared, Enabled: false,
				Sandbox: &Sandbox{Off: "vendor binary, reviewed", Limits: SandboxLimits{Memory: 1 << 30, Processes: 256, OpenFiles: 1024, CPUTime: units.Duration(time.Hour)}},
			},
			{
				Name: "fixtures", Catalog: "/etc/fixtures/catalog.json",
				TrustLevel: TrustUnknown, Risk: RiskHigh,
				ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
				ToolPrefix: "fixtures__", Enabled: false,
			},
		},
		State: State{Backend: StateRedis, Redis: Redis{URL: "rediss://redis.internal:6380/2", PasswordEnv: "QUIVER_REDIS_PASSWORD",
			TLS: RedisTLS{CAFile: "/etc/quiver/certs/redis-ca.pem", ServerName: "redis.internal"}, KeyPrefix: "fleet-a:"}},
		Registry:  []string{"/etc/quiver/registries/*.json", "/opt/quiver/registry/*.yaml"},
		Browse:    Browse{TopK: 25, CacheStable: true, MaxChildren: 40},
		Firewall:  Firewall{MaxInlineTokens: 1200, Enabled: false, OffFor: []string{"files:read_*", "echo"}},
		Artifacts: Artifacts{TTL: units.Duration(90 * time.Minute), MaxBytes: 512 << 20},
		Retry: Retry{MaxAttempts: 3, BaseDelay: units.Duration(250 * time.Millisecond), MaxDelay: units.Duration(5 * time.Second),
			Jitter: false, RetryableCodes: []string{"UPSTREAM_TIMEOUT", "RATE_LIMITED"}},
		Cache: Cache{ReadOnly: true, TTL: units.Duration(90 * time.Second), MaxEntries: 1024, Allow: []string{"github:list_*", "files:read_*"}},
		RateLimits: map[string]RateLimit{
			"tool_execute":         {MaxCallsPerMinute: 120, MaxCallsPerSession: 5000},
			"tool_browse":          {MaxCallsPerMinute: 600},
			"tool:github:create_*": {MaxCallsPerSession: 10},
		},
		Expose:       Expose{Direct: []string{"files:read_file*", "echo"}},
		Schema:       SchemaLimits{Strict: true, MaxBytes: 100_000, MaxDepth: 16, MaxProperties: 512},
		TolerantArgs: true,
		StrictArgs:   true,
		Insecure:     true,
		Principals:   map[string]Principal{"alice": {ReadOnly: true, Permissions: []string{"repo:read", "allow_destructive"}}, "*": {}},
		Auth: identity.Config{Realm: "corp", MaxTokenBytes: identity.DefaultMaxTokenBytes,
			Issuers: []identity.IssuerConfig{
				{Name: "ci", Issuer: "quiver-ci", Audiences: []string{"quiver"}, Alg: "HS256", HS256SecretEnv: "QUIVER_CI_JWT_SECRET"},
				{Name: "corp", Issuer: "https://idp.example.com/", Audiences: []string{"quiver", "mcp"}, Alg: "RS256",
					JWKSFile: "/etc/quiver/keys/jwks.json", JWKSRefresh: units.Duration(5 * time.Minute), ClockSkew: units.Duration(30 * time.Second),
					Claims: identity.ClaimNames{ActorType: "kind", ClientID: "cid", OrgID: "tenant"}, DefaultActorType: "agent"},
				{Name: "cloud", Issuer: "https://cloud.example.com/", Audiences: []string{"quiver"}, Alg: "ES256", JWKSURL: "https://cloud.example.com/jwks.json"},
			},
			Local: identity.LocalConfig{Sub: "alice", ActorType: "user", OrgID: "acme", Claims: map[string]any{"groups": []any{"sre"}}}},
		Policy:    Policy{File: "/etc/quiver/policy.yaml", WatchInterval: units.Duration(5 * time.Second)},
		Approvals: Approvals{TTL: units.Duration(10 * time.Minute), MaxPending: 20},
		Capabilities: Capabilities{Issuer: "fleet-a", KeyFile: "/etc/quiver/keys/capability.json", DefaultDuration: units.Duration(30 * time.Minute),
			MaxDuration: units.Duration(8 * time.Hour), ProofWindow: units.Duration(30 * time.Second)},
		Receipts: Receipts{Stdout: true},
		Incident: Incident{Persist: false, Quarantine: Quarantine{Denials: 10, Window: units.Duration(30 * time.Second)}},
		Admin:    Admin{TokenEnv: "QUIVER_ADMIN_TOKEN", Claim: &AdminClaim{Name: "quiver_admin", Value: "true"}},
		Log:      Log{Level: "debug", Format: "json"},
		Timing:   Timing{ReadyTimeout: 3 * time.Second, CallTimeout: time.Duration(DefaultCallTimeout)},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "full.effective.golden", out)
	js, err := c.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "full.effective.json.golden", js)

	// The effective settings, YAML or JSON, load back to the same Config.
	for _, src := range [][]byte{out, js} {
		back, err := Parse("full.yaml", src, "/elsewhere")
		if err != nil {
			t.Fatalf("effective settings do not load: %v", err)
		}
		back.Dir = c.Dir
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v", back, c)
		}
	}
}

func TestJSONInput(t *testing.T) {
	fixedEnv(t)
	y, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := Load("testdata/full.json")
	if err != nil {
		t.Fatal(err)
	}
	j.Source = y.Source
	if !reflect.DeepEqual(y, j) {
		t.Fatalf("JSON and YAML differ:\n%+v\n%+v", j, y)
	}
	c, err := Parse("q.json", []byte(`{"$schema": "https://quiver-mcp.dev/schemas/config.schema.json", "mode": "direct"}`), "/")
	if err != nil || c.Mode != ModeDirect {
		t.Fatalf("$schema key: %v", err)
	}
	_, err = Parse("q.json", []byte("{\n\t\"mode\": \"direct\",\n\t\"bogus\": 1\n}"), "/")
	assertErr(t, err, "q.json:3:2: bogus: unknown key; allowed: admin, approvals, artifacts, auth, browse, cache, capabilities, environment, expose, firewall, incident, insecure, listen, log, mode, policy, principals, rate_limits, receipts, registry, retry, schema, state, state_dir, strict_args, tolerant_args, upstreams")
}

func TestDefaults(t *testing.T) {
	fixedEnv(t)
	for _, src := range []string{"", "# only a comment\n", "{}", "---\n"} {
		c, err := parse(src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		d := Default()
		d.Source, d.Dir = "quiver.yaml", "/etc/quiver"
		if !reflect.DeepEqual(c, d) {
			t.Fatalf("%q: got %+v, want Default() %+v", src, c, d)
		}
	}
	d := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"mode", d.Mode, ModeGateway},
		{"environment", d.Environment, guard.EnvProd},
		{"listen.transport", d.Listen.Transport, TransportStdio},
		{"listen.addr", d.Listen.Addr, "127.0.0.1:8080"},
		{"listen.path", d.Listen.Path, "/mcp"},
		{"listen.tls", d.Listen.TLS, (*TLS)(nil)},
		{"state_dir", d.StateDir, "/home/op/.local/state/quiver"},
		{"upstreams", len(d.Upstreams), 0},
		{"browse.top_k", d.Browse.TopK, 10},
		{"browse.cache_stable", d.Browse.CacheStable, false},
		{"browse.max_children", d.Browse.MaxChildren, 20},
		{"firewall.max_inline_tokens", d.Firewall.MaxInlineTokens, 800},
		{"firewall.enabled", d.Firewall.Enabled, true},
		{"firewall.off_for", len(d.Firewall.OffFor), 0},
		{"artifacts.ttl", d.Artifacts.TTL, units.Duration(24 * time.Hour)},
		{"artifacts.max_bytes", d.Artifacts.MaxBytes, units.Size(1 << 30)},
		{"retry.max_attempts", d.Retry.MaxAttempts, 1},
		{"retry.base_delay", d.Retry.BaseDelay, units.Duration(100 * time.Millisecond)},
		{"retry.max_delay", d.Retry.MaxDelay, units.Duration(2 * time.Second)},
		{"retry.jitter", d.Retry.Jitter, true},
		{"retry.retryable_codes", d.Retry.RetryableCodes, []string{"UPSTREAM_TIMEOUT", "UPSTREAM_UNAVAILABLE"}},
		{"cache.read_only", d.Cache.ReadOnly, false},
		{"cache.ttl", d.Cache.TTL, units.Duration(60 * time.Second)},
		{"cache.max_entries", d.Cache.MaxEntries, 256},
		{"cache.allow", len(d.Cache.Allow), 0},
		{"rate_limits", len(d.RateLimits), 0},
		{"expose.direct", len(d.Expose.Direct), 0},
		{"schema.strict", d.Schema.Strict, false},
		{"schema.max_bytes", d.Schema.MaxBytes, units.Size(catalog.DefaultSchemaLimits.MaxBytes)},
		{"schema.max_depth", d.Schema.MaxDepth, catalog.DefaultSchemaLimits.MaxDepth},
		{"schema.max_properties", d.Schema.MaxProperties, catalog.DefaultSchemaLimits.MaxProperties},
		{"tolerant_args", d.TolerantArgs, false},
		{"log.level", d.Log.Level, "info"},
		{"log.format", d.Log.Format, "text"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	out, err := d.Effective()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "defaults.effective.golden", out)

	// Upstream defaults.
	c, err := parse("upstreams:\n  - name: My Server\n    command: [srv]\n")
	if err != nil {
		t.Fatal(err)
	}
	want := Upstream{Name: "My Server", Command: []string{"srv"}, Dir: "/etc/quiver", TrustLevel: TrustUnknown,
		Risk: RiskHigh, ConnectTimeout: units.Duration(10 * time.Second), CallTimeout: units.Duration(60 * time.Second), ToolPrefix: "my-server__",
		Sessions: SessionsShared, Enabled: true}
	if !reflect.DeepEqual(c.Upstreams[0], want) {
		t.Fatalf("got %+v\nwant %+v", c.Upstreams[0], want)
	}
	if ns := c.Upstreams[0].Namespace(); ns != "my-server" {
		t.Fatalf("namespace %q", ns)
	}
}

func TestStateDir(t *testing.T) {
	cases := []struct {
		xdg, src, want string
	}{
		{"", "", "/home/op/.local/state/quiver"},
		{"/xdg/state", "", "/xdg/state/quiver"},
		{"relative/not/used", "", "/home/op/.local/state/quiver"},
		{"", "state_dir: ~/q", "/home/op/q"},
		{"", "state_dir: '~'", "/home/op"},
		{"/xdg", "state_dir: $XDG_STATE_HOME/q", "/xdg/q"},
		{"/xdg", "state_dir: ${XDG_STATE_HOME}/q/", "/xdg/q"},
		{"", "state_dir: $XDG_STATE_HOME/q", "/home/op/.local/state/q"},
		{"", "state_dir: var/state", "/etc/quiver/var/state"},
		{"", "state_dir: /srv/../var/quiver", "/var/quiver"},
		{"", "state_dir: $XDG_STATE_HOMEX", "/etc/quiver/$XDG_STATE_HOMEX"},
	}
	for _, tc := range cases {
		t.Setenv("HOME", "/home/op")
		t.Setenv("XDG_STATE_HOME", tc.xdg)
		c, err := parse(tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if c.StateDir != tc.want {
			t.Errorf("%q (XDG_STATE_HOME=%q): got %q, want %q", tc.src, tc.xdg, c.StateDir, tc.want)
		}
	}
	_, err := parse("state_dir: ~root/x")
	assertErr(t, err, "quiver.yaml:1:1: state_dir: '~user' is not supported; write the path out")
}

func TestRelativePaths(t *testing.T) {
	fixedEnv(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "conf")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	src := `
listen: {transport: http, tls: {cert: tls/c.pem, key: ../k.pem}}
upstreams:
  - {name: a, catalog: cat.json}
  - {name: b, command: [./bin/srv]}
  - {name: c, command: [srv], dir: ../run}
  - {name: d, url: "http://h/mcp", credentials: {bearer_file: tok}}
registry: [reg/*.json, /abs/*.json]
`
	file := filepath.Join(sub, "q.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	// Load from another working directory with a relative path.
	t.Chdir(dir)
	c, err := Load("conf/q.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j := func(p ...string) string { return filepath.Join(append([]string{sub}, p...)...) }
	for _, tc := range []struct{ got, want string }{
		{c.Dir, sub},
		{c.Source, "conf/q.yaml"},
		{c.Listen.TLS.Cert, j("tls", "c.pem")},
		{c.Listen.TLS.Key, filepath.Join(dir, "k.pem")},
		{c.Upstreams[0].Catalog, j("cat.json")},
		{c.Upstreams[0].Dir, ""},
		{c.Upstreams[1].Command[0], "./bin/srv"}, // relative to Dir, as exec.Cmd does
		{c.Upstreams[1].Dir, sub},
		{c.Upstreams[2].Dir, filepath.Join(dir, "run")},
		{c.Upstreams[3].Credentials.BearerFile, j("tok")},
		{c.Registry[0], j("reg", "*.json")},
		{c.Registry[1], "/abs/*.json"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func assertErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v does not match ErrInvalid", err)
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T is not *Error", err)
	}
	if err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
}

func TestInvalid(t *testing.T) {
	fixedEnv(t)
	cases := []struct {
		name, src, want string
	}{
		// Enums.
		{"mode", "mode: bridge", "quiver.yaml:1:1: mode: must be one of gateway, proxy, direct"},
		{"environment", "environment: staging", "quiver.yaml:1:1: environment: must be one of prod, dev"},
		{"transport", "listen:\n  transport: sse", "quiver.yaml:2:3: listen.transport: must be one of stdio, http"},
		{"trust_level", "upstreams:\n  - name: a\n    command: [x]\n  - name: b\n    command: [y]\n    trust_level: trusted",
			"quiver.yaml:6:5: upstreams[1].trust_level: must be one of internal, verified, community, unknown"},
		{"risk", "upstreams:\n  - {name: a, command: [x], risk: high}", "quiver.yaml:2:29: upstreams[0].risk: must be one of LOW, MEDIUM, HIGH, CRITICAL"},
		{"log level", "log:\n  level: trace", "quiver.yaml:2:3: log.level: must be one of debug, info, warn, error"},
		{"log format", "log: {format: logfmt}", "quiver.yaml:1:7: log.format: must be one of text, json"},
		{"retryable code", "retry:\n  retryable_codes: [UPSTREAM_TIMEOUT, ARGS_INVALID]",
			"quiver.yaml:2:39: retry.retryable_codes[1]: must be one of UPSTREAM_TIMEOUT, UPSTREAM_UNAVAILABLE, RATE_LIMITED, UPSTREAM_ERROR"},
		// Ranges.
		{"top_k low", "browse: {top_k: 0}", "quiver.yaml:1:10: browse.top_k: must be at least 1"},
		{"top_k high", "browse:\n  top_k: 51", "quiver.yaml:2:3: browse.top_k: must be at most 50"},
		{"top_k float", "browse: {top_k: 2.5}", "quiver.yaml:1:10: browse.top_k: must be an integer, got a number"},
		{"top_k string", "browse: {top_k: ten}", "quiver.yaml:1:10: browse.top_k: must be an integer, got a string"},
		{"max_children", "browse: {max_children: 0}", "quiver.yaml:1:10: browse.max_children: must be at least 1"},
		{"max_attempts low", "retry: {max_attempts: 0}", "quiver.yaml:1:9: retry.max_attempts: must be at least 1"},
		{"max_attempts high", "retry: {max_attempts: 11}", "quiver.yaml:1:9: retry.max_attempts: must be at most 10"},
		{"max_inline_tokens", "firewall: {max_inline_tokens: -1}", "quiver.yaml:1:12: firewall.max_inline_tokens: must be at least 1"},
		{"max_entries", "cache: {max_entries: 0}", "quiver.yaml:1:9: cache.max_entries: must be at least 1"},
		{"rate limit zero", "rate_limits:\n  tool_execute: {max_calls_per_minute: 0}",
			"quiver.yaml:2:18: rate_limits.tool_execute.max_calls_per_minute: must be at least 1"},
		{"rate limit empty", "rate_limits:\n  tool_view: {}", "quiver.yaml:2:3: rate_limits.tool_view: must set max_calls_per_minute or max_calls_per_session"},
		{"rate scope", "rate_limits:\n  tool_call: {max_calls_per_minute: 1}",
			"quiver.yaml:2:3: rate_limits.tool_call: key must be tool_browse, tool_execute, tool_view, tool_hydrate or tool:<tool_id glob>"},
		{"rate glob", "rate_limits:\n  \"tool:gh[\": {max_calls_per_minute: 1}",
			`quiver.yaml:2:3: rate_limits["tool:gh["]: is not a valid tool_id glob: syntax error in pattern`},
		// Argument guards.
		{"workspace roots", "upstreams: [{name: a, command: [x], workspace: {roots: []}}]",
			"quiver.yaml:1:49: upstreams[0].workspace.roots: must not be empty"},
		{"workspace key", "upstreams: [{name: a, command: [x], workspace: {roots: [/w], paths: [p]}}]",
			"quiver.yaml:1:62: upstreams[0].workspace.paths: unknown key; allowed: path_args, roots"},
		{"egress entry", "upstreams: [{name: a, command: [x], egress: {allow: [\"http://x.example/\"]}}]",
			"quiver.yaml:1:54: upstreams[0].egress.allow[0]: must be a host name, *.suffix or IP literal, optionally with :port (a host, not a URL)"},
		{"egress port", "upstreams: [{name: a, command: [x], egress: {allow: [\"x.example:0\"]}}]",
			`quiver.yaml:1:54: upstreams[0].egress.allow[0]: must be a host name, *.suffix or IP literal, optionally with :port (invalid port "0")`},
		{"egress wildcard", "upstreams: [{name: a, command: [x], egress: {allow: [\"*.\"]}}]",
			`quiver.yaml:1:54: upstreams[0].egress.allow[0]: must be a host name, *.suffix or IP literal, optionally with :port ("" is not a host name)`},
		{"bool", "tolerant_args: yes", "quiver.yaml:1:1: tolerant_args: must be a boolean, got a string"},
		{"block type", "listen: stdio", "quiver.yaml:1:1: listen: must be a mapping, got a string"},
		{"null block", "upstreams:\n", "quiver.yaml:1:1: upstreams: must be a list, got null"},
		{"root list", "- a", "quiver.yaml:1:1: must be a mapping, got a list"},
		{"listen path", "listen: {path: mcp}", "quiver.yaml:1:10: listen.path: must start with '/'"},
		{"listen addr", "listen: {transport: http, addr: localhost}", "quiver.yaml:1:27: listen.addr: must be host:port, e.g. 127.0.0.1:8080"},
		{"listen port", "listen: {addr: \"127.0.0.1:99999\"}", "quiver.yaml:1:10: listen.addr: must be host:port with a port number 0..65535"},
		// Durations and sizes.
		{"duration syntax", "cache: {ttl: 60}", "quiver.yaml:1:9: cache.ttl: must be a string, got an integer"},
		{"duration unit", "cache: {ttl: 5d}", `quiver.yaml:1:9: cache.ttl: must be a duration such as "100ms", "60s", "1h30m" or "24h"`},
		{"duration negative", "artifacts: {ttl: -1h}", `quiver.yaml:1:13: artifacts.ttl: must be a duration such as "100ms", "60s", "1h30m" or "24h"`},
		{"duration zero", "artifacts: {ttl: 0s}", "quiver.yaml:1:13: artifacts.ttl: must be greater than 0"},
		{"ready timeout zero", "listen: {ready_timeout: 0s}", "quiver.yaml:1:10: listen.ready_timeout: must be greater than 0"},
		{"session idle timeout", "listen: {session_idle_timeout: soon}",
			`quiver.yaml:1:10: listen.session_idle_timeout: must be a duration such as "100ms", "60s", "1h30m" or "24h"`},
		{"sessions zero", "listen: {sessions: {max_total: 0}}", "quiver.yaml:1:21: listen.sessions.max_total: must be at least 1"},
		{"sessions per principal over total", "listen:\n  sessions: {max_per_principal: 10, max_total: 5}", "quiver.yaml:2:14: listen.sessions.max_per_principal: exceeds max_total"},
		{"metrics token env", "listen: {metrics_token_env: \"not a name\"}",
			"quiver.yaml:1:10: listen.metrics_token_env: must be an environment variable name (letters, digits and '_', not starting with a digit)"},
		{"duration overflow", "upstreams: [{name: a, command: [x], call_timeout: 9999999999h}]",
			"quiver.yaml:1:37: upstreams[0].call_timeout: is not a valid duration (too large?)"},
		{"retry delays", "retry:\n  base_delay: 3s\n  max_delay: 1s", "quiver.yaml:3:3: retry.max_delay: max_delay (1s) must be at least base_delay (3s)"},
		{"size unit", "artifacts:\n  max_bytes: 1GiBs", `quiver.yaml:2:3: artifacts.max_bytes: must be a size such as 1048576, "512MiB", "1GiB" or "100KB"`},
		{"size fraction", "artifacts: {max_bytes: 1.1KiB}", "quiver.yaml:1:13: artifacts.max_bytes: is not a whole number of bytes"},
		{"size zero", "artifacts: {max_bytes: 0}", "quiver.yaml:1:13: artifacts.max_bytes: must be at least 1"},
		{"size zero string", "schema: {max_bytes: 0KiB}", "quiver.yaml:1:10: schema.max_bytes: must be at least 1 byte"},
		{"size overflow", "schema: {max_bytes: 9000000TiB}", "quiver.yaml:1:10: schema.max_bytes: is too large"},
		{"size bool", "schema: {max_bytes: true}", "quiver.yaml:1:10: schema.max_bytes: must be an integer or a string, got a boolean"},
		// Unknown keys.
		{"unknown top", "mode: gateway\nupstream: []", "quiver.yaml:2:1: upstream: unknown key (did you mean upstreams?)"},
		{"unknown nested", "browse:\n  top_k: 3\n  topk: 4", "quiver.yaml:3:3: browse.topk: unknown key (did you mean top_k?)"},
		{"unknown far", "firewall: {mode: strict}", "quiver.yaml:1:12: firewall.mode: unknown key; allowed: enabled, max_inline_tokens, off_for"},
		{"unknown upstream key", "upstreams:\n  - name: a\n    command: [x]\n    args: [y]",
			"quiver.yaml:4:5: upstreams[0].args: unknown key; allowed: call_timeout, catalog, cli, command, connect_timeout, credentials, dir, egress, enabled, env, name, output_policies, protocol, risk, sandbox, sessions, sse, strict_args, tool_prefix, trust_level, url, workspace"},
		{"duplicate key", "mode: proxy\nmode: gateway", "quiver.yaml:2:1: mode: duplicate key (first at line 1)"},
		// Upstreams.
		{"missing name", "upstreams:\n  - command: [x]", `quiver.yaml:2:5: upstreams[0]: missing required key "name"`},
		{"empty name", "upstreams: [{name: '', command: [x]}]", "quiver.yaml:1:14: upstreams[0].name: must not be empty"},
		{"long name", "upstreams: [{name: " + strings.Repeat("n", 65) + ", command: [x]}]", "quiver.yaml:1:14: upstreams[0].name: must be at most 64 characters long"},
		{"name space", "upstreams: [{name: ' a', command: [x]}]", "quiver.yaml:1:14: upstreams[0].name: must not begin or end with white space"},
		{"name no namespace", "upstreams: [{name: '---', command: [x]}]", "quiver.yaml:1:14: upstreams[0].name: has no letters or digits to derive a tool_id namespace from"},
		{"duplicate names", "upstreams:\n  - {name: docs, command: [x]}\n  - {name: docs, url: 'http://h'}",
			`quiver.yaml:3:6: upstreams[1].name: duplicate upstream name "docs" (first at line 2)`},
		{"namespace conflict", "upstreams:\n  - {name: My.Docs, command: [x]}\n  - {name: my docs, url: 'http://h'}",
			`quiver.yaml:3:6: upstreams[1].name: "my docs" and upstream "My.Docs" (line 2) map to the same namespace "my-docs"; rename one`},
		{"two transports", "upstreams:\n  - name: a\n    command: [x]\n    url: http://h/mcp",
			"quiver.yaml:4:5: upstreams[0].url: command and url are mutually exclusive: an upstream has exactly one transport"},
		{"sse and catalog", "upstreams:\n  - name: a\n    catalog: c.json\n    sse: http://h/sse",
			"quiver.yaml:3:5: upstreams[0].catalog: sse and catalog are mutually exclusive: an upstream has exactly one transport"},
		{"no transport", "upstreams:\n  - name: a\n    trust_level: verified", "quiver.yaml:2:5: upstreams[0]: needs one of command, url, sse, catalog or cli"},
		{"cli and command", "upstreams: [{name: a, command: [x], cli: {manifests: [t.yaml], allowed_commands: [git]}}]", "quiver.yaml:1:37: upstreams[0].cli: command and cli are mutually exclusive: an upstream has exactly one transport"},
		{"cli without allowed_commands", "upstreams: [{name: a, cli: {manifests: [t.yaml]}}]", "quiver.yaml:1:23: upstreams[0].cli: missing required key \"allowed_commands\""},
		{"cli command with a space", "upstreams: [{name: a, cli: {manifests: [t.yaml], allowed_commands: [git log]}}]", "quiver.yaml:1:69: upstreams[0].cli.allowed_commands[0]: must match the pattern ^[^\\s\\x00]+$"},
		{"output policy action", "upstreams: [{name: a, catalog: c, output_policies: {'*': {email: keep}}}]", "quiver.yaml:1:59: upstreams[0].output_policies[\"*\"].email: must be one of allow, mask, redact"},
		{"output policy path", "upstreams: [{name: a, catalog: c, output_policies: {'*': {'a..b': allow}}}]", "quiver.yaml:1:53: upstreams[0].output_policies[\"*\"]: invalid output policy: path \"a..b\" has an empty segment"},
		{"principal permission", "principals: {'*': {permissions: ['a b']}}", "quiver.yaml:1:34: principals[\"*\"].permissions[0]: must match the pattern ^[A-Za-z0-9_.:*/-]{1,128}$"},
		{"empty command", "upstreams: [{name: a, command: []}]", "quiver.yaml:1:23: upstreams[0].command: must not be empty"},
		{"empty program", "upstreams: [{name: a, command: ['', x]}]", "quiver.yaml:1:33: upstreams[0].command[0]: the program must not be empty"},
		{"shell string", "upstreams: [{name: a, command: ['npx -y srv']}]",
			`quiver.yaml:1:33: upstreams[0].command[0]: is one string with spaces; write the argv as a list, e.g. [npx, -y, "@scope/server"] (no shell is involved)`},
		{"url scheme", "upstreams: [{name: a, url: 'ftp://h'}]", "quiver.yaml:1:23: upstreams[0].url: must be an http:// or https:// URL"},
		{"redis without url", "state: {backend: redis}", "quiver.yaml:1:9: state.backend: backend redis needs state.redis.url (redis://host:port/db or rediss://...)"},
		{"redis empty url", "state:\n  backend: redis\n  redis: {key_prefix: x}", "quiver.yaml:3:3: state.redis: backend redis needs state.redis.url (redis://host:port/db or rediss://...)"},
		{"redis url scheme", "state: {backend: redis, redis: {url: 'http://h:6379'}}", "quiver.yaml:1:33: state.redis.url: must be a redis:// or rediss:// URL"},
		{"redis url password", "state: {backend: redis, redis: {url: 'redis://:pw@h:6379/0'}}", "quiver.yaml:1:33: state.redis.url: a password in the URL is not allowed; name an environment variable with state.redis.password_env"},
		{"redis tls without rediss", "state: {backend: redis, redis: {url: 'redis://h', tls: {server_name: h}}}", "quiver.yaml:1:51: state.redis.tls: applies to rediss:// URLs only"},
		{"state backend", "state: {backend: etcd}", "quiver.yaml:1:9: state.backend: must be one of embedded, redis"},
		{"url host", "upstreams: [{name: a, url: 'http:///mcp'}]", "quiver.yaml:1:23: upstreams[0].url: has no host"},
		{"env on url", "upstreams: [{name: a, url: 'http://h', env: {A: b}}]", "quiver.yaml:1:40: upstreams[0].env: is only valid with command"},
		{"dir on catalog", "upstreams: [{name: a, catalog: c, dir: d}]", "quiver.yaml:1:35: upstreams[0].dir: is only valid with command"},
		{"credentials on command", "upstreams: [{name: a, command: [x], credentials: {bearer_env: T}}]",
			"quiver.yaml:1:37: upstreams[0].credentials: apply to url and sse upstreams only (a command upstream gets env)"},
		{"bearer both", "upstreams: [{name: a, url: 'http://h', credentials: {bearer_env: T, bearer_file: f}}]",
			"quiver.yaml:1:69: upstreams[0].credentials.bearer_file: bearer_env and bearer_file are mutually exclusive"},
		{"bearer_env name", "upstreams: [{name: a, url: 'http://h', credentials: {bearer_env: 'my-token'}}]",
			"quiver.yaml:1:54: upstreams[0].credentials.bearer_env: must be an environment variable name (letters, digits and '_', not starting with a digit)"},
		{"reserved header", "upstreams: [{name: a, url: 'http://h', credentials: {headers_env: {mcp-session-id: S}}}]",
			"quiver.yaml:1:68: upstreams[0].credentials.headers_env[\"mcp-session-id\"]: header Mcp-Session-Id is set by the transport, not by credentials"},
		{"token exchange and bearer", "upstreams: [{name: a, url: 'http://h', credentials: {bearer_env: T, token_exchange: {token_url: 'https://as/t', client_id: q, client_secret_env: S}}}]",
			"quiver.yaml:1:69: upstreams[0].credentials.token_exchange: token_exchange and bearer_env/bearer_file are mutually exclusive"},
		{"token exchange http", "upstreams: [{name: a, url: 'http://h', credentials: {token_exchange: {token_url: 'http://as.example/t', client_id: q, client_secret_env: S}}}]",
			"quiver.yaml:1:71: upstreams[0].credentials.token_exchange.token_url: must use https (http is accepted only for loopback hosts)"},
		{"token exchange subject", "upstreams: [{name: a, url: 'http://h', credentials: {token_exchange: {token_url: 'https://as/t', client_id: q, client_secret_env: S, subject: gateway}}}]",
			"quiver.yaml:1:134: upstreams[0].credentials.token_exchange.subject: must be one of caller"},
		{"token exchange secret", "upstreams: [{name: a, url: 'http://h', credentials: {token_exchange: {token_url: 'https://as/t', client_id: q, client_secret: s3cret}}}]",
			"quiver.yaml:1:54: upstreams[0].credentials.token_exchange: missing required key \"client_secret_env\""},
		{"authorization twice", "upstreams: [{name: a, url: 'http://h', credentials: {bearer_env: T, headers_env: {Authorization: U}}}]",
			"quiver.yaml:1:83: upstreams[0].credentials.headers_env.Authorization: Authorization conflicts with bearer_env/bearer_file/token_exchange; keep one"},
		{"header key", "upstreams: [{name: a, url: 'http://h', credentials: {headers_env: {'X Key': K}}}]",
			`quiver.yaml:1:68: upstreams[0].credentials.headers_env["X Key"]: key must be an HTTP header name`},
		{"env key", "upstreams: [{name: a, command: [x], env: {'A-B': c}}]",
			`quiver.yaml:1:43: upstreams[0].env["A-B"]: key must be an environment variable name (letters, digits and '_', not starting with a digit)`},
		{"env ref", "upstreams: [{name: a, command: [x], env: {A: '${B'}}]",
			"quiver.yaml:1:43: upstreams[0].env.A: a reference is the whole value, written ${NAME}"},
		{"tool_prefix", "upstreams: [{name: a, command: [x], tool_prefix: 'a:b'}]",
			"quiver.yaml:1:37: upstreams[0].tool_prefix: must be at most 64 of the characters A-Z a-z 0-9 _ . -"},
		{"enabled type", "upstreams: [{name: a, command: [x], enabled: 'no'}]",
			"quiver.yaml:1:37: upstreams[0].enabled: must be a boolean, got a string"},
		// Inline secrets.
		{"token key", "upstreams:\n  - name: docs\n    url: http://h/mcp\n    token: s3cr3t",
			"quiver.yaml:4:5: upstreams[0].token: unknown key; inline secrets are not allowed in the file: name an environment variable with credentials.bearer_env or credentials.headers_env (or a token file with credentials.bearer_file)"},
		{"bearer key", "upstreams: [{name: d, url: 'http://h', credentials: {bearer: abc}}]",
			"quiver.yaml:1:54: upstreams[0].credentials.bearer: unknown key; inline secrets are not allowed in the file: name an environment variable with credentials.bearer_env or credentials.headers_env (or a token file with credentials.bearer_file)"},
		{"password key", "password: hunter2",
			"quiver.yaml:1:1: password: unknown key; inline secrets are not allowed in the file: name an environment variable with credentials.bearer_env or credentials.headers_env (or a token file with credentials.bearer_file)"},
		{"api_key key", "upstreams: [{name: d, url: 'http://h', api_key: abc}]",
			"quiver.yaml:1:40: upstreams[0].api_key: unknown key; inline secrets are not allowed in the file: name an environment variable with credentials.bearer_env or credentials.headers_env (or a token file with credentials.bearer_file)"},
		{"headers key", "upstreams: [{name: d, url: 'http://h', headers: {X-A: b}}]",
			"quiver.yaml:1:40: upstreams[0].headers: unknown key; header values are not written in the file: name an environment variable per header with credentials.headers_env"},
		{"env literal secret", "upstreams:\n  - name: gh\n    command: [srv]\n    env:\n      GITHUB_TOKEN: ghp_abc",
			`quiver.yaml:5:7: upstreams[0].env.GITHUB_TOKEN: looks like an inline secret; write "${GITHUB_TOKEN}" to take it from quiver's environment at start`},
		{"env url password", "upstreams: [{name: a, command: [x], env: {DATABASE_URL: 'postgres://u:pw@db/x'}}]",
			`quiver.yaml:1:43: upstreams[0].env.DATABASE_URL: holds a URL with a password; write "${DATABASE_URL}" to take it from quiver's environment at start`},
		{"url userinfo", "upstreams: [{name: a, url: 'https://user:pw@h/mcp'}]",
			"quiver.yaml:1:23: upstreams[0].url: credentials in the URL are not allowed; name an environment variable with credentials.bearer_env or credentials.headers_env"},
		{"url query secret", "upstreams: [{name: a, sse: 'https://h/sse?access_token=x'}]",
			`quiver.yaml:1:23: upstreams[0].sse: query parameter "access_token" looks like an inline secret; send it as a header named in credentials.headers_env`},
		// TLS.
		{"tls half", "listen:\n  transport: http\n  tls:\n    cert: c.pem", "quiver.yaml:3:3: listen.tls: needs key as well as cert"},
		{"tls empty", "listen: {transport: http, tls: {}}", "quiver.yaml:1:27: listen.tls: needs both cert and key"},
		{"tls stdio", "listen: {tls: {cert: c, key: k}}", "quiver.yaml:1:10: listen.tls: is only valid with transport http"},
		// Paths and globs.
		{"tilde path", "upstreams: [{name: a, catalog: ~/c.json}]",
			"quiver.yaml:1:23: upstreams[0].catalog: '~' is expanded only in state_dir; write an absolute path or one relative to the configuration file"},
		{"bad registry glob", "registry: ['reg/[a-']", "quiver.yaml:1:12: registry[0]: is not a valid glob: syntax error in pattern"},
		{"bad allow glob", "cache: {allow: ['[']}", "quiver.yaml:1:17: cache.allow[0]: is not a valid glob: syntax error in pattern"},
		{"empty glob", "expose: {direct: ['']}", "quiver.yaml:1:19: expose.direct[0]: must not be empty"},
		// YAML itself.
		{"syntax", "mode: gateway\nlisten: {transport: stdio\n", "quiver.yaml:2: not valid YAML: did not find expected ',' or '}'"},
		{"syntax unclosed", "mode: gateway\nregistry: [\n", "quiver.yaml:3: not valid YAML: did not find expected node content"},
		{"syntax indentation", "log:\n  level: info\n    format: json\n", "quiver.yaml:3: not valid YAML: mapping values are not allowed in this context"},
		{"two documents", "mode: proxy\n---\nmode: direct\n", "quiver.yaml:2:1: more than one YAML document; a configuration is one document"},
		{"alias cycle", "registry: &a [*a]", "quiver.yaml:1:15: registry[0][0]: alias refers to an enclosing anchor (a cycle)"},
		{"merge key", "base: &b {top_k: 3}\nbrowse:\n  <<: *b", "quiver.yaml:3:3: browse: YAML merge keys (<<) are not supported; write the keys out"},
		{"custom tag", "mode: !env MODE", "quiver.yaml:1:7: mode: unsupported YAML tag !env"},
		{"earliest first", "log: {level: x}\nmode: y", "quiver.yaml:1:7: log.level: must be one of debug, info, warn, error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.src)
			if c != nil {
				t.Fatalf("accepted: %+v", c)
			}
			assertErr(t, err, tc.want)
		})
	}
}

func TestAliasesAccepted(t *testing.T) {
	fixedEnv(t)
	c, err := parse("upstreams:\n  - &u {name: a, command: [srv], trust_level: verified}\nexpose:\n  direct: &g [\"a:*\"]\ncache: {allow: *g}\n")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Cache.Allow, []string{"a:*"}) || c.Upstreams[0].TrustLevel != TrustVerified {
		t.Fatalf("%+v", c)
	}
	// A billion-laughs document is refused, not expanded.
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		b.WriteString("a" + string(rune('0'+i)) + ": &a" + string(rune('0'+i)) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	_, err = parse(b.String())
	if err == nil || !strings.Contains(err.Error(), "document is too large") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	_, err := Load(missing)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if want := missing + ": cannot open: no such file or directory"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}

	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: refused by its size, before anything is read.
	if err := f.Truncate(MaxFileSize + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Load(big)
	assertErr(t, err, big+": file is 1048577 bytes, larger than the limit of 1048576 (1MiB)")
	_, err = Parse("p.yaml", make([]byte, MaxFileSize+1), "/")
	assertErr(t, err, "p.yaml: file is 1048577 bytes, larger than the limit of 1048576 (1MiB)")

	_, err = Load(dir)
	assertErr(t, err, dir+": is a directory, not a configuration file")
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "q.yaml", Line: 12, Column: 5, Field: "upstreams[1].trust_level", Msg: "bad"}, "q.yaml:12:5: upstreams[1].trust_level: bad"},
		{Error{File: "q.yaml", Line: 3, Msg: "bad"}, "q.yaml:3: bad"},
		{Error{File: "q.yaml", Msg: "bad"}, "q.yaml: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestFromCatalog(t *testing.T) {
	fixedEnv(t)
	for _, tc := range []struct{ path, name string }{
		{"/data/tools.jsonl", "tools"},
		{"/data/fleet.snapshot.json", "fleet.snapshot"},
		{"/data/日本.json", "catalog"},
		{"/data/" + strings.Repeat("x", 80) + ".json", strings.Repeat("x", 64)},
	} {
		c := FromCatalog(tc.path)
		if len(c.Upstreams) != 1 {
			t.Fatalf("%+v", c)
		}
		u := c.Upstreams[0]
		if u.Name != tc.name || u.Catalog != filepath.Clean(tc.path) || u.Transport() != "catalog" || !u.Enabled {
			t.Errorf("%s: got %+v", tc.path, u)
		}
		// It is a valid configuration: its effective settings load.
		out, err := c.Effective()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse("x.yaml", out, "/")
		if err != nil {
			t.Fatalf("%s: %v\n%s", tc.path, err, out)
		}
		back.Source, back.Dir = c.Source, c.Dir
		if !reflect.DeepEqual(back, c) {
			t.Errorf("%s: round trip differs", tc.path)
		}
	}
	c := FromCatalog("tools.jsonl")
	if !filepath.IsAbs(c.Upstreams[0].Catalog) {
		t.Fatalf("relative catalog path kept: %q", c.Upstreams[0].Catalog)
	}
}

func TestSlogLevel(t *testing.T) {
	for lvl, want := range map[string]string{"debug": "DEBUG", "info": "INFO", "warn": "WARN", "error": "ERROR", "": "INFO"} {
		if got := (Log{Level: lvl}).SlogLevel().String(); got != want {
			t.Errorf("%q: %s", lvl, got)
		}
	}
}

func TestToolPrefixDefault(t *testing.T) {
	fixedEnv(t)
	long := strings.Repeat("a", 64)
	cases := []struct {
		name, prefix, want string
	}{
		{"My Server", "", "my-server__"},
		{"GitHub", "", "github__"},
		{"My_Server_", "", "my_server__"},
		{"9lives", "", "ns-9lives__"},
		// The namespace is cut so that namespace+"__" fits in 64 characters.
		{long, "", strings.Repeat("a", 62) + "__"},
		{strings.Repeat("a", 61) + " bc", "", strings.Repeat("a", 61) + "__"},
		// An explicit prefix is kept, "" included.
		{"files", "tool_prefix: ''", ""},
		{"files", "tool_prefix: fs_", "fs_"},
		{"files", "tool_prefix: files_", "files_"},
	}
	for _, tc := range cases {
		src := "upstreams:\n  - name: '" + tc.name + "'\n    command: [srv]\n"
		if tc.prefix != "" {
			src += "    " + tc.prefix + "\n"
		}
		c, err := parse(src)
		if err != nil {
			t.Fatalf("%q: %v", tc.name, err)
		}
		got := c.Upstreams[0].ToolPrefix
		if got != tc.want {
			t.Errorf("%q (%s): tool_prefix %q, want %q", tc.name, tc.prefix, got, tc.want)
		}
		if len(got) > 64 {
			t.Errorf("%q: tool_prefix %q is longer than 64", tc.name, got)
		}
		// The default is a valid tool_prefix: the effective settings load.
		out, err := c.Effective()
		if err != nil {
			t.Fatal(err)
		}
		back, err := parse(string(out))
		if err != nil {
			t.Fatalf("%q: effective settings do not load: %v\n%s", tc.name, err, out)
		}
		if back.Upstreams[0].ToolPrefix != got {
			t.Errorf("%q: round trip gives %q", tc.name, back.Upstreams[0].ToolPrefix)
		}
	}
	if got := FromCatalog("/data/tools.jsonl").Upstreams[0].ToolPrefix; got != "tools__" {
		t.Errorf("FromCatalog: tool_prefix %q, want tools__", got)
	}
}

func TestSessions(t *testing.T) {
	fixedEnv(t)
	cases := []struct {
		name, src string
		want      SessionMode
	}{
		{"command default", "{name: a, command: [srv]}", SessionsShared},
		{"url default", "{name: a, url: 'http://h/mcp'}", SessionsShared},
		{"sse default", "{name: a, sse: 'http://h/sse'}", SessionsShared},
		{"catalog default", "{name: a, catalog: c.json}", ""},
		{"command shared", "{name: a, command: [srv], sessions: shared}", SessionsShared},
		{"command per_client", "{name: a, command: [srv], sessions: per_client}", SessionsPerClient},
		{"url per_client", "{name: a, url: 'http://h/mcp', sessions: per_client}", SessionsPerClient},
		{"sse per_client", "{name: a, sse: 'http://h/sse', sessions: per_client}", SessionsPerClient},
		{"disabled per_client", "{name: a, command: [srv], sessions: per_client, enabled: false}", SessionsPerClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse("upstreams: [" + tc.src + "]")
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Upstreams[0].Sessions; got != tc.want {
				t.Fatalf("sessions %q, want %q", got, tc.want)
			}
			// The effective settings show it (not for a catalog) and load back.
			out, err := c.Effective()
			if err != nil {
				t.Fatal(err)
			}
			shown := strings.Contains(string(out), "\n    sessions: "+string(tc.want)+"\n")
			if shown != (tc.want != "") || (tc.want == "" && strings.Contains(string(out), "\n    sessions:")) {
				t.Fatalf("effective settings:\n%s", out)
			}
			back, err := parse(string(out))
			if err != nil {
				t.Fatalf("effective settings do not load: %v\n%s", err, out)
			}
			if back.Upstreams[0].Sessions != tc.want {
				t.Fatalf("round trip gives %q", back.Upstreams[0].Sessions)
			}
		})
	}
	if got := FromCatalog("/data/tools.jsonl").Upstreams[0].Sessions; got != "" {
		t.Errorf("FromCatalog: sessions %q, want none", got)
	}
	invalid := []struct {
		name, src, want string
	}{
		{"unknown mode", "upstreams:\n  - name: a\n    command: [x]\n    sessions: exclusive",
			"quiver.yaml:4:5: upstreams[0].sessions: must be one of shared, per_client"},
		{"case", "upstreams: [{name: a, url: 'http://h', sessions: Shared}]",
			"quiver.yaml:1:40: upstreams[0].sessions: must be one of shared, per_client"},
		{"empty", "upstreams: [{name: a, url: 'http://h', sessions: ''}]",
			"quiver.yaml:1:40: upstreams[0].sessions: must be one of shared, per_client"},
		{"type", "upstreams: [{name: a, sse: 'http://h', sessions: true}]",
			"quiver.yaml:1:40: upstreams[0].sessions: must be one of shared, per_client"},
		{"catalog", "upstreams:\n  - {name: a, command: [x]}\n  - name: b\n    catalog: c.json\n    sessions: shared",
			"quiver.yaml:5:5: upstreams[1].sessions: is only valid with command, url or sse (a catalog upstream has no upstream session)"},
		{"catalog per_client", "upstreams: [{name: a, catalog: c.json, sessions: per_client}]",
			"quiver.yaml:1:40: upstreams[0].sessions: is only valid with command, url or sse (a catalog upstream has no upstream session)"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.src)
			if c != nil {
				t.Fatalf("accepted: %+v", c)
			}
			assertErr(t, err, tc.want)
		})
	}
}

func TestFirewallOffFor(t *testing.T) {
	fixedEnv(t)
	cases := []struct {
		name, src string
		want      []string
	}{
		{"absent", "firewall: {max_inline_tokens: 100}", nil},
		{"empty", "firewall: {off_for: []}", nil},
		{"globs", "firewall:\n  off_for: [\"files:read_*\", echo, \"gh:list_?\", \"db:[ab]*\"]",
			[]string{"files:read_*", "echo", "gh:list_?", "db:[ab]*"}},
		{"with enabled false", "firewall: {enabled: false, off_for: [\"*\"]}", []string{"*"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.Firewall.OffFor, tc.want) {
				t.Fatalf("off_for %q, want %q", c.Firewall.OffFor, tc.want)
			}
			out, err := c.Effective()
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil && !strings.Contains(string(out), "\n  off_for: []\n") {
				t.Fatalf("effective settings do not show off_for: []:\n%s", out)
			}
			back, err := parse(string(out))
			if err != nil {
				t.Fatalf("effective settings do not load: %v\n%s", err, out)
			}
			if !reflect.DeepEqual(back.Firewall.OffFor, tc.want) {
				t.Fatalf("round trip gives %q", back.Firewall.OffFor)
			}
		})
	}
	invalid := []struct {
		name, src, want string
	}{
		{"bad glob", "firewall:\n  off_for: [echo, 'files:[']",
			"quiver.yaml:2:19: firewall.off_for[1]: is not a valid glob: syntax error in pattern"},
		{"empty glob", "firewall: {off_for: ['']}", "quiver.yaml:1:22: firewall.off_for[0]: must not be empty"},
		{"not a list", "firewall: {off_for: echo}", "quiver.yaml:1:12: firewall.off_for: must be a list, got a string"},
		{"not a string", "firewall: {off_for: [1]}", "quiver.yaml:1:22: firewall.off_for[0]: must be a string, got an integer"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(tc.src)
			if c != nil {
				t.Fatalf("accepted: %+v", c)
			}
			assertErr(t, err, tc.want)
		})
	}
}

// strict_args defaults to the environment: on in prod, off in dev; the
// file and an upstream's own setting override it.
func TestStrictArgsDefault(t *testing.T) {
	fixedEnv(t)
	for _, tc := range []struct {
		yaml     string
		top, ups bool
	}{
		{"environment: prod\nupstreams: [{name: a, url: 'https://a.example/mcp'}]", true, true},
		{"environment: dev\nupstreams: [{name: a, url: 'https://a.example/mcp'}]", false, false},
		{"environment: dev\nstrict_args: true\nupstreams: [{name: a, url: 'https://a.example/mcp'}]", true, true},
		{"environment: prod\nupstreams: [{name: a, url: 'https://a.example/mcp', strict_args: false}]", true, false},
		{"environment: dev\nupstreams: [{name: a, url: 'https://a.example/mcp', strict_args: true}]", false, true},
	} {
		c, err := Parse("quiver.yaml", []byte(tc.yaml), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if c.StrictArgs != tc.top || c.Upstreams[0].Strict(c) != tc.ups {
			t.Errorf("%s: strict_args %v, upstream %v; want %v, %v", tc.yaml, c.StrictArgs, c.Upstreams[0].Strict(c), tc.top, tc.ups)
		}
	}
	if c := FromCatalog("x.json"); c.StrictArgs {
		t.Error("FromCatalog (dev) has strict_args on")
	}
}

func TestCheckTransport(t *testing.T) {
	fixedEnv(t)
	for _, tc := range []struct {
		ups string
		bad bool
	}{
		{"{name: a, url: 'http://api.example/mcp'}", true},
		{"{name: a, url: 'HTTP://10.1.2.3:80/mcp'}", true},
		{"{name: a, sse: 'http://[2001:db8::1]/sse'}", true},
		{"{name: a, url: 'http://api.example/mcp', enabled: false}", false},
		{"{name: a, url: 'https://api.example/mcp'}", false},
		{"{name: a, url: 'http://127.0.0.1:9/mcp'}", false},
		{"{name: a, url: 'http://localhost:9/mcp'}", false},
		{"{name: a, url: 'http://[::1]:9/mcp'}", false},
	} {
		c, err := Parse("q.yaml", []byte("upstreams: ["+tc.ups+"]"), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		err = c.CheckTransport()
		if (err != nil) != tc.bad || (err != nil && !errors.Is(err, ErrInsecureUpstream)) {
			t.Errorf("%s: %v", tc.ups, err)
		}
		c.Insecure = true
		if err := c.CheckTransport(); err != nil {
			t.Errorf("%s with insecure: %v", tc.ups, err)
		}
	}
}

// TestCommandHomeExpansion: ~ and ${HOME} in a command's words are the
// home directory; other words and ~user are left alone.
func TestCommandHomeExpansion(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	cfg, err := Parse("q.yaml", []byte(`environment: dev
upstreams:
  - name: a
    command: [~/bin/server, --root, "${HOME}/data", --x=~/no, ~other/x, "~", plain]
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/home/op/bin/server", "--root", "/home/op/data", "--x=~/no", "~other/x", "/home/op", "plain"}
	if got := cfg.Upstreams[0].Command; !reflect.DeepEqual(got, want) {
		t.Fatalf("command = %q, want %q", got, want)
	}
	t.Setenv("HOME", "")
	if _, err := Parse("q.yaml", []byte("environment: dev\nstate_dir: /tmp/s\nupstreams: [{name: a, command: [~/bin/server]}]\n"), t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "upstreams[0].command[0]: uses ~ or ${HOME} but the home directory is not known") {
		t.Fatalf("without HOME: %v", err)
	}
}

// TestCheckPrograms: a program that is not on PATH, or a path that is not
// an executable file, names the upstream's command; disabled upstreams
// and other transports are not checked.
func TestCheckPrograms(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	load := func(cmd string) *Config {
		t.Helper()
		cfg, err := Parse(filepath.Join(dir, "q.yaml"), []byte(`environment: dev
upstreams:
  - {name: off, command: [not-there-either], enabled: false}
  - {name: web, url: "http://127.0.0.1:1/mcp"}
  - {name: a, command: [`+cmd+`]}
`), dir)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for cmd, want := range map[string]string{
		"sh":                         "",
		"./server":                   "",
		filepath.Join(dir, "server"): "",
		"no-such-program-xyz":        `upstreams[2].command[0]: "no-such-program-xyz" is not on PATH (upstream "a")`,
		"./absent":                   `upstreams[2].command[0]: "` + filepath.Join(dir, "absent") + `" is not an executable file`,
	} {
		err := load(cmd).CheckPrograms(nil)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", cmd, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrInvalid)):
			t.Errorf("%s: %v, want %q", cmd, err, want)
		}
	}
}

// TestLoadClientFile: an MCP client's file loads converted, in dev unless
// prod is asked for, and its errors name the file and the client's key.
func TestLoadClientFile(t *testing.T) {
	t.Setenv("HOME", "/home/op")
	dir := t.TempDir()
	path := filepath.Join(dir, ".mcp.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"files": {"type": "stdio", "command": "npx", "args": ["-y", "srv", "."]},
		"api": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Imported == nil || cfg.Imported.Client != "Claude Code" || cfg.Environment != guard.EnvDev || len(cfg.Upstreams) != 2 {
		t.Fatalf("imported %+v environment %s", cfg.Imported, cfg.Environment)
	}
	if got := cfg.Upstreams[0].Command; !reflect.DeepEqual(got, []string{"npx", "-y", "srv", dir}) || cfg.Upstreams[0].Sandbox != nil {
		t.Errorf("files: %q sandbox %v", got, cfg.Upstreams[0].Sandbox)
	}
	if c := cfg.Upstreams[1].Credentials; c.BearerEnv != "API_TOKEN" {
		t.Errorf("api credentials %+v", c)
	}
	prod, err := LoadWith(path, LoadOptions{Environment: guard.EnvProd})
	if err != nil {
		t.Fatal(err)
	}
	if sb := prod.Upstreams[0].Sandbox; prod.Environment != guard.EnvProd || sb == nil || !reflect.DeepEqual(sb.FS.Write, []string{dir}) {
		t.Errorf("prod: %s %+v", prod.Environment, sb)
	}
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"files": {"command": "npx", "headers": {}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrInvalid) || err.Error() != path+": mcpServers.files.headers: is only valid with url" {
		t.Errorf("err = %v", err)
	}
}
