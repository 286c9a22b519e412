// Package redisstate is the redis state backend: a Redis server (standalone,
// or a primary behind a load balancer or Sentinel address) shared by quiver
// replicas on many machines. It provides the [state.KV] every kind of state
// is built on and an [artifacts.Store], both on one connection pool.
//
// Key layout. Every key starts with Options.KeyPrefix ("quiver:" by
// default); KV keys follow "k:" and artifact keys "a:", so the two never
// collide:
//
//	<prefix>k:<key>                 a KV value (string), or a rate-limit
//	                                window (sorted set) written by Admit
//	<prefix>a:m:<owner>:<handle>    an artifact's metadata (JSON)
//	<prefix>a:c:<blob>:<index>      an artifact's content, in 1 MiB chunks
//	<prefix>a:exp, a:pend           artifacts by expiry, Puts in flight by
//	                                deadline (sorted sets)
//	<prefix>a:used, a:reserved      bytes of committed artifacts and of Puts
//	                                in flight (the quota's counters)
//
// Server. Redis 7 or later (the scripts use its flags), with the
// noeviction policy (an evicting policy would drop state behind the
// quota's back). Multi-key scripts touch keys they compute, so Redis
// Cluster is not supported; every replica must point at the same primary.
// What survives a server restart is what its persistence keeps: Open warns
// when there is no append-only file.
//
// Failures. Calls fail closed and quickly: a dead or unreachable server
// yields an error matching [state.ErrUnavailable] within about two seconds
// (dial, read and write timeouts), a server at maxmemory with the
// noeviction policy yields [state.ErrTooLarge], and a context that ends
// yields the context's error. The client reconnects on its own: once the
// server is back, the same Backend works again.
package redisstate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// DefaultKeyPrefix starts every key when Options.KeyPrefix is empty.
const DefaultKeyPrefix = "quiver:"

// Timeouts of the client, unless the URL sets them (dial_timeout,
// read_timeout, write_timeout, pool_timeout). A dead server must not hang a
// request: every call fails with ErrUnavailable after at most about these.
const (
	// DialTimeout bounds establishing a connection.
	DialTimeout = 2 * time.Second
	// ReadTimeout bounds waiting for one reply.
	ReadTimeout = 2 * time.Second
	// WriteTimeout bounds sending one command.
	WriteTimeout = 2 * time.Second
	// PoolTimeout bounds waiting for a free connection when all are busy.
	PoolTimeout = 3 * time.Second
)

// Options configure [Open].
type Options struct {
	// URL is the server's address: redis://[user@]host:port[/db] or
	// rediss:// for TLS.
	URL string
	// Password authenticates (already resolved from password_env by the
	// caller); it overrides a password in the URL.
	Password string
	// TLS configures TLS (even with a redis:// URL); nil means plain TCP, or
	// TLS with the system roots when the URL is rediss://. An empty
	// ServerName is the URL's host.
	TLS *tls.Config
	// KeyPrefix starts every key; DefaultKeyPrefix when empty. Fleets that
	// share one server use different prefixes.
	KeyPrefix string
	// Artifacts configures the artifact store: TTL, MaxBytes, Now and
	// Logger are used, Dir, InMemory and SweepInterval are ignored.
	Artifacts artifacts.Options
	// Logger receives warnings; discarded when nil.
	Logger *slog.Logger
}

// Backend is an opened redis backend. It implements [state.Backend].
type Backend struct {
	conn *conn
	kv   *KV
	art  *Store
}

var _ state.Backend = (*Backend)(nil)

// conn is the client shared by a backend's KV and artifact store; the last
// of them to close closes it.
type conn struct {
	rdb    *redis.Client
	prefix string
	log    *slog.Logger

	mu   sync.Mutex
	refs int
}

func (c *conn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs != 0 {
		return nil
	}
	if err := c.rdb.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("redisstate: close: %w", err)
	}
	return nil
}

// Open connects to the server o.URL names and checks that it answers. Its
// errors are one line each: a malformed URL, a rejected password, a server
// certificate that does not verify or a server older than Redis 7 wrap
// state.ErrInvalid (fix the configuration); an unreachable or still
// loading server wraps state.ErrUnavailable. The password never appears in
// an error.
func Open(ctx context.Context, o Options) (state.Backend, error) {
	return OpenBackend(ctx, o)
}

// OpenBackend is Open returning the concrete type.
func OpenBackend(ctx context.Context, o Options) (*Backend, error) {
	ro, where, err := clientOptions(o)
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	rdb := redis.NewClient(ro)
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		return nil, openError(ctx, where, ro.TLSConfig != nil, err)
	}
	if err := checkServer(ctx, rdb, where, o.Logger); err != nil {
		_ = rdb.Close()
		return nil, err
	}
	c := &conn{rdb: rdb, prefix: o.KeyPrefix, log: o.Logger, refs: 2}
	ao := o.Artifacts
	if ao.Logger == nil {
		ao.Logger = o.Logger
	}
	art, err := newStore(c, ao)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	return &Backend{conn: c, kv: newKV(c), art: art}, nil
}

// clientOptions turns Options into the client's, and names the server for
// messages (the URL without its password).
func clientOptions(o Options) (*redis.Options, string, error) {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return nil, "", fmt.Errorf("%w: redis url is empty", state.ErrInvalid)
	case err != nil:
		// url.Parse's error repeats the URL, password included: say less.
		return nil, "", fmt.Errorf("%w: redis url is malformed: it must look like redis://host:port/db or rediss://host:port/db", state.ErrInvalid)
	case u.Scheme != "redis" && u.Scheme != "rediss":
		return nil, "", fmt.Errorf("%w: redis url must start with redis:// or rediss://", state.ErrInvalid)
	case u.Host == "":
		return nil, "", fmt.Errorf("%w: redis url has no host: it must look like redis://host:port/db", state.ErrInvalid)
	}
	where := u.Redacted()
	ro, err := redis.ParseURL(o.URL)
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), "\n", " ")
		if p, ok := u.User.Password(); ok && p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
		return nil, "", fmt.Errorf("%w: redis url %s: %s", state.ErrInvalid, where, msg)
	}
	if o.Password != "" {
		ro.Password = o.Password
	}
	if o.TLS != nil {
		tc := o.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName = u.Hostname() // what the certificate must name
		}
		ro.TLSConfig = tc
	}
	// Timeouts set in the URL (dial_timeout=3s...) win.
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&ro.DialTimeout, DialTimeout}, {&ro.ReadTimeout, ReadTimeout}, {&ro.WriteTimeout, WriteTimeout}, {&ro.PoolTimeout, PoolTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	ro.ContextTimeoutEnabled = true
	ro.DialerRetries = 1
	// No silent retries: a retried Create, Swap or Admit whose first reply
	// was lost would answer wrongly. Dead pooled connections are detected
	// before use, so after a server restart the next call reconnects.
	ro.MaxRetries = -1
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return ro, where, nil
}

// checkServer refuses a server older than Redis 7 (the scripts use its
// flags) and warns when the server may lose state: without an append-only
// file a restart loses what was written since the last snapshot, and an
// evicting maxmemory policy drops keys behind the quota's back.
func checkServer(ctx context.Context, rdb *redis.Client, where string, log *slog.Logger) error {
	tlsOn := rdb.Options().TLSConfig != nil
	info, err := rdb.Info(ctx, "server", "persistence", "memory").Result()
	var rerr redis.Error
	if err != nil && errors.As(err, &rerr) && !redis.IsAuthError(err) && !redis.IsLoadingError(err) {
		// A server that refuses INFO (a restricted ACL user, a proxy) is
		// used unchecked.
		log.Warn("redis state: cannot check the server's version and persistence", "redis", where, "err", oneLine(err))
		return nil
	}
	if err != nil {
		return openError(ctx, where, tlsOn, err)
	}
	version := infoField(info, "redis_version")
	major, _, _ := strings.Cut(version, ".")
	if n, err := strconv.Atoi(major); err != nil || n < 7 {
		return fmt.Errorf("%w: redis at %s is version %q; 7.0 or later is required", state.ErrInvalid, where, version)
	}
	if infoField(info, "aof_enabled") == "0" {
		log.Warn("redis state: the server has no append-only file; a restart loses what was written since its last snapshot",
			"redis", where)
	}
	if p := infoField(info, "maxmemory_policy"); p != "" && p != "noeviction" {
		log.Warn("redis state: the server's maxmemory policy is not noeviction; at maxmemory it drops state instead of refusing writes",
			"redis", where, "maxmemory_policy", p)
	}
	return nil
}

// infoField returns a field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// openError words a failed first PING.
func openError(ctx context.Context, where string, tlsOn bool, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("redisstate: connect to %s: %w", where, ctx.Err())
	case callerDeadline(ctx, err):
		return fmt.Errorf("redisstate: connect to %s: %w", where, context.DeadlineExceeded)
	case redis.HasErrorPrefix(err, "NOAUTH"):
		return fmt.Errorf("%w: redis at %s requires a password (NOAUTH): set password_env", state.ErrInvalid, where)
	case redis.HasErrorPrefix(err, "WRONGPASS"), redis.HasErrorPrefix(err, "invalid password"), redis.HasErrorPrefix(err, "invalid username-password pair"):
		return fmt.Errorf("%w: redis at %s rejected the password (WRONGPASS)", state.ErrInvalid, where)
	case redis.HasErrorPrefix(err, "ERR AUTH"), redis.HasErrorPrefix(err, "AUTH"):
		return fmt.Errorf("%w: redis at %s does not take a password, but one was given: %s", state.ErrInvalid, where, oneLine(err))
	case isCertError(err):
		return fmt.Errorf("%w: redis at %s: %s (check the CA and server name of the TLS settings)", state.ErrInvalid, where, oneLine(err))
	case errors.Is(err, io.EOF) && !tlsOn:
		return fmt.Errorf("%w: redis at %s closed the connection (if it requires TLS, use rediss://)", state.ErrUnavailable, where)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: redis at %s refused the connection (is it running?)", state.ErrUnavailable, where)
	}
	return fmt.Errorf("%w: redis at %s: %s", state.ErrUnavailable, where, oneLine(err))
}

// isCertError reports a server certificate that does not verify.
func isCertError(err error) bool {
	var ve *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ve) || errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// Name implements state.Backend.
func (b *Backend) Name() string { return "redis" }

// KV implements state.Backend.
func (b *Backend) KV() state.KV { return b.kv }

// Artifacts implements state.Backend.
func (b *Backend) Artifacts() artifacts.Store { return b.art }

// Close implements state.Backend: it closes the KV and the artifact store.
func (b *Backend) Close() error {
	return errors.Join(b.art.Close(), b.kv.Close())
}

// mapErr turns a client error into the state package's: ctx's error when
// ctx ended, ErrClosed for a closed client, ErrTooLarge for a server at
// maxmemory, ErrUnavailable for a server that cannot answer (down,
// unreachable, loading its data, restarted mid-call, pool exhausted).
// Other server errors (a key of the wrong type) are returned wrapped as
// they are.
func mapErr(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("redisstate: %s: %w", op, ctx.Err())
	case callerDeadline(ctx, err):
		return fmt.Errorf("redisstate: %s: %w", op, context.DeadlineExceeded)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// A deadline of the client's own (dial or read timeout), not the
		// caller's.
		return fmt.Errorf("%w: redis %s: %s", state.ErrUnavailable, op, oneLine(err))
	case errors.Is(err, redis.ErrClosed):
		return fmt.Errorf("%w: redis %s", state.ErrClosed, op)
	case redis.IsOOMError(err):
		return fmt.Errorf("%w: store has no room (redis at maxmemory): redis %s: %s", state.ErrTooLarge, op, oneLine(err))
	case isUnavailable(err):
		return fmt.Errorf("%w: redis %s: %s", state.ErrUnavailable, op, oneLine(err))
	}
	return fmt.Errorf("redisstate: %s: %w", op, err)
}

// callerDeadline reports a socket timeout that is the caller's deadline:
// the client sets the socket's deadline to ctx's, and the read can give up
// a moment before ctx itself reports it.
func callerDeadline(ctx context.Context, err error) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && time.Until(dl) < 10*time.Millisecond
}

// isUnavailable reports errors that mean the server cannot answer now.
func isUnavailable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		// Not a server reply: the network (EOF, reset, refused, timeout),
		// the pool, or TLS.
		return true
	}
	if redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsMasterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsClusterDownError(err) || redis.IsMaxClientsError(err) ||
		redis.IsAuthError(err) {
		return true
	}
	for _, p := range []string{"BUSY", "NOPERM", "MISCONF"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF)
}

// DiscardDriverLogs silences go-redis's own logger, which is process-wide
// and prints to stderr (a dead server prints a line per dial attempt).
// Every failure reaches quiver as an error of this package, logged by
// quiver's logger, so a command calls this once at start.
func DiscardDriverLogs() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}
