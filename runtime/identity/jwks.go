package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxJWKSBytes caps a JWKS document.
const maxJWKSBytes = 1 << 20

// DefaultJWKSTimeout bounds one JWKS fetch.
const DefaultJWKSTimeout = 5 * time.Second

// ErrKeysUnavailable: no verification keys could be loaded for an issuer
// (the JWKS is unreadable, unreachable or holds no usable key).
var ErrKeysUnavailable = errors.New("verification keys unavailable")

// ErrUnknownKID: the token names a key id the issuer's JWKS does not hold
// (or names none while the JWKS holds several keys).
var ErrUnknownKID = errors.New("unknown key id")

// jwk is one JSON Web Key (RFC 7517/7518); only public signing keys are
// read.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	D   string `json:"d"`
}

// keySet is one loaded JWKS: the usable keys for one algorithm.
type keySet struct {
	byKID   map[string]any
	all     []any
	loaded  time.Time
	skipped int
}

// parseJWKS decodes a JWKS document and keeps the keys usable with alg:
// RSA keys of at least 2048 bits for RS256, P-256 keys for ES256. Keys for
// other algorithms, encryption keys and keys that carry private parts are
// skipped; a document with no usable key is an error.
func parseJWKS(data []byte, alg string) (*keySet, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: JWKS is not valid JSON: %w", ErrKeysUnavailable, err)
	}
	ks := &keySet{byKID: map[string]any{}}
	for _, raw := range doc.Keys {
		var k jwk
		if err := json.Unmarshal(raw, &k); err != nil {
			ks.skipped++
			continue
		}
		key, err := k.publicKey(alg)
		if err != nil {
			ks.skipped++
			continue
		}
		if k.Kid != "" {
			if _, dup := ks.byKID[k.Kid]; dup {
				// Two keys under one kid: which one signs is ambiguous.
				return nil, fmt.Errorf("%w: JWKS holds kid %q twice", ErrKeysUnavailable, k.Kid)
			}
			ks.byKID[k.Kid] = key
		}
		ks.all = append(ks.all, key)
	}
	if len(ks.all) == 0 {
		return nil, fmt.Errorf("%w: JWKS holds no %s signing key", ErrKeysUnavailable, alg)
	}
	return ks, nil
}

// publicKey returns the key for alg, or an error when the JWK does not
// fit it.
func (k jwk) publicKey(alg string) (any, error) {
	if k.Use != "" && k.Use != "sig" {
		return nil, errors.New("not a signing key")
	}
	if k.Alg != "" && k.Alg != alg {
		return nil, errors.New("key is for another algorithm")
	}
	if k.D != "" {
		// A JWKS is public; a private key in it is a misconfiguration that
		// should not be used quietly.
		return nil, errors.New("JWK carries a private key")
	}
	switch alg {
	case AlgRS256:
		if k.Kty != "RSA" {
			return nil, errors.New("not an RSA key")
		}
		n, err := b64(k.N)
		if err != nil || len(n) == 0 {
			return nil, errors.New("bad modulus")
		}
		e, err := b64(k.E)
		if err != nil || len(e) == 0 || len(e) > 4 {
			return nil, errors.New("bad exponent")
		}
		var exp int64
		for _, c := range e {
			exp = exp<<8 | int64(c)
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp)}
		if pub.N.BitLen() < 2048 || exp < 3 || exp%2 == 0 || exp > 1<<31-1 {
			return nil, errors.New("weak RSA key")
		}
		return pub, nil
	case AlgES256:
		if k.Kty != "EC" || k.Crv != "P-256" {
			return nil, errors.New("not a P-256 key")
		}
		x, errx := b64(k.X)
		y, erry := b64(k.Y)
		if errx != nil || erry != nil || len(x) != 32 || len(y) != 32 {
			return nil, errors.New("bad coordinates")
		}
		pt := make([]byte, 0, 65)
		pt = append(append(append(pt, 4), x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), pt)
		if err != nil {
			return nil, fmt.Errorf("point: %w", err)
		}
		return pub, nil
	}
	return nil, fmt.Errorf("algorithm %s takes no JWKS", alg)
}

// b64 decodes base64url without padding (tolerating padding).
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// jwksCache holds the keys of one issuer and reloads them: when older than
// refresh, and when a token names an unknown kid (at most every
// minRefetch). A reload that fails keeps the keys it had.
type jwksCache struct {
	issuer     string
	alg        string
	load       func(ctx context.Context) ([]byte, error)
	refresh    time.Duration
	minRefetch time.Duration
	now        func() time.Time
	log        *slog.Logger

	cur       atomic.Pointer[keySet]
	mu        sync.Mutex // serializes loads; guards lastTry
	lastTry   time.Time
	lastError error
}

// key returns the verification key for kid.
func (c *jwksCache) key(ctx context.Context, kid string) (any, error) {
	ks := c.cur.Load()
	if ks == nil || c.now().Sub(ks.loaded) >= c.refresh {
		ks = c.reload(ctx, false)
	}
	if ks == nil {
		return nil, c.unavailable()
	}
	if k, ok := ks.pick(kid); ok {
		return k, nil
	}
	// An unknown kid may be a key the issuer rotated in since the last
	// load: reload, rate-limited so that forged kids cannot make quiver
	// hammer the issuer.
	if ks2 := c.reload(ctx, true); ks2 != nil && ks2 != ks {
		if k, ok := ks2.pick(kid); ok {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w %q for issuer %s", ErrUnknownKID, kid, c.issuer)
}

func (c *jwksCache) unavailable() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastError != nil {
		return fmt.Errorf("issuer %s: %w", c.issuer, c.lastError)
	}
	return fmt.Errorf("issuer %s: %w", c.issuer, ErrKeysUnavailable)
}

// pick finds the key for kid; a token without kid may use the only key.
func (ks *keySet) pick(kid string) (any, bool) {
	if kid == "" {
		if len(ks.all) == 1 {
			return ks.all[0], true
		}
		return nil, false
	}
	k, ok := ks.byKID[kid]
	return k, ok
}

// reload loads the JWKS unless another caller just did (or, with forced,
// unless the last try is more recent than minRefetch), and returns the
// current key set, which may be nil.
func (c *jwksCache) reload(ctx context.Context, forced bool) *keySet {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	cur := c.cur.Load()
	if !c.lastTry.IsZero() {
		if forced && now.Sub(c.lastTry) < c.minRefetch {
			return cur
		}
		if !forced && cur != nil && now.Sub(cur.loaded) < c.refresh {
			return cur // another caller reloaded while we waited
		}
		if !forced && now.Sub(c.lastTry) < c.minRefetch {
			return cur // failing source: retry at most every minRefetch
		}
	}
	c.lastTry = now
	data, err := c.load(ctx)
	var ks *keySet
	if err == nil {
		ks, err = parseJWKS(data, c.alg)
	}
	if err != nil {
		c.lastError = err
		c.log.Warn("JWKS load failed; keeping the keys loaded before", "issuer", c.issuer, "err", err, "have_keys", cur != nil)
		return cur
	}
	c.lastError = nil
	ks.loaded = now
	if ks.skipped > 0 {
		c.log.Debug("JWKS keys skipped", "issuer", c.issuer, "skipped", ks.skipped, "alg", c.alg)
	}
	c.cur.Store(ks)
	return ks
}

// fileLoader reads a JWKS file, capped at maxJWKSBytes.
func fileLoader(path string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s: %w", ErrKeysUnavailable, path, err)
		}
		if len(data) > maxJWKSBytes {
			return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrKeysUnavailable, path, maxJWKSBytes)
		}
		return data, nil
	}
}

// urlLoader fetches a JWKS with client, bounded by timeout and
// maxJWKSBytes. Redirects are not followed.
func urlLoader(client *http.Client, rawURL string, timeout time.Duration) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
		}
		req.Header.Set("Accept", "application/json, application/jwk-set+json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%w: fetching JWKS: %w", ErrKeysUnavailable, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%w: fetching JWKS: HTTP %d", ErrKeysUnavailable, resp.StatusCode)
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%w: reading JWKS: %w", ErrKeysUnavailable, err)
		}
		if len(data) > maxJWKSBytes {
			return nil, fmt.Errorf("%w: JWKS is larger than %d bytes", ErrKeysUnavailable, maxJWKSBytes)
		}
		return data, nil
	}
}

// newJWKSClient is the default JWKS HTTP client: bounded, no redirects,
// no proxy from the environment surprises beyond Go's defaults.
func newJWKSClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
			MaxIdleConns:          2,
			IdleConnTimeout:       90 * time.Second,
		},
	}
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
