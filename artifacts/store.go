// Package artifacts stores the large tool results that the context firewall keeps
// out of an agent's context, so that tool_view can later hand back bounded slices
// of them.
//
// An artifact is an immutable byte string with a little metadata, addressed by an
// opaque, unguessable handle ("art_" followed by 26 base32 characters, 128 random
// bits). Every artifact belongs to the principal (an opaque owner key chosen by the
// caller) whose call produced it; a handle presented by any other principal behaves
// exactly like a handle that does not exist and yields [ErrNotFound].
//
// [Store] is the interface the firewall and runtime program against. [BadgerStore]
// is the embedded default: a Badger database on disk under a state directory, or
// Badger's own in-memory mode for tests. It stores content once per sha256 digest
// (reference counted across handles and principals), expires artifacts after a TTL,
// keeps the total stored bytes under a quota by evicting the artifacts that expire
// soonest, and survives crashes: an artifact whose Put returned is readable after a
// restart and a partially written one is never served.
package artifacts

import (
	"context"
	"errors"
	"io"
	"time"
)

// Sentinel errors, for errors.Is. Every error about the caller's input or an
// artifact's state wraps one of these; a cancelled context yields the context's
// error; failures of the underlying storage are wrapped with an "artifacts:"
// prefix and match none of them.
var (
	// ErrNotFound reports an unknown, expired, deleted or evicted handle, or a
	// handle that belongs to another principal. The cases are deliberately
	// indistinguishable.
	ErrNotFound = errors.New("artifacts: not found")
	// ErrTooLarge reports an artifact that cannot fit under the store's byte quota
	// (it is larger than the quota, or in-flight writes hold the rest of it).
	// Nothing has been written when it is returned.
	ErrTooLarge = errors.New("artifacts: too large")
	// ErrInvalid reports bad input: an empty owner, a malformed handle, negative
	// offsets or lengths, an oversized read, inconsistent PutInput, bad Options.
	ErrInvalid = errors.New("artifacts: invalid argument")
	// ErrOutOfRange reports a read whose offset lies beyond the end of the artifact.
	ErrOutOfRange = errors.New("artifacts: offset out of range")
	// ErrClosed reports use of a store after Close.
	ErrClosed = errors.New("artifacts: store closed")
	// ErrCorrupt reports stored data that fails an integrity check (a missing or
	// wrongly sized chunk, or content whose sha256 differs from its record).
	ErrCorrupt = errors.New("artifacts: corrupt data")
)

// Defaults applied by [OpenBadger] to zero-valued [Options] fields.
const (
	// DefaultTTL is how long an artifact lives when Options.TTL is zero.
	DefaultTTL = 24 * time.Hour
	// DefaultMaxBytes is the total content quota when Options.MaxBytes is zero.
	DefaultMaxBytes int64 = 1 << 30
	// DefaultSweepInterval is how often the background loop removes expired
	// artifacts and runs Badger's value-log GC when Options.SweepInterval is zero.
	DefaultSweepInterval = time.Minute
	// DefaultMediaType is recorded when PutInput.MediaType is empty.
	DefaultMediaType = "application/octet-stream"
)

// Limits on caller-supplied values.
const (
	// MaxReadBytes caps n in ReadAt; stream with Open for more.
	MaxReadBytes int64 = 4 << 20
	// MaxOwnerBytes caps the length of an owner key.
	MaxOwnerBytes = 1024
	// MaxMediaTypeBytes caps the length of PutInput.MediaType.
	MaxMediaTypeBytes = 255
	// MaxLabelBytes caps the length of PutInput.Label.
	MaxLabelBytes = 1024
)

// Store keeps artifacts for the context firewall. Implementations are safe for
// concurrent use. Every method taking an owner returns [ErrNotFound] for a handle
// that owner did not create, exactly as for a handle that never existed.
type Store interface {
	// Put stores the content described by in on behalf of owner and returns its
	// metadata, including a fresh handle. It is durable when Put returns.
	Put(ctx context.Context, owner string, in PutInput) (Meta, error)
	// Stat returns the metadata of owner's artifact handle.
	Stat(ctx context.Context, owner, handle string) (Meta, error)
	// ReadAt returns up to n bytes (n <= MaxReadBytes) starting at byte off.
	// A result shorter than n means the artifact ended; off == size yields an
	// empty result and off > size yields ErrOutOfRange.
	ReadAt(ctx context.Context, owner, handle string, off, n int64) ([]byte, error)
	// Open streams the whole content of owner's artifact. The stream stays
	// readable even if the artifact is deleted or evicted meanwhile, verifies the
	// sha256 at the end (ErrCorrupt on mismatch) and must be closed. ctx bounds
	// the whole stream.
	Open(ctx context.Context, owner, handle string) (io.ReadCloser, error)
	// Delete removes owner's artifact handle. Content shared with other handles
	// stays readable through them.
	Delete(ctx context.Context, owner, handle string) error
	// Close releases the store. Later calls return ErrClosed.
	Close() error
}

// PutInput describes content to store. Set exactly one of Data or Body.
type PutInput struct {
	// MediaType is the content's media type, e.g. "application/json";
	// DefaultMediaType when empty.
	MediaType string
	// Label is a short human-readable description shown to the agent.
	Label string
	// Data is the content when it is already in memory. It is not retained.
	Data []byte
	// Body streams the content; it must yield exactly Size bytes.
	Body io.Reader
	// Size is the declared length of Body (ignored with Data). It is checked
	// against the quota before anything is read or written.
	Size int64
}

// Meta describes a stored artifact. Its JSON form is the shape of an entry in a
// result envelope's artifacts list (plus timestamps); the owner is never
// serialised.
type Meta struct {
	// Handle is the artifact's opaque, unguessable identifier.
	Handle string `json:"handle"`
	// Owner is the principal that created the artifact.
	Owner string `json:"-"`
	// MediaType is the content's media type.
	MediaType string `json:"media_type"`
	// SizeBytes is the content length in bytes.
	SizeBytes int64 `json:"size_bytes"`
	// Label is the caller's description.
	Label string `json:"label,omitempty"`
	// ContentHash is the lowercase hex sha256 of the content.
	ContentHash string `json:"content_hash"`
	// CreatedAt is when Put committed the artifact (store clock, UTC).
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the artifact stops being readable.
	ExpiresAt time.Time `json:"expires_at"`
}
