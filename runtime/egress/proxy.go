package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Proxy is the egress proxy of a sandboxed upstream: an HTTP forward
// proxy (CONNECT for TLS and anything else, absolute-URL requests for
// plain HTTP) that lets through only destinations an allowlist admits.
//
// A host name must match a name rule (exact or "*.suffix") with the port;
// it is then resolved by the proxy, and refused if any address it
// resolves to is loopback, private, link-local, unspecified or multicast,
// unless an IP rule names that address explicitly, so a DNS name cannot
// point into the host's own services. The proxy dials the address it
// checked (no second resolution). An IP literal must match an IP rule.
type Proxy struct {
	rules    []Rule
	resolver *net.Resolver
	dialer   net.Dialer
	logger   *slog.Logger
	onDeny   func(host, port, reason string)
	blocked  func(context.Context) bool
}

// ProxyOptions configure a Proxy; every field is optional.
type ProxyOptions struct {
	// Logger receives a warning for every refused destination.
	Logger *slog.Logger
	// Resolver resolves host names (default net.DefaultResolver).
	Resolver *net.Resolver
	// OnDeny, when set, is called for every refused destination.
	OnDeny func(host, port, reason string)
	// Blocked, when set, is asked first for every destination: while it
	// reports true, every destination is refused (an incident's egress
	// block).
	Blocked func(context.Context) bool
}

// NewProxy returns a proxy admitting the allowlist entries (see
// ParseRule).
func NewProxy(allow []string, o ProxyOptions) (*Proxy, error) {
	p := &Proxy{resolver: o.Resolver, logger: o.Logger, onDeny: o.OnDeny, blocked: o.Blocked, dialer: net.Dialer{Timeout: 15 * time.Second}}
	for _, a := range allow {
		r, err := ParseRule(a)
		if err != nil {
			return nil, fmt.Errorf("egress allowlist entry %q: %w", a, err)
		}
		p.rules = append(p.rules, r)
	}
	if p.resolver == nil {
		p.resolver = net.DefaultResolver
	}
	if p.logger == nil {
		p.logger = slog.Default()
	}
	return p, nil
}

// ErrDenied is matched (errors.Is) by the error of a refused destination.
var ErrDenied = errors.New("egress destination not allowed")

// Serve serves proxy requests on ln until ctx ends; it closes ln.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.DialContext,
		ForceAttemptHTTP2:     false,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	}
	defer tr.CloseIdleConnections()
	srv := &http.Server{
		Handler:           &proxyHandler{p: p, tr: tr},
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// DialContext dials hostport ("host:port") if the allowlist admits it,
// at the address that was checked.
func (p *Proxy) DialContext(ctx context.Context, network, hostport string) (net.Conn, error) {
	addr, err := p.Check(ctx, hostport)
	if err != nil {
		return nil, err
	}
	return p.dialer.DialContext(ctx, network, addr)
}

// Check returns the "ip:port" to dial for hostport, or an error matching
// ErrDenied when the allowlist does not admit it.
func (p *Proxy) Check(ctx context.Context, hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", p.deny(hostport, "", "malformed destination")
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if p.blocked != nil && p.blocked(ctx) {
		return "", p.deny(host, port, "egress blocked (incident mode)")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", p.deny(host, port, "bad port")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		if !p.allowed(a.String(), port) {
			return "", p.deny(host, port, "not in the allowlist")
		}
		return net.JoinHostPort(a.String(), port), nil
	}
	if !p.allowed(host, port) {
		return "", p.deny(host, port, "not in the allowlist")
	}
	addrs, err := p.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return "", p.deny(host, port, "does not resolve")
	}
	for _, a := range addrs {
		a = a.Unmap()
		if internal(a) && !p.allowedIP(a, port) {
			return "", p.deny(host, port, "resolves to an internal address "+a.String())
		}
	}
	return net.JoinHostPort(addrs[0].Unmap().String(), port), nil
}

// allowed reports whether a rule admits host (name or IP literal) on port.
func (p *Proxy) allowed(host, port string) bool {
	for _, r := range p.rules {
		if r.Allows(host, port) {
			return true
		}
	}
	return false
}

// allowedIP reports whether an IP rule names a explicitly.
func (p *Proxy) allowedIP(a netip.Addr, port string) bool {
	for _, r := range p.rules {
		if r.ip.IsValid() && r.Allows(a.String(), port) {
			return true
		}
	}
	return false
}

// internal reports whether a is an address a public name must not
// resolve to.
func internal(a netip.Addr) bool {
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) // carrier-grade NAT
}

func (p *Proxy) deny(host, port, reason string) error {
	p.logger.Warn("egress refused", "host", host, "port", port, "reason", reason)
	if p.onDeny != nil {
		p.onDeny(host, port, reason)
	}
	return fmt.Errorf("%w: %s:%s: %s", ErrDenied, host, port, reason)
}

// proxyHandler serves CONNECT and absolute-URL requests.
type proxyHandler struct {
	p  *Proxy
	tr *http.Transport
}

// hopHeaders are removed from forwarded requests and responses.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (h *proxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		h.connect(w, r)
		return
	}
	if r.URL.Scheme != "http" || r.URL.Host == "" {
		http.Error(w, "quiver egress proxy: only absolute http:// URLs and CONNECT", http.StatusBadRequest)
		return
	}
	hostport := r.URL.Host
	if r.URL.Port() == "" {
		hostport = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	if _, err := h.p.Check(r.Context(), hostport); err != nil {
		http.Error(w, "quiver egress proxy: destination not allowed", http.StatusForbidden)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	for _, k := range hopHeaders {
		out.Header.Del(k)
	}
	resp, err := h.tr.RoundTrip(out)
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, ErrDenied) {
			code = http.StatusForbidden
		}
		http.Error(w, "quiver egress proxy: "+http.StatusText(code), code)
		return
	}
	defer resp.Body.Close()
	for _, k := range hopHeaders {
		resp.Header.Del(k)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// connect tunnels a CONNECT request to an admitted destination.
func (h *proxyHandler) connect(w http.ResponseWriter, r *http.Request) {
	up, err := h.p.DialContext(r.Context(), "tcp", r.Host)
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, ErrDenied) {
			code = http.StatusForbidden
		}
		http.Error(w, "quiver egress proxy: "+http.StatusText(code), code)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		_ = up.Close()
		http.Error(w, "quiver egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	c, buf, err := hj.Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if _, err := c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		_ = up.Close()
		_ = c.Close()
		return
	}
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			_ = up.Close()
			_ = c.Close()
			return
		}
	}
	stop := context.AfterFunc(r.Context(), func() { _ = c.Close(); _ = up.Close() })
	defer stop()
	Relay(c, up)
}

// Relay copies both ways between a and b until either side ends, then
// closes both: the proxy's tunnels, and the sandbox's forwarder to it.
func Relay(a, b io.ReadWriteCloser) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	_ = a.Close()
	_ = b.Close()
	<-done
}
