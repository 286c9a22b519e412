package identity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrInvalidToken is matched (with errors.Is) by every error of
// [Verifier.Verify]: the caller is not authenticated. The error is a
// *[TokenError] whose Reason says why.
var ErrInvalidToken = errors.New("invalid token")

// The causes of a *TokenError, matched with errors.Is. ErrUnknownKID and
// ErrKeysUnavailable (jwks.go) are causes too.
var (
	ErrNoToken         = errors.New("no bearer token")
	ErrMalformedHeader = errors.New("malformed Authorization header")
	ErrTokenTooLarge   = errors.New("token too large")
	ErrMalformedToken  = errors.New("malformed token")
	ErrUnknownIssuer   = errors.New("unknown issuer")
	ErrAlgNotAllowed   = errors.New("signing algorithm not allowed for the issuer")
	ErrSignature       = errors.New("bad signature")
	ErrExpired         = errors.New("token expired")
	ErrNotYetValid     = errors.New("token not yet valid")
	ErrAudience        = errors.New("token audience not accepted")
	ErrMissingClaim    = errors.New("required claim missing")
	ErrBadClaim        = errors.New("claim has an invalid value")
	ErrRevoked         = errors.New("token or principal revoked")
	// ErrRevocationsUnavailable: the revocation state could not be read,
	// so the token is neither accepted nor called revoked.
	ErrRevocationsUnavailable = errors.New("revocation state unavailable")
	ErrVerifierInternal       = errors.New("token verification failed")
)

// Reason codes of a *TokenError, one per cause; stable strings for logs,
// receipts and the error_description of a 401.
const (
	ReasonMissingToken    = "missing_token"
	ReasonMalformedHeader = "malformed_authorization"
	ReasonTooLarge        = "token_too_large"
	ReasonMalformedToken  = "malformed_token"
	ReasonUnknownIssuer   = "unknown_issuer"
	ReasonAlgNotAllowed   = "alg_not_allowed"
	ReasonUnknownKID      = "unknown_kid"
	ReasonKeysUnavailable = "keys_unavailable"
	ReasonBadSignature    = "bad_signature"
	ReasonExpired         = "expired"
	ReasonNotYetValid     = "not_yet_valid"
	ReasonWrongAudience   = "wrong_audience"
	ReasonMissingClaim    = "missing_claim"
	ReasonBadClaim        = "bad_claim"
	ReasonRevoked         = "revoked"
	// ReasonStateUnavailable: the revocation state could not be read; the
	// middleware answers 503, a retryable outage, not 401.
	ReasonStateUnavailable = "state_unavailable"
	ReasonInternal         = "verification_failed"
)

// TokenError is why a token was refused. Its message never quotes the
// token.
type TokenError struct {
	// Reason is one of the Reason* codes.
	Reason string
	// Err is the cause: one of the Err* sentinels, possibly wrapping
	// detail.
	Err error
}

// Error implements error.
func (e *TokenError) Error() string { return "invalid token: " + e.Reason + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *TokenError) Unwrap() error { return e.Err }

// Is makes every *TokenError match ErrInvalidToken.
func (e *TokenError) Is(target error) bool { return target == ErrInvalidToken }

func tokenErr(reason string, err error) *TokenError { return &TokenError{Reason: reason, Err: err} }

// Reason returns the reason code of err when it is (or wraps) a
// *TokenError, else ReasonInternal.
func Reason(err error) string {
	var te *TokenError
	if errors.As(err, &te) {
		return te.Reason
	}
	return ReasonInternal
}

// Options tune a Verifier beyond its Config; every field is optional.
type Options struct {
	// Getenv reads the HS256 secrets (default os.Getenv).
	Getenv func(string) string
	// HTTPClient fetches JWKS URLs (default: a client bounded by
	// JWKSTimeout that follows no redirects).
	HTTPClient *http.Client
	// JWKSTimeout bounds one JWKS fetch (default 5 s).
	JWKSTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Revoked, when set, is asked about every otherwise valid token with
	// its jti ("" when the token has none) and its subject, then once more
	// with the principal key ([Principal.Key], "jwt:<issuer>:<sub>") in
	// place of the subject, so that a revocation list may name either;
	// true refuses the token with ReasonRevoked; an error (it cannot tell)
	// refuses it with ReasonStateUnavailable. It must be fast and safe for
	// concurrent use (policy.Incident.Revoked is both).
	Revoked func(ctx context.Context, jti, sub string) (bool, error)
	// Logger receives JWKS load failures (default: discarded).
	Logger *slog.Logger
}

// Verifier validates bearer JWTs against the configured issuers. It is
// safe for concurrent use and holds no goroutine: JWKS keys are loaded
// lazily by the calls that need them.
type Verifier struct {
	cfg      Config
	issuers  map[string]*issuer // by iss claim
	maxBytes int
	now      func() time.Time
	revoked  func(ctx context.Context, jti, sub string) (bool, error)
}

// issuer is one configured issuer, ready to verify.
type issuer struct {
	cfg    IssuerConfig
	skew   time.Duration
	secret []byte     // HS256
	jwks   *jwksCache // RS256, ES256
	claims ClaimNames
}

// NewVerifier validates cfg, reads the HS256 secrets from the environment
// and prepares the JWKS caches. JWKS files and URLs are read when the
// first token needs them (call [Verifier.Preload] to read them now).
func NewVerifier(cfg Config, o Options) (*Verifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.JWKSTimeout <= 0 {
		o.JWKSTimeout = DefaultJWKSTimeout
	}
	if o.HTTPClient == nil {
		o.HTTPClient = newJWKSClient(o.JWKSTimeout)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	v := &Verifier{cfg: cfg, issuers: map[string]*issuer{}, maxBytes: cfg.MaxTokenBytes, now: o.Now, revoked: o.Revoked}
	if v.maxBytes == 0 {
		v.maxBytes = DefaultMaxTokenBytes
	}
	if v.cfg.Realm == "" {
		v.cfg.Realm = DefaultRealm
	}
	for _, ic := range cfg.Issuers {
		is := &issuer{cfg: ic, skew: time.Duration(ic.ClockSkew), claims: ic.Claims}
		if is.skew == 0 {
			is.skew = DefaultClockSkew
		}
		if is.claims.ActorType == "" {
			is.claims.ActorType = "actor_type"
		}
		if is.claims.OrgID == "" {
			is.claims.OrgID = "org_id"
		}
		refresh := time.Duration(ic.JWKSRefresh)
		if refresh == 0 {
			refresh = DefaultJWKSRefresh
		}
		switch {
		case ic.Alg == AlgHS256:
			secret := o.Getenv(ic.HS256SecretEnv)
			if secret == "" {
				return nil, fmt.Errorf("%w: auth issuer %s: environment variable %s is not set", ErrConfig, ic.Name, ic.HS256SecretEnv)
			}
			if len(secret) < MinHS256SecretBytes {
				return nil, fmt.Errorf("%w: auth issuer %s: the secret in %s is shorter than %d bytes", ErrConfig, ic.Name, ic.HS256SecretEnv, MinHS256SecretBytes)
			}
			is.secret = []byte(secret)
		case ic.JWKSFile != "":
			is.jwks = &jwksCache{issuer: ic.Name, alg: ic.Alg, load: fileLoader(ic.JWKSFile), refresh: refresh,
				minRefetch: min(MinJWKSRefresh, refresh), now: o.Now, log: log}
		default:
			is.jwks = &jwksCache{issuer: ic.Name, alg: ic.Alg, load: urlLoader(o.HTTPClient, ic.JWKSURL, o.JWKSTimeout), refresh: refresh,
				minRefetch: min(MinJWKSRefresh, refresh), now: o.Now, log: log}
		}
		v.issuers[ic.Issuer] = is
	}
	return v, nil
}

// Preload loads the keys of every JWKS issuer now and returns the
// failures, joined. A failure is not fatal: the keys are loaded again when
// a token needs them.
func (v *Verifier) Preload(ctx context.Context) error {
	var errs []error
	for _, is := range v.issuers {
		if is.jwks != nil && is.jwks.reload(ctx, false) == nil {
			errs = append(errs, is.jwks.unavailable())
		}
	}
	return errors.Join(errs...)
}

// Realm returns the realm of the WWW-Authenticate challenge.
func (v *Verifier) Realm() string { return v.cfg.Realm }

// Local returns the configured local principal (stdio sessions).
func (v *Verifier) Local() Principal { return v.cfg.Local.Principal() }

// Verify validates a compact JWS bearer token and returns its principal.
// Every error is a *TokenError matching ErrInvalidToken.
func (v *Verifier) Verify(ctx context.Context, token string) (Principal, error) {
	if token == "" {
		return Principal{}, tokenErr(ReasonMissingToken, ErrNoToken)
	}
	if len(token) > v.maxBytes {
		return Principal{}, tokenErr(ReasonTooLarge, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTokenTooLarge, len(token), v.maxBytes))
	}
	if !compactJWS(token) {
		return Principal{}, tokenErr(ReasonMalformedToken, ErrMalformedToken)
	}
	// Pick the issuer by the (still unverified) iss claim; everything the
	// token says is checked against that issuer's pinned settings below.
	unverified, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		return Principal{}, tokenErr(ReasonMalformedToken, fmt.Errorf("%w: %w", ErrMalformedToken, err))
	}
	iss, _ := unverified.Claims.(jwt.MapClaims)["iss"].(string)
	is, ok := v.issuers[iss]
	if !ok {
		return Principal{}, tokenErr(ReasonUnknownIssuer, ErrUnknownIssuer)
	}
	if alg, _ := unverified.Header["alg"].(string); alg != is.cfg.Alg {
		return Principal{}, tokenErr(ReasonAlgNotAllowed, fmt.Errorf("%w: %q, issuer %s takes %s", ErrAlgNotAllowed, oneLine(alg, 16), is.cfg.Name, is.cfg.Alg))
	}
	if _, crit := unverified.Header["crit"]; crit {
		// RFC 7515 §4.1.11: extensions we do not understand must not be
		// ignored.
		return Principal{}, tokenErr(ReasonMalformedToken, fmt.Errorf("%w: crit header not supported", ErrMalformedToken))
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{is.cfg.Alg}),
		jwt.WithIssuer(is.cfg.Issuer),
		jwt.WithAudience(is.cfg.Audiences...),
		jwt.WithLeeway(is.skew),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(v.now),
	)
	claims := jwt.MapClaims{}
	_, err = parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		if is.secret != nil {
			return is.secret, nil
		}
		kid, _ := t.Header["kid"].(string)
		return is.jwks.key(ctx, kid)
	})
	if err != nil {
		return Principal{}, classifyJWT(err)
	}
	p, err := is.principal(claims)
	if err != nil {
		return Principal{}, err
	}
	if v.revoked != nil {
		for _, who := range []string{p.Sub, p.Key()} {
			revoked, err := v.revoked(ctx, p.JTI, who)
			if err != nil {
				return Principal{}, tokenErr(ReasonStateUnavailable, fmt.Errorf("%w: %w", ErrRevocationsUnavailable, err))
			}
			if revoked {
				return Principal{}, tokenErr(ReasonRevoked, ErrRevoked)
			}
		}
	}
	return p, nil
}

// classifyJWT maps a jwt/v5 parse error to a *TokenError.
func classifyJWT(err error) *TokenError {
	switch {
	case errors.Is(err, ErrUnknownKID):
		return tokenErr(ReasonUnknownKID, err)
	case errors.Is(err, ErrKeysUnavailable):
		return tokenErr(ReasonKeysUnavailable, err)
	case errors.Is(err, jwt.ErrTokenMalformed):
		return tokenErr(ReasonMalformedToken, fmt.Errorf("%w: %w", ErrMalformedToken, err))
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return tokenErr(ReasonBadSignature, fmt.Errorf("%w: %w", ErrSignature, err))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return tokenErr(ReasonMissingClaim, fmt.Errorf("%w: %w", ErrMissingClaim, err))
	case errors.Is(err, jwt.ErrTokenExpired):
		return tokenErr(ReasonExpired, fmt.Errorf("%w: %w", ErrExpired, err))
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return tokenErr(ReasonNotYetValid, fmt.Errorf("%w: %w", ErrNotYetValid, err))
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return tokenErr(ReasonWrongAudience, fmt.Errorf("%w: %w", ErrAudience, err))
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return tokenErr(ReasonUnknownIssuer, fmt.Errorf("%w: %w", ErrUnknownIssuer, err))
	case errors.Is(err, jwt.ErrInvalidType), errors.Is(err, jwt.ErrTokenInvalidClaims):
		return tokenErr(ReasonBadClaim, fmt.Errorf("%w: %w", ErrBadClaim, err))
	case errors.Is(err, jwt.ErrTokenUnverifiable), errors.Is(err, jwt.ErrInvalidKeyType), errors.Is(err, jwt.ErrInvalidKey):
		return tokenErr(ReasonBadSignature, fmt.Errorf("%w: %w", ErrSignature, err))
	}
	return tokenErr(ReasonInternal, fmt.Errorf("%w: %w", ErrVerifierInternal, err))
}

// principal builds the principal of a verified token's claims.
func (is *issuer) principal(claims jwt.MapClaims) (Principal, error) {
	p := Principal{Issuer: is.cfg.Name, Claims: maps.Clone(map[string]any(claims))}
	str := func(name string) (string, error) {
		v, ok := claims[name]
		if !ok || v == nil {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", tokenErr(ReasonBadClaim, fmt.Errorf("%w: %s must be a string", ErrBadClaim, oneLine(name, 64)))
		}
		return s, nil
	}
	var err error
	if p.Sub, err = str("sub"); err != nil {
		return Principal{}, err
	}
	if p.Sub == "" {
		return Principal{}, tokenErr(ReasonMissingClaim, fmt.Errorf("%w: sub", ErrMissingClaim))
	}
	if p.JTI, err = str("jti"); err != nil {
		return Principal{}, err
	}
	if p.ActorType, err = str(is.claims.ActorType); err != nil {
		return Principal{}, err
	}
	switch {
	case p.ActorType == "":
		p.ActorType = is.cfg.DefaultActorType
		if p.ActorType == "" {
			p.ActorType = ActorUser
		}
	case !validActor(p.ActorType):
		return Principal{}, tokenErr(ReasonBadClaim, fmt.Errorf("%w: %s must be user, agent or system", ErrBadClaim, oneLine(is.claims.ActorType, 64)))
	}
	if is.claims.ClientID != "" {
		p.ClientID, err = str(is.claims.ClientID)
	} else if p.ClientID, err = str("client_id"); err == nil && p.ClientID == "" {
		p.ClientID, err = str("azp")
	}
	if err != nil {
		return Principal{}, err
	}
	if p.OrgID, err = str(is.claims.OrgID); err != nil {
		return Principal{}, err
	}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		p.ExpiresAt = exp.Time
	}
	return p, nil
}

// compactJWS reports whether s has the shape of a compact JWS: three
// base64url segments separated by dots. The signature may be empty here
// (an alg "none" token), so that such a token is refused for its
// algorithm.
func compactJWS(s string) bool {
	dots := 0
	seg := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if seg == 0 {
				return false
			}
			dots++
			seg = 0
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			seg++
		default:
			return false
		}
	}
	return dots == 2
}

// oneLine quotes outside text safely in an error: printable ASCII only,
// capped at n bytes.
func oneLine(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		} else {
			b.WriteByte('?')
		}
	}
	return b.String()
}
