// Package tokenexchange implements the client side of OAuth 2.0 Token
// Exchange (RFC 8693) as quiver uses it at its credential boundary (spec 001
// MUST 5): the caller's verified bearer token is exchanged at an
// authorization server for a token bound to one upstream's audience, and
// only that token is sent upstream.
//
// An [Exchanger] serves one upstream. It authenticates to the token
// endpoint with HTTP Basic (client_id and client secret), caches each
// exchanged token until shortly before it expires, and never puts a token
// into an error, a log line or a receipt.
//
// The cache is a state.KV shared by every replica: an entry is keyed by a
// sha256 of what is exchanged (endpoint, client, audience, scope, subject
// token type, principal and subject token) and holds the token encrypted
// with AES-256-GCM under a key derived by HKDF-SHA256 from the client
// secret, so every replica that has the secret derives the same key and
// the store alone never holds a usable token. The cache is only a cache:
// when the KV fails, the token is exchanged again.
package tokenexchange

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// Grant and token type URNs of RFC 8693.
const (
	GrantType            = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// Defaults of [Config].
const (
	// DefaultTimeout bounds one exchange when the context has no earlier
	// deadline.
	DefaultTimeout = 10 * time.Second
	// DefaultMaxResponseBytes bounds a token endpoint's answer.
	DefaultMaxResponseBytes = 64 << 10
	// DefaultLifetime is assumed for an answer without expires_in.
	DefaultLifetime = 60 * time.Second
	// expiryMargin: a cached token is not used within this long of its
	// expiry (nor within a tenth of its lifetime, whichever is shorter).
	expiryMargin = 30 * time.Second
	// maxTokenBytes bounds an exchanged access token.
	maxTokenBytes = 16 << 10
)

// ErrExchange is matched (errors.Is) by every error of [Exchanger.Exchange].
var ErrExchange = errors.New("token exchange failed")

// ErrNoSubject is returned (wrapped, matching [ErrExchange] too) when there
// is no subject token to exchange: the caller is not authenticated by a
// bearer token.
var ErrNoSubject = errors.New("token exchange needs an authenticated caller")

// Config configures an [Exchanger].
type Config struct {
	// TokenURL is the token endpoint (https, or http on a loopback host).
	TokenURL string
	// ClientID and ClientSecret authenticate quiver to the endpoint (HTTP
	// Basic, RFC 6749 §2.3.1).
	ClientID     string
	ClientSecret string
	// Audience is the audience parameter: the upstream the token is for.
	Audience string
	// Scope is the optional scope parameter (space-separated).
	Scope string
	// SubjectTokenType is the subject_token_type (default
	// TokenTypeAccessToken).
	SubjectTokenType string
	// HTTPClient sends the requests (default: a client with its own
	// transport that does not follow redirects).
	HTTPClient *http.Client
	// Timeout bounds one exchange (default DefaultTimeout).
	Timeout time.Duration
	// MaxResponseBytes bounds an answer (default DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// KV caches the exchanged tokens, encrypted (default: an in-process
	// state.NewMemory). Without a ClientSecret there is no key to encrypt
	// with, and the cache stays in process memory whatever KV is.
	KV state.KV
	// Logger receives the cache's failures, at warn (default: discarded).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// cacheKeyLabel is the HKDF info of the cache's encryption key: a fixed
// label, so that every replica derives the same key from the same secret.
const cacheKeyLabel = "quiver token-exchange cache v1"

// Exchanger exchanges subject tokens at one token endpoint for one
// audience, with a cache. It is safe for concurrent use.
type Exchanger struct {
	cfg Config
	url *url.URL

	kv   state.KV
	aead cipher.AEAD // nil: kv is in process memory, tokens kept plain
	log  *slog.Logger

	mu      sync.Mutex
	flights map[string]*flight
}

// flight is one exchange in progress, shared by concurrent requests of the
// same key.
type flight struct {
	done  chan struct{}
	token string
	err   error
}

// New checks cfg and returns an Exchanger.
func New(cfg Config) (*Exchanger, error) {
	u, err := CheckTokenURL(cfg.TokenURL)
	if err != nil {
		return nil, fmt.Errorf("tokenexchange: token_url: %w", err)
	}
	switch {
	case cfg.ClientID == "":
		return nil, errors.New("tokenexchange: client_id is required")
	case strings.ContainsAny(cfg.ClientID, ":\r\n"):
		return nil, errors.New("tokenexchange: client_id must not hold ':' or a line break")
	case cfg.Audience == "":
		return nil, errors.New("tokenexchange: audience is required")
	}
	switch cfg.SubjectTokenType {
	case "":
		cfg.SubjectTokenType = TokenTypeAccessToken
	case TokenTypeAccessToken, TokenTypeJWT:
	default:
		return nil, fmt.Errorf("tokenexchange: subject_token_type %q is not supported", cfg.SubjectTokenType)
	}
	if cfg.HTTPClient == nil {
		tr, _ := http.DefaultTransport.(*http.Transport)
		var rt http.RoundTripper = &http.Transport{}
		if tr != nil {
			rt = tr.Clone()
		}
		cfg.HTTPClient = &http.Client{Transport: rt}
	}
	// A redirect would resend the client credentials and the subject token
	// elsewhere: never follow one.
	hc := *cfg.HTTPClient
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	cfg.HTTPClient = &hc
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxResponseBytes <= 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	x := &Exchanger{cfg: cfg, url: u, kv: cfg.KV, log: cfg.Logger, flights: map[string]*flight{}}
	if cfg.ClientSecret == "" || x.kv == nil {
		x.kv = state.NewMemory(cfg.Now)
	} else {
		key, err := hkdf.Key(sha256.New, []byte(cfg.ClientSecret), nil, cacheKeyLabel, 32)
		if err != nil {
			return nil, fmt.Errorf("tokenexchange: %w", err)
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, fmt.Errorf("tokenexchange: %w", err)
		}
		if x.aead, err = cipher.NewGCM(block); err != nil {
			return nil, fmt.Errorf("tokenexchange: %w", err)
		}
	}
	return x, nil
}

// Owner names whose exchanged tokens a cache entry holds, so that a
// revocation can drop them (Forget*).
type Owner struct {
	// Key is the principal key (identity.Principal.Key): "jwt:<issuer
	// name>:<sub>" or "local:<sub>", or another key of the caller's
	// choosing.
	Key string
	// JTI is the jti of the subject token, when it has one.
	JTI string
}

// Cache key layout: "tx/<sub>/<key>/<exchange>", and for a subject token
// with a jti an index entry "txj/<jti>/<sub>/<key>/<exchange>", each part
// a digest, so that every token of a subject, a principal or a jti is
// found by one prefix Scan and the store names nobody in clear.
const (
	cachePrefix = "tx/"
	jtiPrefix   = "txj/"
)

// seg is the 16-hex-digit digest of one part of a cache key.
func seg(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// subOf is the subject of a principal key ("" for another key): the
// issuer names of "jwt:" keys hold no ':'.
func subOf(key string) string {
	if rest, ok := strings.CutPrefix(key, "local:"); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(key, "jwt:"); ok {
		if _, sub, ok := strings.Cut(rest, ":"); ok {
			return sub
		}
	}
	return ""
}

// cacheKey is the KV key of one exchange: the owner's digests and a hash
// of everything the exchanged token depends on.
func (x *Exchanger) cacheKey(o Owner, subject string) string {
	h := sha256.New()
	for _, s := range []string{x.cfg.TokenURL, x.cfg.ClientID, x.cfg.Audience, x.cfg.Scope, x.cfg.SubjectTokenType, o.Key, subject} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return cachePrefix + seg(subOf(o.Key)) + "/" + seg(o.Key) + "/" + hex.EncodeToString(h.Sum(nil))
}

// ForgetPrincipal drops every cached token of the principal subOrKey (a
// subject, every issuer's; or a principal key) from this exchanger's
// cache: when the cache is the shared KV, from every replica's at once.
// It returns how many it dropped.
func (x *Exchanger) ForgetPrincipal(ctx context.Context, subOrKey string) (int, error) {
	n, err := x.forget(ctx, cachePrefix+seg(subOrKey)+"/", "")
	if sub := subOf(subOrKey); sub != "" && err == nil {
		var m int
		m, err = x.forget(ctx, cachePrefix+seg(sub)+"/"+seg(subOrKey)+"/", "")
		n += m
	}
	return n, err
}

// ForgetToken drops the cached tokens exchanged for the subject token
// whose jti is jti.
func (x *Exchanger) ForgetToken(ctx context.Context, jti string) (int, error) {
	if jti == "" {
		return 0, nil
	}
	return x.forget(ctx, jtiPrefix+seg(jti)+"/", cachePrefix)
}

// forget deletes the entries under prefix; with target, each entry is an
// index whose key's rest (after prefix) names target+rest, deleted too.
func (x *Exchanger) forget(ctx context.Context, prefix, target string) (int, error) {
	n := 0
	for {
		entries, err := x.kv.Scan(ctx, prefix, state.MaxScan)
		if err != nil {
			return n, fmt.Errorf("tokenexchange: forget: %w", err)
		}
		for _, e := range entries {
			if target != "" {
				if err := x.kv.Delete(ctx, target+strings.TrimPrefix(e.Key, prefix)); err != nil {
					return n, fmt.Errorf("tokenexchange: forget: %w", err)
				}
			}
			if err := x.kv.Delete(ctx, e.Key); err != nil {
				return n, fmt.Errorf("tokenexchange: forget: %w", err)
			}
			n++
		}
		if len(entries) < state.MaxScan {
			return n, nil
		}
	}
}

// cached returns the cached token of ck, or "" when there is none (or the
// cache cannot be read: logged, and the caller exchanges again).
func (x *Exchanger) cached(ctx context.Context, ck string) string {
	v, err := x.kv.Get(ctx, ck)
	if errors.Is(err, state.ErrNotFound) {
		return ""
	}
	if err != nil {
		x.log.Warn("token exchange cache unavailable; exchanging again", "audience", x.cfg.Audience, "err", err)
		return ""
	}
	if x.aead == nil {
		return string(v)
	}
	n := x.aead.NonceSize()
	if len(v) < n {
		return ""
	}
	plain, err := x.aead.Open(nil, v[:n], v[n:], []byte(ck))
	if err != nil {
		// Another secret (a rotated one) sealed it: exchange again.
		return ""
	}
	return string(plain)
}

// store caches tok under ck for ttl, and the index entry idx (when not
// "") first, so that no cached token is ever without its index; a failure
// is logged and dropped.
func (x *Exchanger) store(ctx context.Context, ck, idx, tok string, ttl time.Duration) {
	if ttl <= 0 {
		return
	}
	if idx != "" {
		if err := x.kv.Set(ctx, idx, []byte{1}, ttl); err != nil {
			x.log.Warn("token exchange cache unavailable; the token is not cached", "audience", x.cfg.Audience, "err", err)
			return
		}
	}
	v := []byte(tok)
	if x.aead != nil {
		nonce := make([]byte, x.aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return
		}
		v = x.aead.Seal(nonce, nonce, v, []byte(ck))
	}
	if err := x.kv.Set(ctx, ck, v, ttl); err != nil {
		x.log.Warn("token exchange cache unavailable; the token is not cached", "audience", x.cfg.Audience, "err", err)
	}
}

// CheckTokenURL parses s and accepts https URLs, and http URLs on a
// loopback host; no user info, no fragment.
func CheckTokenURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, errors.New("is not a valid URL")
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("has no host")
	case u.User != nil:
		return nil, errors.New("must not carry credentials")
	case u.Fragment != "" || strings.Contains(s, "#"):
		return nil, errors.New("must not have a #fragment")
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return nil, errors.New("must use https (http is accepted only for loopback hosts)")
	}
	return u, nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := parseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Audience returns the configured audience.
func (x *Exchanger) Audience() string { return x.cfg.Audience }

// Exchange returns a token for the configured audience on behalf of the
// principal identified by key, whose verified bearer token is subject.
// A cached token is returned while it is valid; notAfter, when not zero,
// caps how long a new token is cached (the subject token's expiry).
// Errors match ErrExchange, carry a one-line message and never include a
// token.
func (x *Exchanger) Exchange(ctx context.Context, key, subject string, notAfter time.Time) (string, error) {
	return x.ExchangeFor(ctx, Owner{Key: key}, subject, notAfter)
}

// ExchangeFor is Exchange for the owner o, whose jti (when set) indexes
// the cached token for ForgetToken.
func (x *Exchanger) ExchangeFor(ctx context.Context, o Owner, subject string, notAfter time.Time) (string, error) {
	if subject == "" {
		return "", fmt.Errorf("%w: %w", ErrExchange, ErrNoSubject)
	}
	ck := x.cacheKey(o, subject)
	idx := ""
	if o.JTI != "" {
		idx = jtiPrefix + seg(o.JTI) + "/" + strings.TrimPrefix(ck, cachePrefix)
	}
	for {
		if tok := x.cached(ctx, ck); tok != "" {
			return tok, nil
		}
		x.mu.Lock()
		f, running := x.flights[ck]
		if !running {
			f = &flight{done: make(chan struct{})}
			x.flights[ck] = f
			x.mu.Unlock()
			f.token, f.err = x.exchangeAndStore(ctx, ck, idx, subject, notAfter)
			x.mu.Lock()
			delete(x.flights, ck)
			x.mu.Unlock()
			close(f.done)
			return f.token, f.err
		}
		x.mu.Unlock()
		select {
		case <-f.done:
			if f.err == nil {
				return f.token, nil
			}
			// The other request failed (perhaps only its context ended):
			// try again with ours.
			if ctx.Err() != nil {
				return "", fmt.Errorf("%w: %w", ErrExchange, ctx.Err())
			}
		case <-ctx.Done():
			return "", fmt.Errorf("%w: %w", ErrExchange, ctx.Err())
		}
	}
}

// exchangeAndStore performs one exchange and caches its token under ck,
// indexed by idx when not "".
func (x *Exchanger) exchangeAndStore(ctx context.Context, ck, idx, subject string, notAfter time.Time) (string, error) {
	start := x.cfg.Now()
	tok, lifetime, err := x.exchange(ctx, subject)
	if err != nil {
		return "", err
	}
	margin := min(expiryMargin, lifetime/10)
	until := start.Add(lifetime - margin)
	if !notAfter.IsZero() && notAfter.Before(until) {
		until = notAfter
	}
	x.store(ctx, ck, idx, tok, until.Sub(x.cfg.Now()))
	return tok, nil
}

// tokenResponse is the part of a token endpoint's answer quiver reads.
type tokenResponse struct {
	AccessToken      string          `json:"access_token"`
	IssuedTokenType  string          `json:"issued_token_type"`
	TokenType        string          `json:"token_type"`
	ExpiresIn        json.Number     `json:"expires_in"`
	Error            string          `json:"error"`
	ErrorDescription json.RawMessage `json:"error_description"`
}

// exchange performs one request to the token endpoint.
func (x *Exchanger) exchange(ctx context.Context, subject string) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, x.cfg.Timeout)
	defer cancel()
	form := url.Values{
		"grant_type":         {GrantType},
		"subject_token":      {subject},
		"subject_token_type": {x.cfg.SubjectTokenType},
		"audience":           {x.cfg.Audience},
	}
	if x.cfg.Scope != "" {
		form.Set("scope", x.cfg.Scope)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.url.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("%w: build request: %w", ErrExchange, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 §2.3.1: client_id and secret are form-urlencoded before
	// Basic encoding.
	req.SetBasicAuth(url.QueryEscape(x.cfg.ClientID), url.QueryEscape(x.cfg.ClientSecret))
	resp, err := x.cfg.HTTPClient.Do(req)
	if err != nil {
		// *url.Error names the URL (without secrets: it has no user
		// info) and the cause.
		return "", 0, fmt.Errorf("%w: token endpoint unreachable: %w", ErrExchange, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, x.cfg.MaxResponseBytes+1))
	if err != nil {
		return "", 0, fmt.Errorf("%w: read token endpoint answer: %w", ErrExchange, err)
	}
	if int64(len(body)) > x.cfg.MaxResponseBytes {
		return "", 0, fmt.Errorf("%w: token endpoint answer larger than %d bytes", ErrExchange, x.cfg.MaxResponseBytes)
	}
	var tr tokenResponse
	jsonErr := error(nil)
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" && !strings.HasSuffix(mt, "+json") {
		jsonErr = fmt.Errorf("content type %q is not JSON", oneLine(mt, 64))
	} else {
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		jsonErr = dec.Decode(&tr)
	}
	if resp.StatusCode != http.StatusOK {
		if jsonErr == nil && tr.Error != "" {
			return "", 0, fmt.Errorf("%w: token endpoint answered %d %s", ErrExchange, resp.StatusCode, oneLine(tr.Error, 64))
		}
		return "", 0, fmt.Errorf("%w: token endpoint answered %d", ErrExchange, resp.StatusCode)
	}
	if jsonErr != nil {
		return "", 0, fmt.Errorf("%w: malformed token endpoint answer: %w", ErrExchange, jsonErr)
	}
	switch {
	case tr.AccessToken == "":
		return "", 0, fmt.Errorf("%w: token endpoint answer has no access_token", ErrExchange)
	case len(tr.AccessToken) > maxTokenBytes:
		return "", 0, fmt.Errorf("%w: access_token larger than %d bytes", ErrExchange, maxTokenBytes)
	case strings.ContainsFunc(tr.AccessToken, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return "", 0, fmt.Errorf("%w: access_token holds characters a header cannot carry", ErrExchange)
	case tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") && !strings.EqualFold(tr.TokenType, "N_A"):
		return "", 0, fmt.Errorf("%w: token_type %q is not Bearer", ErrExchange, oneLine(tr.TokenType, 32))
	}
	lifetime := DefaultLifetime
	if tr.ExpiresIn != "" {
		secs, err := tr.ExpiresIn.Float64()
		if err != nil || secs < 0 {
			return "", 0, fmt.Errorf("%w: malformed expires_in", ErrExchange)
		}
		lifetime = time.Duration(min(secs, 366*24*3600) * float64(time.Second))
	}
	return tr.AccessToken, lifetime, nil
}

// oneLine caps s to n bytes of printable ASCII.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r >= 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}
