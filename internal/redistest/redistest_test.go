package redistest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func ping(t *testing.T, addr string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return "", err
	}
	return bufio.NewReader(c).ReadString('\n')
}

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if line, err := ping(t, s.Addr()); err != nil || !strings.HasPrefix(line, "+PONG") {
		t.Fatalf("PING = %q, %v", line, err)
	}
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL = %q", s.URL())
	}
	s.Stop()
	if _, err := ping(t, s.Addr()); err == nil {
		t.Fatal("server still answers after Stop")
	}
	s.Stop() // idempotent
	s.Restart()
	if line, err := ping(t, s.Addr()); err != nil || !strings.HasPrefix(line, "+PONG") {
		t.Fatalf("PING after Restart = %q, %v", line, err)
	}
}

func TestPassword(t *testing.T) {
	s := Start(t, WithPassword("s3cret"), WithMaxMemory("2mb"))
	if line, err := ping(t, s.Addr()); err != nil || !strings.HasPrefix(line, "-NOAUTH") {
		t.Fatalf("PING without password = %q, %v", line, err)
	}
	if s.Password() != "s3cret" {
		t.Fatalf("Password() = %q", s.Password())
	}
}

func TestTwoServers(t *testing.T) {
	a, b := Start(t), Start(t)
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers on %s", a.Addr())
	}
}

func TestFreezeThaw(t *testing.T) {
	s := Start(t)
	s.Freeze()
	if line, err := ping(t, s.Addr()); err == nil {
		t.Fatalf("a frozen server answered %q", line)
	}
	s.Thaw()
	if line, err := ping(t, s.Addr()); err != nil || !strings.HasPrefix(line, "+PONG") {
		t.Fatalf("PING after Thaw = %q, %v", line, err)
	}
	s.Freeze() // Stop (at cleanup) kills a frozen server too
}

// TestHelperNoRedis is run by TestMissingServer in a child process whose
// PATH has no redis-server.
func TestHelperNoRedis(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") != "1" {
		t.Skip("helper for TestMissingServer")
	}
	Start(t)
	t.Log("started")
}

func TestMissingServer(t *testing.T) {
	for _, tc := range []struct {
		require string
		want    string
		fails   bool
	}{
		{"", "--- SKIP: TestHelperNoRedis", false},
		{"1", "--- FAIL: TestHelperNoRedis", true},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperNoRedis$", "-test.v")
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "REDISTEST_CHILD=1", RequireEnv+"="+tc.require)
		out, err := cmd.CombinedOutput()
		if (err != nil) != tc.fails || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "redis-server is not on PATH") {
			t.Errorf("%s=%q: err %v, output:\n%s", RequireEnv, tc.require, err, out)
		}
	}
}

func TestTLS(t *testing.T) {
	s := Start(t, WithTLS())
	if !strings.HasPrefix(s.URL(), "rediss://127.0.0.1:") || s.CertPool() == nil {
		t.Fatalf("URL %q, pool %v", s.URL(), s.CertPool())
	}
	if line, err := ping(t, s.Addr()); err == nil && strings.HasPrefix(line, "+PONG") {
		t.Fatal("a TLS server answered plain text")
	}
}

// inline sends one inline command and returns the first reply line and,
// for a bulk string, its value.
func inline(t *testing.T, addr, cmd string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(line, "$") && !strings.HasPrefix(line, "$-1") {
		v, _ := r.ReadString('\n')
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(line)
}

func TestPersistence(t *testing.T) {
	s := Start(t, WithPersistence())
	if got := inline(t, s.Addr(), "SET k v"); got != "+OK" {
		t.Fatalf("SET = %q", got)
	}
	s.Restart()
	if got := inline(t, s.Addr(), "GET k"); got != "v" {
		t.Fatalf("GET after a restart = %q", got)
	}
	plain := Start(t)
	inline(t, plain.Addr(), "SET k v")
	plain.Restart()
	if got := inline(t, plain.Addr(), "GET k"); got != "$-1" {
		t.Fatalf("without persistence GET after a restart = %q", got)
	}
}
