package capability

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/quiver-mcp/quiver/runtime/receipts"
)

// ProofClaims are the claims of a proof of possession: a fresh nonce
// (jti), the time (iat), the tool called and the sha256 of its canonical
// arguments, and the session when the token is bound to one.
type ProofClaims struct {
	jwt.RegisteredClaims
	ToolID     string `json:"tool_id"`
	ArgsSHA256 string `json:"args_sha256"`
	Session    string `json:"session,omitempty"`
}

// ArgsSHA256 is the args_sha256 of a proof: the hex sha256 of the
// arguments as canonical JSON (object keys sorted, no insignificant
// whitespace, no HTML escaping, numbers as written); absent or null
// arguments are {}. It is the args_hash of receipts and approvals.
func ArgsSHA256(args json.RawMessage) (string, error) {
	h, _, err := receipts.ArgsHash(args)
	return h, err
}

// NewProof signs a proof for one call with the holder's private key: what
// a client sends as dev.quiver-mcp/capability_proof beside the token.
// session is "" unless the token is bound to a session.
func NewProof(priv ed25519.PrivateKey, toolID string, args json.RawMessage, session string, at time.Time) (string, error) {
	h, err := ArgsSHA256(args)
	if err != nil {
		return "", err
	}
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", err
	}
	pc := &ProofClaims{RegisteredClaims: jwt.RegisteredClaims{ID: base64.RawURLEncoding.EncodeToString(nonce[:]), IssuedAt: jwt.NewNumericDate(at)},
		ToolID: toolID, ArgsSHA256: h, Session: session}
	return signProof(priv, pc)
}

var proofParser = jwt.NewParser(jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}), jwt.WithoutClaimsValidation())

// parseProof verifies a proof's signature against the key in its header,
// which must be the key whose thumbprint is jkt.
func parseProof(proof, jkt string) (*ProofClaims, string, error) {
	if len(proof) > MaxProofBytes {
		return nil, ReasonProofInvalid, fmt.Errorf("the proof exceeds %d bytes", MaxProofBytes)
	}
	pc := &ProofClaims{}
	var keyMismatch bool
	_, err := proofParser.ParseWithClaims(proof, pc, func(t *jwt.Token) (any, error) {
		if typ, _ := t.Header["typ"].(string); typ != ProofType {
			return nil, fmt.Errorf("%w: typ must be %s", ErrMalformed, ProofType)
		}
		k, err := jwkFromHeader(t.Header["jwk"])
		if err != nil {
			return nil, err
		}
		tp, err := k.Thumbprint()
		if err != nil {
			return nil, err
		}
		if tp != jkt {
			keyMismatch = true
			return nil, errors.New("the proof's key is not the token's cnf.jkt")
		}
		return k.PublicKey()
	})
	switch {
	case err == nil:
	case keyMismatch:
		return nil, ReasonProofKeyMismatch, err
	default:
		return nil, ReasonProofInvalid, err
	}
	if pc.ID == "" || len(pc.ID) > 128 || pc.IssuedAt == nil {
		return nil, ReasonProofInvalid, errors.New("the proof needs jti (at most 128 characters) and iat")
	}
	return pc, "", nil
}
