package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	RunHelper(os.Args)
	os.Exit(m.Run())
}

// needBwrap skips when bubblewrap is not installed; .ci/run installs it.
func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("bwrap (bubblewrap) not installed; .ci/run installs it")
	}
	if err := New(Options{}).Check(context.Background(), Spec{Name: "probe", Policy: &Policy{}}); err != nil {
		t.Skipf("sandbox unavailable here: %v", err)
	}
}

// run starts s's command and returns its stdout, stderr and error.
func run(t *testing.T, l *Launcher, s Spec) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := l.Command(ctx, s)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	defer p.Close()
	var out, errb bytes.Buffer
	p.Cmd.Stdout, p.Cmd.Stderr = &out, &errb
	err = p.Cmd.Run()
	return out.String(), errb.String(), err
}

func TestMinimalEnvironmentUnsandboxed(t *testing.T) {
	t.Setenv("QUIVER_ADMIN_TOKEN", "s3cret-admin")
	t.Setenv("TZ", "UTC")
	home := filepath.Join(t.TempDir(), "home")
	l := New(Options{})
	out, _, err := run(t, l, Spec{Name: "x", Argv: []string{"env"}, Env: []string{"DECLARED=1"}, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		names[k] = v
	}
	for k := range names {
		switch k {
		case "PATH", "HOME", "LANG", "TZ", "TMPDIR", "DECLARED":
		default:
			t.Errorf("unexpected variable %s in the child's environment", k)
		}
	}
	if names["HOME"] != home || names["DECLARED"] != "1" || names["TZ"] != "UTC" {
		t.Errorf("env = %v", names)
	}
	if fi, err := os.Stat(home); err != nil || !fi.IsDir() {
		t.Errorf("HOME not created: %v", err)
	}
}

func TestSandboxBoundaries(t *testing.T) {
	needBwrap(t)
	t.Setenv("QUIVER_ADMIN_TOKEN", "s3cret-admin")
	root := t.TempDir()
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(root, "in.txt"), []byte("inside"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("outside"), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "link")))
	script := fmt.Sprintf(`
cat %[1]s/in.txt && echo READ_IN_OK
cat %[2]s/secret.txt 2>/dev/null && echo READ_OUT_OK
cat %[1]s/link 2>/dev/null && echo SYMLINK_OK
cat /etc/shadow 2>/dev/null && echo SHADOW_OK
echo x > %[1]s/new.txt && echo WRITE_IN_OK
echo x > %[2]s/new.txt 2>/dev/null && echo WRITE_OUT_OK
echo x > /usr/new.txt 2>/dev/null && echo WRITE_USR_OK
ls /proc | grep -qx 1 && echo PROC_OK
env
grep -E 'Max (data size|processes|open files|cpu time)' /proc/self/limits
`, root, outside)
	l := New(Options{})
	out, stderr, err := run(t, l, Spec{Name: "t", Argv: []string{"bash", "-c", script}, Dir: root,
		Policy: &Policy{Write: []string{root}, Limits: Limits{Memory: 256 << 20, Processes: 64, OpenFiles: 100, CPUTime: time.Minute}}})
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	for _, want := range []string{"READ_IN_OK", "WRITE_IN_OK", "PROC_OK", "HOME=/home/quiver"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	for _, bad := range []string{"READ_OUT_OK", "SYMLINK_OK", "SHADOW_OK", "WRITE_OUT_OK", "WRITE_USR_OK", "s3cret", "QUIVER_ADMIN_TOKEN"} {
		if strings.Contains(out, bad) {
			t.Errorf("sandbox let through %s:\n%s", bad, out)
		}
	}
	for _, lim := range []string{"Max data size             268435456", "Max processes             64", "Max open files            100", "Max cpu time              60"} {
		if !strings.Contains(out, lim) {
			t.Errorf("limit %q not applied:\n%s", lim, out)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "new.txt")); err == nil {
		t.Error("a file was written outside the roots")
	}
}

func TestSandboxNetwork(t *testing.T) {
	needBwrap(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl not installed")
	}
	allowed := httpServer(t, "allowed-body")
	denied := httpServer(t, "denied-body")
	script := fmt.Sprintf(`
curl -s --max-time 5 http://%[1]s/ ; echo
curl -s --max-time 5 http://%[2]s/ ; echo
curl -s --noproxy '*' --max-time 5 http://%[1]s/ && echo DIRECT_OK
curl -s --max-time 5 http://localhost:%[3]s/ ; echo
`, allowed, denied, port(allowed))
	l := New(Options{})
	out, stderr, err := run(t, l, Spec{Name: "n", Argv: []string{"bash", "-c", script}, Policy: &Policy{Allow: []string{allowed}}})
	if err != nil {
		t.Fatalf("%v: %s", err, stderr)
	}
	if !strings.Contains(out, "allowed-body") {
		t.Errorf("allowed host not reached:\n%s\n%s", out, stderr)
	}
	if strings.Contains(out, "denied-body") || strings.Contains(out, "DIRECT_OK") {
		t.Errorf("egress not confined:\n%s", out)
	}
	if strings.Count(out, "allowed-body") != 1 {
		t.Errorf("a name resolving to loopback was let through:\n%s", out)
	}

	// net: none: not even the proxy.
	out, _, _ = run(t, l, Spec{Name: "n", Argv: []string{"bash", "-c", script}, Policy: &Policy{}})
	if strings.Contains(out, "-body") || strings.Contains(out, "DIRECT_OK") {
		t.Errorf("net none let something through:\n%s", out)
	}
}

func TestUnavailable(t *testing.T) {
	l := New(Options{LookPath: func(p string) (string, error) {
		if p == "bwrap" {
			return "", exec.ErrNotFound
		}
		return exec.LookPath(p)
	}})
	_, err := l.Command(context.Background(), Spec{Name: "files", Argv: []string{"true"}, Policy: &Policy{}})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `upstream "files"`) || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Fatalf("err = %v", err)
	}
	// Off needs nothing.
	p, err := l.Command(context.Background(), Spec{Name: "files", Argv: []string{"true"}, Policy: &Policy{Off: "trusted"}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if p.Applied.Mode != ModeOff || !strings.Contains(p.Applied.Detail, "trusted") {
		t.Errorf("applied = %+v", p.Applied)
	}
}

func TestWorkingDirectoryOutside(t *testing.T) {
	needBwrap(t)
	err := New(Options{}).Check(context.Background(), Spec{Name: "files", Dir: "/etc", Policy: &Policy{Write: []string{t.TempDir()}}})
	if err == nil || !strings.Contains(err.Error(), `upstream "files": sandbox: its working directory /etc is not inside the sandbox`) {
		t.Fatalf("err = %v", err)
	}
}

func TestDescribe(t *testing.T) {
	a := Describe(&Policy{Read: []string{"/a"}, Write: []string{"/w"}, Allow: []string{"x.org", "y.org"}})
	if a.Mode != ModeBwrap || a.FS != "workspace_only" || a.Net != "allowlist" || a.Detail != "ro:/a; rw:/w; net:proxy:2 hosts" {
		t.Errorf("%+v", a)
	}
	if a := Describe(&Policy{}); a.FS != "read_only" || a.Net != "block_all" {
		t.Errorf("%+v", a)
	}
	if a := Describe(nil); a.Mode != ModeNone {
		t.Errorf("%+v", a)
	}
	long := Describe(&Policy{Read: []string{strings.Repeat("/x", 200)}})
	if !strings.HasPrefix(long.Detail, "sha256:") {
		t.Errorf("%+v", long)
	}
}

func httpServer(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func port(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
