// Package sandbox builds the *exec.Cmd of a local (`command`) upstream:
// with a minimal environment always, and, when the upstream has a sandbox
// policy, inside bubblewrap (spec 001 MUST 5 and MUST 8). runtime/upstream
// asks a [Launcher] for the command to start; nothing else knows how it is
// isolated.
//
// # Environment (every command upstream)
//
// A child gets PATH (a fixed safe default, preceded by the directories of
// its resolved program and of node/python found on quiver's PATH), HOME (a
// private directory: a tmpfs inside the sandbox; unsandboxed, a
// per-upstream directory under the state directory, or a temporary one),
// LANG (quiver's, default C.UTF-8), TZ (quiver's, when set), TMPDIR, and
// the entries the caller resolved for it (the upstream's declared env and
// the values of the names in sandbox.env). Nothing else of quiver's
// environment reaches it: not the admin token, not a JWT secret, not
// another upstream's credentials.
//
// # Sandbox (bubblewrap)
//
// The child runs under bwrap with new user, mount, pid, ipc, uts, cgroup
// and network namespaces (--unshare-all --unshare-user), --die-with-parent
// and --new-session, all capabilities dropped. Its root is empty but for:
// read-only binds of the system directories needed to run (/usr, /bin,
// /lib*, /sbin, the /etc pieces the dynamic loader, TLS and time zones
// need), of the program's and its interpreter's install prefix when they
// live elsewhere, and of the policy's fs.read paths; read-write binds of
// the policy's fs.write paths (the only writable places besides tmpfs); a
// private /tmp and HOME (tmpfs), a /proc of its own pid namespace and a
// private /dev. Binds are applied shortest path first, so a write path
// inside a read path stays writable and vice versa.
//
// # Resource limits
//
// bwrap starts a tiny helper first: this very binary re-executed with the
// hidden argument [HelperArg] (bound read-only into the sandbox). The
// helper applies the rlimits with setrlimit(2): RLIMIT_DATA for memory
// (not RLIMIT_AS, which breaks V8 and Go runtimes that reserve large
// address ranges they never use), RLIMIT_NPROC, RLIMIT_NOFILE and
// RLIMIT_CPU, and then execs the command. Limits set this way are
// inherited by every process the command starts and cannot be raised
// again without privileges. A re-exec was chosen over prlimit(1) because
// the helper is needed anyway for the network forwarder, and because it
// depends on nothing installed.
//
// # Network
//
// net: none leaves the child in an empty network namespace (loopback only,
// its own). net: {allow: [...]} adds exactly one way out: quiver runs an
// egress proxy ([egress.Proxy]: HTTP CONNECT and plain HTTP forwarding,
// the allowlist's matching rules, resolved-address checks) on a Unix
// socket in a private directory, which is bound into the sandbox. The
// helper listens on 127.0.0.1:[ProxyPort] of the sandbox's own loopback and
// relays each connection to that socket, and the child gets HTTP_PROXY,
// HTTPS_PROXY and ALL_PROXY (both cases) pointing there. A program that
// ignores the proxy variables has no route anywhere, so the allowlist
// holds whatever the server does. A Unix socket (rather than sharing the
// host's network) keeps the sandbox's network namespace empty; the
// in-sandbox forwarder exists because almost no HTTP client speaks to a
// proxy over a Unix socket.
package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/runtime/egress"
)

// Kinds of sandbox reported by Applied.Mode.
const (
	ModeBwrap = "bwrap" // isolated by bubblewrap
	ModeOff   = "off"   // explicitly off, with a reason
	ModeNone  = "none"  // no sandbox configured (dev only)
)

// DefaultPath is the PATH of every child, after the directories of its
// program and interpreters.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// ProxyPort is the port of the in-sandbox forwarder to the egress proxy on
// the sandbox's own loopback (a private network namespace, so a fixed port
// collides with nothing).
const ProxyPort = 3128

// Sandbox paths of the helper and the proxy socket.
const (
	helperPath  = "/run/quiver/init"
	socketPath  = "/run/quiver/egress.sock"
	sandboxHome = "/home/quiver"
	sandboxTmp  = "/tmp"
)

// Default resource limits, used for a zero field of Limits.
const (
	DefaultMemory    = 1 << 30 // RLIMIT_DATA, bytes
	DefaultProcesses = 256
	DefaultOpenFiles = 1024
	DefaultCPUTime   = time.Hour
)

// Policy is the sandbox of one command upstream.
type Policy struct {
	// Off, when not empty, turns the sandbox off for the reason given;
	// every other field is then ignored.
	Off string
	// Read are absolute paths bound read-only, on top of the system paths.
	Read []string
	// Write are absolute paths bound read-write: the only writable places
	// besides the private /tmp and HOME.
	Write []string
	// Allow, when not empty, is the egress allowlist (host, "*.suffix",
	// IP literal, each with an optional ":port") reached through the
	// egress proxy; empty means no network at all.
	Allow []string
	// Limits are the resource limits.
	Limits Limits
}

// Limits are rlimits applied to the sandboxed process tree; zero means
// the default.
type Limits struct {
	Memory    int64         // bytes of data segment (RLIMIT_DATA)
	Processes int64         // processes and threads (RLIMIT_NPROC)
	OpenFiles int64         // open file descriptors (RLIMIT_NOFILE)
	CPUTime   time.Duration // CPU time of each process (RLIMIT_CPU)
}

// withDefaults fills zero limits.
func (l Limits) withDefaults() Limits {
	if l.Memory <= 0 {
		l.Memory = DefaultMemory
	}
	if l.Processes <= 0 {
		l.Processes = DefaultProcesses
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.CPUTime <= 0 {
		l.CPUTime = DefaultCPUTime
	}
	return l
}

// Spec is one command to start.
type Spec struct {
	// Name is the upstream's name, for messages.
	Name string
	// Argv is the program and its arguments (no shell).
	Argv []string
	// Env holds the KEY=VALUE entries the child gets on top of the
	// minimal environment (declared env, resolved sandbox.env names).
	Env []string
	// Dir is the working directory ("" = HOME inside a sandbox, the
	// parent's otherwise); a sandbox needs it inside fs.read or fs.write.
	Dir string
	// Home is the HOME of an unsandboxed child, created when missing; ""
	// makes a temporary one, removed by Process.Close.
	Home string
	// Policy is the sandbox; nil (or Off set) starts the command without
	// one.
	Policy *Policy
}

// Applied describes the isolation a command runs under, for receipts.
type Applied struct {
	// Mode is ModeBwrap, ModeOff or ModeNone.
	Mode string
	// FS is workspace_only (writable binds), read_only (no writable
	// bind) or none (spec 001 receipt values).
	FS string
	// Net is block_all, allowlist or none.
	Net string
	// Detail is "ro:...; rw:...; net:none|proxy:<n> hosts" (a sha256
	// prefix when longer than 200 bytes), or the reason of ModeOff.
	Detail string
}

// Describe returns what p (nil: no sandbox) applies.
func Describe(p *Policy) Applied {
	switch {
	case p == nil:
		return Applied{Mode: ModeNone, FS: "none", Net: "none"}
	case p.Off != "":
		return Applied{Mode: ModeOff, FS: "none", Net: "none", Detail: "off: " + p.Off}
	}
	a := Applied{Mode: ModeBwrap, FS: "read_only", Net: "block_all"}
	if len(p.Write) > 0 {
		a.FS = "workspace_only"
	}
	net := "net:none"
	if len(p.Allow) > 0 {
		a.Net = "allowlist"
		net = fmt.Sprintf("net:proxy:%d hosts", len(p.Allow))
	}
	d := fmt.Sprintf("ro:%s; rw:%s; %s", strings.Join(p.Read, ","), strings.Join(p.Write, ","), net)
	if len(d) > 200 {
		sum := sha256.Sum256([]byte(d))
		d = "sha256:" + hex.EncodeToString(sum[:8]) + "; " + net
	}
	a.Detail = d
	return a
}

// ErrUnavailable is matched (errors.Is) by the error of a sandbox that
// cannot be set up on this host (bwrap missing, user namespaces refused).
var ErrUnavailable = errors.New("sandbox unavailable")

// Launcher builds the commands of command upstreams. Its zero value is
// not usable; use New.
type Launcher struct {
	bwrap   string
	helper  string
	look    func(string) (string, error)
	getenv  func(string) string
	logger  *slog.Logger
	denied  func(upstream, host, port, reason string)
	blocked func(context.Context) bool

	mu      sync.Mutex
	checked map[string]error // bwrap path -> result of the user-namespace probe
}

// Options configure a Launcher. Every field is optional.
type Options struct {
	// LookPath finds programs on quiver's PATH (default exec.LookPath);
	// tests override it to simulate a missing bwrap.
	LookPath func(string) (string, error)
	// Getenv reads quiver's environment for LANG, TZ and PATH lookups
	// (default os.Getenv). Nothing else is read from it.
	Getenv func(string) string
	// Helper is the binary re-executed inside the sandbox with HelperArg
	// (default os.Executable()); its main must call RunHelper first.
	Helper string
	// Logger receives the egress proxy's refusals (default slog.Default()).
	Logger *slog.Logger
	// OnEgressDenied, when set, is called for every destination the
	// egress proxy of upstream refuses (from the proxy's goroutines).
	OnEgressDenied func(upstream, host, port, reason string)
	// EgressBlocked, when set, is asked before every destination the
	// egress proxies check: while it reports true they refuse everything
	// (incident mode's egress block).
	EgressBlocked func(context.Context) bool
}

// New returns a Launcher.
func New(o Options) *Launcher {
	l := &Launcher{look: o.LookPath, getenv: o.Getenv, helper: o.Helper, logger: o.Logger, denied: o.OnEgressDenied, blocked: o.EgressBlocked, checked: map[string]error{}}
	if l.look == nil {
		l.look = exec.LookPath
	}
	if l.getenv == nil {
		l.getenv = os.Getenv
	}
	if l.logger == nil {
		l.logger = slog.Default()
	}
	return l
}

// Check reports, at start, whether the sandbox of s can be set up: bwrap
// found, user namespaces permitted (probed once per bwrap binary), the
// paths of the policy present, the working directory inside a bind. A nil
// or Off policy needs nothing. The error is one line naming the upstream
// and the fix.
func (l *Launcher) Check(ctx context.Context, s Spec) error {
	name, p := s.Name, s.Policy
	if p == nil || p.Off != "" {
		return nil
	}
	bw, err := l.bwrapPath()
	if err != nil {
		return fmt.Errorf("upstream %q: sandbox: %w: bwrap (bubblewrap) not found on PATH; install it (apt-get install bubblewrap) or set sandbox: {off: \"<reason>\"}", name, ErrUnavailable)
	}
	if d := filepath.Clean(s.Dir); s.Dir != "" && !slices.ContainsFunc(append(slices.Clone(p.Read), p.Write...), func(b string) bool { return within(d, filepath.Clean(b)) }) {
		return fmt.Errorf("upstream %q: sandbox: its working directory %s is not inside the sandbox; set dir to a path under sandbox.fs.read or fs.write (relative command arguments are taken from it), or bind it", name, d)
	}
	for _, ps := range [][]string{p.Read, p.Write} {
		for _, path := range ps {
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("upstream %q: sandbox: fs path %s: %w", name, path, err)
			}
		}
	}
	for _, a := range p.Allow {
		if _, err := egress.ParseRule(a); err != nil {
			return fmt.Errorf("upstream %q: sandbox: net.allow %q: %w", name, a, err)
		}
	}
	if _, err := l.helperPath(); err != nil {
		return fmt.Errorf("upstream %q: sandbox: %w", name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	probe, done := l.checked[bw]
	if !done {
		probe = probeUserNS(ctx, bw)
		l.checked[bw] = probe
	}
	if probe != nil {
		return fmt.Errorf("upstream %q: sandbox: %w: %w; allow unprivileged user namespaces (e.g. sysctl kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu) or set sandbox: {off: \"<reason>\"}", name, ErrUnavailable, probe)
	}
	return nil
}

// probeUserNS runs /bin/true (or the helper-free equivalent) under bwrap
// with the namespaces a sandbox uses.
func probeUserNS(ctx context.Context, bw string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := []string{"--unshare-all", "--unshare-user", "--die-with-parent"}
	args = append(args, systemBinds(false)...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--", "true")
	cmd := exec.CommandContext(ctx, bw, args...)
	cmd.Env = []string{"PATH=" + DefaultPath}
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i]
		}
		if msg == "" {
			return fmt.Errorf("bwrap cannot create namespaces: %w", err)
		}
		return fmt.Errorf("bwrap cannot create namespaces: %s", msg)
	}
	return nil
}

func (l *Launcher) bwrapPath() (string, error) {
	if l.bwrap != "" {
		return l.bwrap, nil
	}
	p, err := l.look("bwrap")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return p, nil
}

func (l *Launcher) helperPath() (string, error) {
	if l.helper != "" {
		return l.helper, nil
	}
	p, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("locating quiver's own binary for the sandbox helper: %w", err)
	}
	return p, nil
}

// Process is a command built by Launcher.Command. Close it once the
// command has exited: it stops the egress proxy and removes temporary
// directories.
type Process struct {
	// Cmd is the command to start (its Stdin/Stdout are left to the
	// caller; Stderr too).
	Cmd *exec.Cmd
	// Applied is what the command runs under.
	Applied Applied

	closeOnce sync.Once
	closers   []func()
}

// Close releases what the process needed: the egress proxy and its socket
// directory, a temporary HOME. It is idempotent.
func (p *Process) Close() {
	p.closeOnce.Do(func() {
		for i := len(p.closers) - 1; i >= 0; i-- {
			p.closers[i]()
		}
	})
}

// Command returns the command to start for s. ctx bounds the life of the
// egress proxy (as does Process.Close). The error of a sandbox that cannot
// be set up names the upstream and the fix.
func (l *Launcher) Command(ctx context.Context, s Spec) (*Process, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, fmt.Errorf("upstream %q: no program", s.Name)
	}
	if s.Policy == nil || s.Policy.Off != "" {
		return l.plain(s)
	}
	if err := l.Check(ctx, s); err != nil {
		return nil, err
	}
	return l.sandboxed(ctx, s)
}

// plain builds an unsandboxed command with the minimal environment.
func (l *Launcher) plain(s Spec) (*Process, error) {
	p := &Process{Applied: Describe(s.Policy)}
	home := s.Home
	if home == "" {
		d, err := os.MkdirTemp("", "quiver-home-")
		if err != nil {
			return nil, fmt.Errorf("upstream %q: private HOME: %w", s.Name, err)
		}
		home = d
		p.closers = append(p.closers, func() { _ = os.RemoveAll(d) })
	} else if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("upstream %q: private HOME: %w", s.Name, err)
	}
	prog, dirs := l.resolve(s.Argv[0])
	env := l.baseEnv(dirs, home, os.TempDir())
	cmd := exec.Command(prog, s.Argv[1:]...)
	cmd.Env = mergeEnv(env, s.Env)
	cmd.Dir = s.Dir
	p.Cmd = cmd
	return p, nil
}

// resolve finds the program on quiver's PATH (a path with a slash is taken
// as it is) and returns it with the directories a child's PATH should
// start with: the program's own, and node's and python's.
func (l *Launcher) resolve(prog string) (string, []string) {
	var dirs []string
	add := func(p string) {
		d := filepath.Dir(p)
		if !slices.Contains(dirs, d) && !slices.Contains(filepath.SplitList(DefaultPath), d) {
			dirs = append(dirs, d)
		}
	}
	resolved := prog
	if p, err := l.lookIn(prog); err == nil {
		resolved = p
		add(p)
	}
	for _, interp := range interpreters(resolved) {
		if p, err := l.lookIn(interp); err == nil {
			add(p)
		}
	}
	return resolved, dirs
}

// interpreters returns the interpreters program needs on PATH: node for
// node, npx and npm and for scripts whose #! line names node; python3 and
// python likewise.
func interpreters(program string) []string {
	words := []string{filepath.Base(program)}
	if f, err := os.Open(program); err == nil {
		buf := make([]byte, 256)
		n, _ := io.ReadFull(f, buf)
		_ = f.Close()
		if line, _, _ := strings.Cut(string(buf[:n]), "\n"); strings.HasPrefix(line, "#!") {
			for _, w := range strings.Fields(line[2:]) {
				words = append(words, filepath.Base(w))
			}
		}
	}
	var out []string
	for _, w := range words {
		switch {
		case w == "node" || w == "npx" || w == "npm" || w == "nodejs":
			out = append(out, "node")
		case strings.HasPrefix(w, "python") || w == "uv" || w == "uvx" || w == "pip" || w == "pip3":
			out = append(out, "python3", "python")
		}
	}
	return out
}

// lookIn resolves prog against quiver's PATH; absolute or relative paths
// with a slash are made absolute.
func (l *Launcher) lookIn(prog string) (string, error) {
	if strings.ContainsRune(prog, '/') {
		return filepath.Abs(prog)
	}
	return l.look(prog)
}

// baseEnv is the minimal environment.
func (l *Launcher) baseEnv(pathDirs []string, home, tmp string) []string {
	lang := l.getenv("LANG")
	if lang == "" || strings.ContainsRune(lang, 0) {
		lang = "C.UTF-8"
	}
	env := []string{
		"PATH=" + strings.Join(append(slices.Clone(pathDirs), DefaultPath), ":"),
		"HOME=" + home,
		"LANG=" + lang,
		"TMPDIR=" + tmp,
	}
	if tz := l.getenv("TZ"); tz != "" && !strings.ContainsRune(tz, 0) {
		env = append(env, "TZ="+tz)
	}
	return env
}

// mergeEnv returns base with extra's entries appended, an entry of extra
// replacing one of base with the same name.
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	names := map[string]bool{}
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// systemPaths are bound read-only when present; a symlink (merged /usr)
// is recreated as a symlink.
var systemPaths = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcPaths are the /etc pieces a program needs to run: the dynamic
// loader's cache, alternatives (Debian's /usr/bin links point there),
// TLS roots (not /etc/ssl/private), time zones.
var etcPaths = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/pki/tls/certs",
	"/etc/localtime", "/etc/nsswitch.conf",
}

// netEtcPaths are bound only when the sandbox has network (through the
// proxy).
var netEtcPaths = []string{"/etc/resolv.conf", "/etc/hosts"}

// systemBinds returns the bwrap arguments binding the system paths.
func systemBinds(withNet bool) []string {
	var args []string
	for _, p := range systemPaths {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", t, p)
			}
		default:
			args = append(args, "--ro-bind", p, p)
		}
	}
	etc := etcPaths
	if withNet {
		etc = append(slices.Clone(etc), netEtcPaths...)
	}
	for _, p := range etc {
		args = append(args, "--ro-bind-try", p, p)
	}
	return args
}

// underSystem reports whether p is inside a system path bound anyway.
func underSystem(p string) bool {
	for _, s := range systemPaths {
		if within(p, s) {
			return true
		}
	}
	return false
}

// within reports whether p is dir or inside it (both clean and absolute).
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// bind is one user bind.
type bind struct {
	path string
	rw   bool
}

// sandboxed builds the bwrap command.
func (l *Launcher) sandboxed(ctx context.Context, s Spec) (*Process, error) {
	pol := s.Policy
	bw, err := l.bwrapPath()
	if err != nil {
		return nil, err
	}
	helper, err := l.helperPath()
	if err != nil {
		return nil, fmt.Errorf("upstream %q: sandbox: %w", s.Name, err)
	}
	p := &Process{Applied: Describe(pol)}
	ok := false
	defer func() {
		if !ok {
			p.Close()
		}
	}()
	withNet := len(pol.Allow) > 0

	args := []string{
		"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
		"--cap-drop", "ALL", "--hostname", "sandbox",
	}
	args = append(args, systemBinds(withNet)...)
	args = append(args,
		"--proc", "/proc", "--dev", "/dev",
		"--tmpfs", sandboxTmp, "--tmpfs", "/home", "--dir", sandboxHome, "--chmod", "0700", sandboxHome,
	)

	// The program's and interpreters' install prefixes, when outside the
	// system paths: <prefix>/bin/prog -> <prefix>.
	prog, pathDirs := l.resolve(s.Argv[0])
	var binds []bind
	addRO := func(p string) {
		if p == "" || underSystem(p) {
			return
		}
		for _, b := range binds {
			if within(p, b.path) {
				return
			}
		}
		binds = append(binds, bind{path: p})
	}
	for _, d := range append([]string{filepath.Dir(prog)}, pathDirs...) {
		addRO(prefixOf(d))
		if real, err := filepath.EvalSymlinks(d); err == nil {
			addRO(prefixOf(real))
		}
	}
	if real, err := filepath.EvalSymlinks(prog); err == nil && real != prog {
		addRO(prefixOf(filepath.Dir(real)))
	}
	for _, r := range pol.Read {
		binds = append(binds, bind{path: filepath.Clean(r)})
	}
	for _, w := range pol.Write {
		binds = append(binds, bind{path: filepath.Clean(w), rw: true})
	}
	// Shortest first, so that the more specific bind wins; equal paths:
	// the writable one last.
	slices.SortStableFunc(binds, func(a, b bind) int {
		if c := strings.Count(a.path, "/") - strings.Count(b.path, "/"); c != 0 {
			return c
		}
		if a.rw != b.rw {
			if a.rw {
				return 1
			}
			return -1
		}
		return 0
	})
	for _, b := range binds {
		if b.rw {
			args = append(args, "--bind", b.path, b.path)
		} else {
			args = append(args, "--ro-bind", b.path, b.path)
		}
	}
	args = append(args, "--ro-bind", helper, helperPath)

	env := l.baseEnv(pathDirs, sandboxHome, sandboxTmp)
	var hc helperConfig
	lim := pol.Limits.withDefaults()
	hc.Limits = helperLimits{Data: lim.Memory, NProc: lim.Processes, NoFile: lim.OpenFiles, CPUSeconds: int64(lim.CPUTime.Round(time.Second) / time.Second)}
	if withNet {
		sockDir, err := os.MkdirTemp("", "quiver-egress-")
		if err != nil {
			return nil, fmt.Errorf("upstream %q: sandbox: egress socket: %w", s.Name, err)
		}
		p.closers = append(p.closers, func() { _ = os.RemoveAll(sockDir) })
		sock := filepath.Join(sockDir, "egress.sock")
		po := egress.ProxyOptions{Logger: l.logger.With("upstream", s.Name), Blocked: l.blocked}
		if l.denied != nil {
			name := s.Name
			po.OnDeny = func(host, port, reason string) { l.denied(name, host, port, reason) }
		}
		proxy, err := egress.NewProxy(pol.Allow, po)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: sandbox: %w", s.Name, err)
		}
		ln, err := net.Listen("unix", sock)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: sandbox: egress socket: %w", s.Name, err)
		}
		pctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			// Owned by the Process: ends when Close cancels pctx (or
			// ctx ends), which closes the listener.
			defer close(done)
			_ = proxy.Serve(pctx, ln)
		}()
		p.closers = append(p.closers, func() { cancel(); <-done })
		args = append(args, "--ro-bind", sock, socketPath)
		hc.Forward = &helperForward{Listen: "127.0.0.1:" + strconv.Itoa(ProxyPort), Socket: socketPath}
		url := "http://127.0.0.1:" + strconv.Itoa(ProxyPort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
			env = append(env, k+"="+url)
		}
		env = append(env, "NO_PROXY=", "no_proxy=")
	}

	dir := sandboxHome // Check made sure a given Dir is inside a bind
	if s.Dir != "" {
		dir = filepath.Clean(s.Dir)
	}
	args = append(args, "--chdir", dir)

	cfg, err := hc.encode()
	if err != nil {
		return nil, fmt.Errorf("upstream %q: sandbox: %w", s.Name, err)
	}
	args = append(args, "--", helperPath, HelperArg, cfg)
	args = append(args, s.Argv...)
	cmd := exec.Command(bw, args...)
	cmd.Env = mergeEnv(env, s.Env)
	p.Cmd = cmd
	ok = true
	return p, nil
}

// prefixOf returns the install prefix of a bin directory
// (/opt/node/bin -> /opt/node), else the directory itself.
func prefixOf(dir string) string {
	if filepath.Base(dir) == "bin" {
		return filepath.Dir(dir)
	}
	return dir
}
