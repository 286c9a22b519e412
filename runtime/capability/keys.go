package capability

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// maxKeyFileBytes caps a keyring file.
const maxKeyFileBytes = 1 << 20

// KeyFile is the keyring file as written: the gateway's Ed25519 signing
// keys as private OKP JWKs. The last key signs new tokens; every key
// verifies, so tokens signed before a rotation stay valid until they
// expire or the old key is removed (or revoked).
type KeyFile struct {
	Keys []JWK `json:"keys"`
}

// signingKey is one key of a keyring.
type signingKey struct {
	kid  string
	priv ed25519.PrivateKey
	pub  ed25519.PublicKey
}

// Keyring holds the gateway's signing keys, read from a file that only its
// owner may read (0600). Safe for concurrent use.
type Keyring struct {
	path string

	mu      sync.RWMutex
	keys    map[string]*signingKey
	current *signingKey
	order   []string
	mtime   time.Time
	checked time.Time
}

// OpenKeyring reads the keyring file at path, creating it with one new key
// (mode 0600) when it does not exist. A file readable by others is
// refused: it holds private keys.
func OpenKeyring(path string) (*Keyring, error) {
	k := &Keyring{path: path}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("capability keys: %w", err)
		}
		if err := createKeyFile(path); err != nil {
			return nil, err
		}
	}
	if err := k.load(); err != nil {
		return nil, err
	}
	return k, nil
}

// NewKeyring returns a keyring of one fresh key held in memory only
// (tests, benchmarks).
func NewKeyring() (*Keyring, error) {
	jwk, err := newKey()
	if err != nil {
		return nil, err
	}
	k := &Keyring{}
	if err := k.set(KeyFile{Keys: []JWK{jwk}}); err != nil {
		return nil, err
	}
	return k, nil
}

func (k *Keyring) load() error {
	f, err := os.Open(k.path)
	if err != nil {
		return fmt.Errorf("capability keys: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("capability keys: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("capability keys: %s is readable by others (mode %v); it holds private keys: chmod 600 it", k.path, fi.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return fmt.Errorf("capability keys: %w", err)
	}
	if len(data) > maxKeyFileBytes {
		return fmt.Errorf("capability keys: %s exceeds %d bytes", k.path, maxKeyFileBytes)
	}
	var kf KeyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return fmt.Errorf("capability keys: %s: %w", k.path, err)
	}
	if err := k.set(kf); err != nil {
		return fmt.Errorf("capability keys: %s: %w", k.path, err)
	}
	k.mu.Lock()
	k.mtime = fi.ModTime()
	k.mu.Unlock()
	return nil
}

func (k *Keyring) set(kf KeyFile) error {
	if len(kf.Keys) == 0 {
		return errors.New("no keys")
	}
	keys := make(map[string]*signingKey, len(kf.Keys))
	var order []string
	var cur *signingKey
	for i, j := range kf.Keys {
		pub, err := j.PublicKey()
		if err != nil {
			return fmt.Errorf("keys[%d]: %w", i, err)
		}
		d, err := base64.RawURLEncoding.DecodeString(j.D)
		if err != nil || len(d) != ed25519.SeedSize {
			return fmt.Errorf("keys[%d]: d is not a base64url Ed25519 seed", i)
		}
		priv := ed25519.NewKeyFromSeed(d)
		if !pub.Equal(priv.Public()) {
			return fmt.Errorf("keys[%d]: x does not belong to d", i)
		}
		if j.Kid == "" {
			return fmt.Errorf("keys[%d]: no kid", i)
		}
		if _, dup := keys[j.Kid]; dup {
			return fmt.Errorf("keys[%d]: kid %q twice", i, j.Kid)
		}
		cur = &signingKey{kid: j.Kid, priv: priv, pub: pub}
		keys[j.Kid] = cur
		order = append(order, j.Kid)
	}
	k.mu.Lock()
	k.keys, k.current, k.order = keys, cur, order
	k.mu.Unlock()
	return nil
}

// signer returns the key that signs new tokens.
func (k *Keyring) signer() *signingKey {
	k.refresh()
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.current
}

// CurrentKID names the key that signs new tokens.
func (k *Keyring) CurrentKID() string { return k.signer().kid }

// reloadEvery bounds how often a keyring read from a file looks at it
// again: a rotation or a retirement (`quiver capability keys`, by any
// process sharing the file) is in force within this long, without a
// restart. (Revoking a kid, through the state backend, is in force at the
// next call.)
const reloadEvery = 5 * time.Second

// refresh re-reads the keyring file when it changed, at most once per
// reloadEvery. A file that no longer loads leaves the keys in force.
func (k *Keyring) refresh() {
	if k.path == "" {
		return
	}
	k.mu.Lock()
	now := time.Now()
	stale := now.Sub(k.checked) >= reloadEvery
	if stale {
		k.checked = now
	}
	mtime := k.mtime
	k.mu.Unlock()
	if !stale {
		return
	}
	if fi, err := os.Stat(k.path); err == nil && !fi.ModTime().Equal(mtime) {
		_ = k.load()
	}
}

// lookup returns the public key of kid.
func (k *Keyring) lookup(kid string) (ed25519.PublicKey, bool) {
	k.refresh()
	k.mu.RLock()
	defer k.mu.RUnlock()
	if sk, ok := k.keys[kid]; ok {
		return sk.pub, true
	}
	return nil, false
}

// JWKS is the public key set, as served at /.well-known/quiver-capabilities.json.
func (k *Keyring) JWKS() KeyFile {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := KeyFile{Keys: make([]JWK, 0, len(k.order))}
	for _, kid := range k.order {
		j := PublicJWK(k.keys[kid].pub)
		j.Kid, j.Alg, j.Use = kid, "EdDSA", "sig"
		out.Keys = append(out.Keys, j)
	}
	return out
}

// newKey makes a fresh Ed25519 key whose kid is the first 8 bytes of its
// RFC 7638 thumbprint in hex: hex, not the thumbprint's base64url, because
// an operator types the kid on a command line (`capability keys retire`)
// where one starting with "-" would be read as a flag.
func newKey() (JWK, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return JWK{}, err
	}
	j := PublicJWK(pub)
	tp, err := j.Thumbprint()
	if err != nil {
		return JWK{}, err
	}
	sum, err := base64.RawURLEncoding.DecodeString(tp)
	if err != nil || len(sum) < 8 {
		return JWK{}, fmt.Errorf("capability keys: thumbprint %q: %v", tp, err)
	}
	j.Kid, j.Alg, j.D = hex.EncodeToString(sum[:8]), "EdDSA", base64.RawURLEncoding.EncodeToString(priv.Seed())
	return j, nil
}

// RotateKeyFile adds a new signing key to the keyring file at path
// (creating it) and returns its kid. Older keys stay to verify the tokens
// they signed; RetireKey removes one. The file is replaced atomically with
// mode 0600.
func RotateKeyFile(path string) (string, error) {
	var kf KeyFile
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &kf); err != nil {
			return "", fmt.Errorf("capability keys: %s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("capability keys: %w", err)
	}
	j, err := newKey()
	if err != nil {
		return "", err
	}
	kf.Keys = append(kf.Keys, j)
	return j.Kid, writeKeyFile(path, kf)
}

// RetireKey removes the key kid from the keyring file at path; the tokens
// it signed no longer verify. The last key cannot be retired.
func RetireKey(path, kid string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("capability keys: %w", err)
	}
	var kf KeyFile
	if err := json.Unmarshal(data, &kf); err != nil {
		return fmt.Errorf("capability keys: %s: %w", path, err)
	}
	out := kf.Keys[:0]
	for _, j := range kf.Keys {
		if j.Kid != kid {
			out = append(out, j)
		}
	}
	switch {
	case len(out) == len(kf.Keys):
		return fmt.Errorf("capability keys: no key %q in %s", kid, path)
	case len(out) == 0:
		return fmt.Errorf("capability keys: %q is the only key; rotate first", kid)
	}
	kf.Keys = out
	return writeKeyFile(path, kf)
}

// createKeyFile writes a keyring of one new key at path unless a file is
// there already: replicas starting at once on a shared key_file end up
// with the one keyring the first of them made.
func createKeyFile(path string) error {
	j, err := newKey()
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(KeyFile{Keys: []JWK{j}}, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + "." + j.Kid + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("capability keys: %w", err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("capability keys: %w", err)
	}
	return nil
}

func writeKeyFile(path string, kf KeyFile) error {
	data, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	tmp := fmt.Sprintf("%s.%x.tmp", path, sum[:4])
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("capability keys: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("capability keys: %w", err)
	}
	return nil
}
