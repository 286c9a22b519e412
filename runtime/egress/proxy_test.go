package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// proxyRig serves a Proxy on a Unix socket and counts its refusals.
type proxyRig struct {
	sock   string
	mu     sync.Mutex
	denied []string
}

func newProxyRig(t *testing.T, allow ...string) *proxyRig {
	t.Helper()
	r := &proxyRig{sock: t.TempDir() + "/p.sock"}
	p, err := NewProxy(allow, ProxyOptions{OnDeny: func(host, port, reason string) {
		r.mu.Lock()
		r.denied = append(r.denied, host+":"+port+" "+reason)
		r.mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", r.sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// client is an HTTP client whose proxy is the rig.
func (r *proxyRig) client() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", r.sock)
		},
	}}
}

func origin(t *testing.T, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, body) })}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func get(c *http.Client, u string) (string, error) {
	resp, err := c.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), nil
}

func TestProxyPlainHTTP(t *testing.T) {
	ok, no := origin(t, "ok-body"), origin(t, "no-body")
	r := newProxyRig(t, ok)
	c := r.client()
	if b, err := get(c, "http://"+ok+"/x"); err != nil || b != "ok-body" {
		t.Fatalf("allowed: %q %v", b, err)
	}
	if b, err := get(c, "http://"+no+"/x"); err == nil || strings.Contains(b, "no-body") {
		t.Fatalf("denied host reached: %q %v", b, err)
	}
	// A name allowed by a name rule but resolving to loopback is refused.
	_, port, _ := net.SplitHostPort(ok)
	r2 := newProxyRig(t, "localhost")
	if b, err := get(r2.client(), "http://localhost:"+port+"/"); err == nil {
		t.Fatalf("a name resolving to loopback was let through: %q", b)
	}
	r2.mu.Lock()
	defer r2.mu.Unlock()
	if len(r2.denied) == 0 || !strings.Contains(r2.denied[0], "internal address") {
		t.Errorf("denied = %v", r2.denied)
	}
}

func TestProxyConnect(t *testing.T) {
	ok, no := origin(t, "ok-body"), origin(t, "no-body")
	r := newProxyRig(t, ok)
	connect := func(target string) (string, error) {
		conn, err := net.Dial("unix", r.sock)
		if err != nil {
			return "", err
		}
		defer conn.Close()
		fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("status %d", resp.StatusCode)
		}
		fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
		inner, err := http.ReadResponse(br, nil)
		if err != nil {
			return "", err
		}
		defer inner.Body.Close()
		b, _ := io.ReadAll(inner.Body)
		return string(b), nil
	}
	if b, err := connect(ok); err != nil || b != "ok-body" {
		t.Fatalf("allowed CONNECT: %q %v", b, err)
	}
	if b, err := connect(no); err == nil {
		t.Fatalf("denied CONNECT tunnelled: %q", b)
	}
}

func TestProxyCheck(t *testing.T) {
	p, err := NewProxy([]string{"10.0.0.5:443", "*.example.org", "93.184.215.14"}, ProxyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dest string
		ok   bool
	}{
		{"10.0.0.5:443", true}, // an internal address named explicitly
		{"10.0.0.5:80", false},
		{"10.0.0.6:443", false},
		{"[::ffff:93.184.215.14]:80", true},
		{"example.org:443", false}, // the suffix rule admits subdomains only
		{"no-port", false},
		{"127.0.0.1:0", false},
	} {
		_, err := p.Check(context.Background(), c.dest)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrDenied)) {
			t.Errorf("%s: %v, want ok=%v", c.dest, err, c.ok)
		}
	}
	if _, err := NewProxy([]string{"http://x"}, ProxyOptions{}); err == nil {
		t.Error("a URL was accepted as an allowlist entry")
	}
}

// An egress block (incident mode) refuses destinations the allowlist
// admits, while it holds, and only then.
func TestProxyBlocked(t *testing.T) {
	var mu sync.Mutex
	blocked := true
	var denied []string
	p, err := NewProxy([]string{"127.0.0.1"}, ProxyOptions{
		Blocked: func(context.Context) bool { mu.Lock(); defer mu.Unlock(); return blocked },
		OnDeny:  func(host, port, reason string) { denied = append(denied, reason) },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := p.Check(ctx, "127.0.0.1:8080"); !errors.Is(err, ErrDenied) || len(denied) != 1 || !strings.Contains(denied[0], "incident") {
		t.Fatalf("blocked: %v %v", err, denied)
	}
	mu.Lock()
	blocked = false
	mu.Unlock()
	if addr, err := p.Check(ctx, "127.0.0.1:8080"); err != nil || addr != "127.0.0.1:8080" {
		t.Fatalf("unblocked: %q %v", addr, err)
	}
}
