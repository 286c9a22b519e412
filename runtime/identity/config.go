package identity

import (
	"errors"
	"fmt"
	"net/url"
	"os/user"
	"regexp"
	"slices"
	"time"

	"github.com/quiver-mcp/quiver/runtime/units"
)

// Defaults of the auth configuration.
const (
	// DefaultRealm is the realm of the WWW-Authenticate challenge.
	DefaultRealm = "quiver"
	// DefaultClockSkew is the tolerance on exp and nbf.
	DefaultClockSkew = 60 * time.Second
	// MaxClockSkew bounds a configured clock skew.
	MaxClockSkew = 10 * time.Minute
	// DefaultMaxTokenBytes caps a bearer token before it is parsed.
	DefaultMaxTokenBytes = 8 << 10
	// DefaultJWKSRefresh is how long fetched or read JWKS keys are used
	// before they are fetched or read again.
	DefaultJWKSRefresh = 10 * time.Minute
	// MinJWKSRefresh bounds a configured refresh interval, and is the
	// shortest interval between two fetches triggered by an unknown kid.
	MinJWKSRefresh = 10 * time.Second
	// MinHS256SecretBytes is the shortest accepted HS256 secret (RFC 7518
	// §3.2: a key of at least the hash size).
	MinHS256SecretBytes = 32
)

// Algorithms an issuer may be pinned to.
const (
	AlgHS256 = "HS256"
	AlgRS256 = "RS256"
	AlgES256 = "ES256"
)

// ErrConfig is matched (with errors.Is) by every error of
// [Config.Validate] and of building a [Verifier] from a configuration.
var ErrConfig = errors.New("invalid auth configuration")

// Config is the auth block of the configuration: who may call quiver over
// HTTP, and who the caller of a stdio session is.
//
//	auth:
//	  realm: quiver
//	  max_token_bytes: 8192
//	  issuers:
//	    - name: corp
//	      iss: https://idp.example.com/
//	      audiences: [quiver]
//	      alg: RS256
//	      jwks_url: https://idp.example.com/.well-known/jwks.json
//	      jwks_refresh: 10m
//	      clock_skew: 60s
//	    - name: ci
//	      iss: quiver-ci
//	      audiences: [quiver]
//	      alg: HS256
//	      hs256_secret_env: QUIVER_CI_JWT_SECRET
//	  local: {sub: alice, actor_type: user}
type Config struct {
	// Realm is the realm of the WWW-Authenticate challenge (default
	// "quiver").
	Realm string `json:"realm" yaml:"realm"`
	// MaxTokenBytes caps a bearer token (default 8 KiB); longer ones are
	// refused unparsed.
	MaxTokenBytes int `json:"max_token_bytes" yaml:"max_token_bytes"`
	// Issuers are the token issuers trusted over HTTP. With none, HTTP
	// requests cannot authenticate.
	Issuers []IssuerConfig `json:"issuers" yaml:"issuers"`
	// Local is the principal of stdio sessions.
	Local LocalConfig `json:"local" yaml:"local"`
}

// IssuerConfig is one trusted token issuer. Exactly one key source is set:
// HS256SecretEnv for HS256, JWKSFile or JWKSURL for RS256 and ES256.
type IssuerConfig struct {
	// Name identifies the issuer in principal keys, logs and receipts:
	// 1-64 of a-z 0-9 _ - (no ':').
	Name string `json:"name" yaml:"name"`
	// Issuer is the exact iss claim of its tokens.
	Issuer string `json:"iss" yaml:"iss"`
	// Audiences lists the accepted aud values; a token must carry at
	// least one of them. At least one is required.
	Audiences []string `json:"audiences" yaml:"audiences,flow"`
	// Alg pins the signing algorithm: HS256, RS256 or ES256. A token
	// signed otherwise (including "none") is refused.
	Alg string `json:"alg" yaml:"alg"`
	// HS256SecretEnv names the environment variable holding the HS256
	// secret (at least 32 bytes).
	HS256SecretEnv string `json:"hs256_secret_env,omitempty" yaml:"hs256_secret_env,omitempty"`
	// JWKSFile is the path of a JWKS (RFC 7517) document, re-read when it
	// changes, at most every JWKSRefresh.
	JWKSFile string `json:"jwks_file,omitempty" yaml:"jwks_file,omitempty"`
	// JWKSURL is an https (or loopback http) URL of a JWKS document.
	JWKSURL string `json:"jwks_url,omitempty" yaml:"jwks_url,omitempty"`
	// JWKSRefresh is how long keys are kept before the JWKS is read again
	// (default 10m, at least 10s).
	JWKSRefresh units.Duration `json:"jwks_refresh,omitempty" yaml:"jwks_refresh,omitempty"`
	// ClockSkew is the tolerance on exp and nbf (default 60s, at most
	// 10m).
	ClockSkew units.Duration `json:"clock_skew,omitempty" yaml:"clock_skew,omitempty"`
	// Claims names the claims that fill the principal (defaults:
	// actor_type, client_id falling back to azp, org_id).
	Claims ClaimNames `json:"claims,omitzero" yaml:"claims,omitempty"`
	// DefaultActorType is the actor type of tokens without an actor type
	// claim (default "user").
	DefaultActorType string `json:"default_actor_type,omitempty" yaml:"default_actor_type,omitempty"`
}

// ClaimNames names the token claims a principal's fields come from.
type ClaimNames struct {
	// ActorType (default "actor_type"): user, agent or system; any other
	// value refuses the token.
	ActorType string `json:"actor_type,omitempty" yaml:"actor_type,omitempty"`
	// ClientID (default "client_id", then "azp").
	ClientID string `json:"client_id,omitempty" yaml:"client_id,omitempty"`
	// OrgID (default "org_id").
	OrgID string `json:"org_id,omitempty" yaml:"org_id,omitempty"`
}

// LocalConfig is the principal of stdio sessions, where the process owner
// is the trust boundary and no token is presented.
type LocalConfig struct {
	// Sub defaults to the process owner's user name, else "local".
	Sub string `json:"sub,omitempty" yaml:"sub,omitempty"`
	// ActorType defaults to "user".
	ActorType string `json:"actor_type,omitempty" yaml:"actor_type,omitempty"`
	// OrgID is optional.
	OrgID string `json:"org_id,omitempty" yaml:"org_id,omitempty"`
	// Claims are extra claims the policy can match on (for example
	// roles). Optional.
	Claims map[string]any `json:"claims,omitempty" yaml:"claims,omitempty"`
}

// Principal returns the local principal: Sub (default the process
// owner's user name, else "local"), with Issuer [LocalIssuer].
func (l LocalConfig) Principal() Principal {
	p := Principal{Sub: l.Sub, ActorType: l.ActorType, OrgID: l.OrgID, Issuer: LocalIssuer, Claims: l.Claims}
	if p.Sub == "" {
		p.Sub = "local"
		if u, err := user.Current(); err == nil && u.Username != "" {
			p.Sub = u.Username
		}
	}
	if p.ActorType == "" {
		p.ActorType = ActorUser
	}
	return p
}

var issuerNameRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// validActor reports whether s is an actor type.
func validActor(s string) bool { return s == ActorUser || s == ActorAgent || s == ActorSystem }

// Validate checks c and returns every problem found, each naming its
// field (for example "auth.issuers[1].alg"), joined; every error matches
// [ErrConfig]. It reads nothing: a missing secret variable or JWKS file is
// reported by [NewVerifier].
func (c Config) Validate() error {
	var errs []error
	fail := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: auth.%s: %s", ErrConfig, field, fmt.Sprintf(format, args...)))
	}
	if c.MaxTokenBytes < 0 || c.MaxTokenBytes > 1<<20 {
		fail("max_token_bytes", "must be between 1 and 1048576 (0: default %d)", DefaultMaxTokenBytes)
	}
	names := map[string]bool{}
	isses := map[string]bool{}
	for i, is := range c.Issuers {
		f := fmt.Sprintf("issuers[%d]", i)
		switch {
		case !issuerNameRE.MatchString(is.Name):
			fail(f+".name", "must be 1-64 of the characters a-z 0-9 _ -")
		case is.Name == LocalIssuer:
			fail(f+".name", "%q is reserved for the local principal", LocalIssuer)
		case names[is.Name]:
			fail(f+".name", "issuer %q configured twice", is.Name)
		}
		names[is.Name] = true
		if is.Issuer == "" {
			fail(f+".iss", "is required")
		} else if isses[is.Issuer] {
			fail(f+".iss", "iss %q configured twice", is.Issuer)
		}
		isses[is.Issuer] = true
		if len(is.Audiences) == 0 {
			fail(f+".audiences", "at least one audience is required")
		}
		if slices.Contains(is.Audiences, "") {
			fail(f+".audiences", "an audience is empty")
		}
		sources := 0
		for _, s := range []string{is.HS256SecretEnv, is.JWKSFile, is.JWKSURL} {
			if s != "" {
				sources++
			}
		}
		switch is.Alg {
		case AlgHS256:
			if is.HS256SecretEnv == "" || sources != 1 {
				fail(f, "alg HS256 takes hs256_secret_env and no jwks_file or jwks_url")
			} else if !envNameRE.MatchString(is.HS256SecretEnv) {
				fail(f+".hs256_secret_env", "must be an environment variable name")
			}
		case AlgRS256, AlgES256:
			if sources != 1 || is.HS256SecretEnv != "" {
				fail(f, "alg %s takes exactly one of jwks_file or jwks_url", is.Alg)
			}
			if is.JWKSURL != "" {
				if err := checkJWKSURL(is.JWKSURL); err != nil {
					fail(f+".jwks_url", "%v", err)
				}
			}
		default:
			fail(f+".alg", "must be one of HS256, RS256, ES256")
		}
		if is.JWKSRefresh != 0 && (time.Duration(is.JWKSRefresh) < MinJWKSRefresh || time.Duration(is.JWKSRefresh) > 24*time.Hour) {
			fail(f+".jwks_refresh", "must be between %s and 24h", MinJWKSRefresh)
		}
		if is.ClockSkew < 0 || time.Duration(is.ClockSkew) > MaxClockSkew {
			fail(f+".clock_skew", "must be between 0s and %s", MaxClockSkew)
		}
		if is.DefaultActorType != "" && !validActor(is.DefaultActorType) {
			fail(f+".default_actor_type", "must be user, agent or system")
		}
	}
	if c.Local.ActorType != "" && !validActor(c.Local.ActorType) {
		fail("local.actor_type", "must be user, agent or system")
	}
	return errors.Join(errs...)
}

// checkJWKSURL accepts https URLs, and http URLs on a loopback host (for
// tests and sidecars).
func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return errors.New("must be an absolute https URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
		return errors.New("must use https (http is accepted only for loopback hosts)")
	}
	return errors.New("must be an absolute https URL")
}
