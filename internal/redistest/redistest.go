// Package redistest starts throwaway redis-server processes for tests: each
// on a free loopback port, with nothing persisted and its files under the
// test's temporary directory.
//
// When redis-server is not on PATH the test is skipped, unless the
// environment variable QUIVER_REQUIRE_REDIS is "1" (CI sets it), in which
// case it fails.
package redistest

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing
// redis-server into a test failure instead of a skip.
const RequireEnv = "QUIVER_REQUIRE_REDIS"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 10 * time.Second

// Option configures a server started by Start.
type Option func(*config)

type config struct {
	password  string
	maxMemory string
	tls       bool
	persist   bool
}

// WithPassword makes the server require password (requirepass).
func WithPassword(password string) Option {
	return func(c *config) { c.password = password }
}

// WithMaxMemory caps the server's memory (maxmemory, e.g. "1mb") with the
// noeviction policy, so writes past the cap fail with an OOM error.
func WithMaxMemory(limit string) Option {
	return func(c *config) { c.maxMemory = limit }
}

// WithPersistence makes the server keep an append-only file synced on
// every write, so that what it acknowledged survives Stop (a SIGKILL) and
// Restart, as a production Redis with appendonly yes would.
func WithPersistence() Option {
	return func(c *config) { c.persist = true }
}

// WithTLS makes the server speak only TLS, with a self-signed certificate
// for 127.0.0.1 and localhost (see Server.CertPool); clients need no
// certificate of their own.
func WithTLS() Option {
	return func(c *config) { c.tls = true }
}

// Server is a running redis-server owned by one test.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	cfg  config
	port int

	pool *x509.CertPool // with WithTLS: trusts the server's certificate

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	logs int           // log files written so far
}

// Start starts a redis-server for t and stops it when t ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		msg := "redis-server is not on PATH (install it, e.g. apt-get install redis-server)"
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%s, and %s=1 requires it", msg, RequireEnv)
		}
		t.Skipf("%s; set %s=1 to fail instead of skipping", msg, RequireEnv)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir()}
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.tls {
		pool, err := selfSigned(s.dir)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.pool = pool
	}
	t.Cleanup(s.Stop)
	var last error
	for range 5 { // another process may take the free port before the server binds it
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s.port = port
		if last = s.start(); last == nil {
			return s
		}
	}
	t.Fatalf("redistest: %v", last)
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "yes",
	}
	if s.cfg.tls {
		a[1] = "0" // no plain-text port
		a = append(a, "--tls-port", strconv.Itoa(s.port),
			"--tls-cert-file", filepath.Join(s.dir, "cert.pem"), "--tls-key-file", filepath.Join(s.dir, "key.pem"),
			"--tls-auth-clients", "no")
	}
	if s.cfg.persist {
		a[7] = "yes" // --appendonly
		a = append(a, "--appendfsync", "always")
	}
	if s.cfg.password != "" {
		a = append(a, "--requirepass", s.cfg.password)
	}
	if s.cfg.maxMemory != "" {
		a = append(a, "--maxmemory", s.cfg.maxMemory, "--maxmemory-policy", "noeviction")
	}
	return a
}

// start runs the server on s.port and waits until it accepts connections.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logs++
	logPath := fmt.Sprintf("%s/redis-%d.log", s.dir, s.logs)
	logf, err := os.Create(logPath)
	if err != nil {
		return fmt.Errorf("create log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, s.args()...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-done:
			return fmt.Errorf("redis-server on port %d exited at start: %s", s.port, tail(logPath))
		default:
		}
		if s.ready() {
			s.cmd, s.done = cmd, done
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d not ready after %v: %s", s.port, startTimeout, tail(logPath))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reports whether the server answers PING (or asks for a password,
// which also means it is up).
func (s *Server) ready() bool {
	var c net.Conn
	var err error
	d := &net.Dialer{Timeout: time.Second}
	if s.cfg.tls {
		c, err = tls.DialWithDialer(d, "tcp", s.Addr(), &tls.Config{RootCAs: s.pool, ServerName: "127.0.0.1"})
	} else {
		c, err = d.Dial("tcp", s.Addr())
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return false
	}
	return strings.HasPrefix(line, "+PONG") || strings.HasPrefix(line, "-NOAUTH")
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " | ")
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is a redis:// URL for the server (rediss:// with WithTLS), without
// the password.
func (s *Server) URL() string {
	if s.cfg.tls {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// CertPool trusts the server's certificate (nil without WithTLS).
func (s *Server) CertPool() *x509.CertPool { return s.pool }

// selfSigned writes cert.pem and key.pem for 127.0.0.1 and localhost into
// dir and returns a pool trusting the certificate.
func selfSigned(dir string) (*x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tls key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tls key: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}

// Password is the password the server requires, or "".
func (s *Server) Password() string { return s.cfg.password }

// Stop kills the server and waits for it to exit. Stopping a stopped server
// does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a frozen server cannot die
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// Freeze stops the server process (SIGSTOP) without closing its
// connections: a hung server, or one behind a network partition. Thaw
// resumes it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: %v to a stopped server", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart stops the server (if running) and starts it again on the same
// port with the same options. Nothing stored survives, unless the server
// was started WithPersistence.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	// The port was ours a moment ago; a bind race is retried briefly.
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart: %v", err)
}
