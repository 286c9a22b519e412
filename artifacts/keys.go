package artifacts

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Badger key layout. Every key starts with a one-letter key-space and a slash, so
// sibling key-spaces (for example idempotency records under "i/") can share the
// database later without colliding with these:
//
//	a/ <owner key:32> <handle>       -> metaRecord (JSON)       one per handle
//	x/ <expires ns:8 BE> <owner key:32> <handle> -> empty       expiry/eviction index
//	h/ <sha256:32>                   -> blobRecord (binary)     one per live content
//	b/ <blob id:16> <chunk index:4 BE> -> chunk bytes           the content
//	g/ <blob id:16>                  -> empty                   blob whose chunks are garbage
//
// The owner key is sha256(ownerKeyDomain + owner): the owner is part of the meta
// key, so a lookup by another principal is a plain miss on a key that does not
// exist, the very same code path as an unknown handle.
//
// Invariants (kept by committing each change in one Badger transaction):
//   - an a/ record exists iff its x/ entry exists;
//   - h/H.refs equals the number of a/ records with content hash H, and every
//     a/ record with hash H names the blob that h/H names;
//   - a blob is live iff an h/ record names it; every b/ chunk belongs to a live
//     blob, to a blob listed under g/, or to a blob being written right now (and
//     listed under g/ before its first chunk was written);
//   - a live blob's chunks were all written before its h/ record was committed.
const (
	prefixMeta    = "a/"
	prefixExpiry  = "x/"
	prefixHash    = "h/"
	prefixChunk   = "b/"
	prefixGarbage = "g/"
)

const (
	ownerKeyDomain = "quiver/artifacts/owner\x00"
	ownerKeyLen    = sha256.Size
	blobIDLen      = 16
	blobRecordLen  = blobIDLen + 8 + 8 + 4
)

// ownerKey derives the fixed-size key component for an owner.
func ownerKey(owner string) [ownerKeyLen]byte {
	h := sha256.New()
	h.Write([]byte(ownerKeyDomain))
	h.Write([]byte(owner))
	var k [ownerKeyLen]byte
	h.Sum(k[:0])
	return k
}

type blobID [blobIDLen]byte

func newBlobID() blobID {
	var id blobID
	_, _ = rand.Read(id[:])
	return id
}

func metaKey(ok [ownerKeyLen]byte, handle string) []byte {
	k := make([]byte, 0, len(prefixMeta)+ownerKeyLen+len(handle))
	k = append(k, prefixMeta...)
	k = append(k, ok[:]...)
	return append(k, handle...)
}

// expiryKey builds the x/ entry for the meta key mk (which starts with "a/").
func expiryKey(expiresNS int64, mk []byte) []byte {
	if expiresNS < 0 {
		expiresNS = 0
	}
	rest := mk[len(prefixMeta):]
	k := make([]byte, 0, len(prefixExpiry)+8+len(rest))
	k = append(k, prefixExpiry...)
	k = binary.BigEndian.AppendUint64(k, uint64(expiresNS))
	return append(k, rest...)
}

// parseExpiryKey returns the expiry time and the meta key of an x/ entry.
func parseExpiryKey(k []byte) (expiresNS int64, mk []byte, ok bool) {
	if len(k) < len(prefixExpiry)+8+ownerKeyLen+1 || string(k[:len(prefixExpiry)]) != prefixExpiry {
		return 0, nil, false
	}
	expiresNS = int64(binary.BigEndian.Uint64(k[len(prefixExpiry):]))
	rest := k[len(prefixExpiry)+8:]
	mk = make([]byte, 0, len(prefixMeta)+len(rest))
	mk = append(mk, prefixMeta...)
	return expiresNS, append(mk, rest...), true
}

func hashKey(sum [sha256.Size]byte) []byte {
	return append([]byte(prefixHash), sum[:]...)
}

func chunkPrefix(id blobID) []byte {
	return append([]byte(prefixChunk), id[:]...)
}

func chunkKey(id blobID, idx int64) []byte {
	return binary.BigEndian.AppendUint32(chunkPrefix(id), uint32(idx))
}

func garbageKey(id blobID) []byte {
	return append([]byte(prefixGarbage), id[:]...)
}

// blobRecord is the value under h/<sha256>.
type blobRecord struct {
	blob      blobID
	size      int64
	refs      int64
	chunkSize int64
}

func (r blobRecord) encode() []byte {
	b := make([]byte, 0, blobRecordLen)
	b = append(b, r.blob[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(r.size))
	b = binary.BigEndian.AppendUint64(b, uint64(r.refs))
	return binary.BigEndian.AppendUint32(b, uint32(r.chunkSize))
}

func decodeBlobRecord(b []byte) (blobRecord, error) {
	if len(b) != blobRecordLen {
		return blobRecord{}, fmt.Errorf("%w: blob record of %d bytes", ErrCorrupt, len(b))
	}
	var r blobRecord
	copy(r.blob[:], b)
	r.size = int64(binary.BigEndian.Uint64(b[blobIDLen:]))
	r.refs = int64(binary.BigEndian.Uint64(b[blobIDLen+8:]))
	r.chunkSize = int64(binary.BigEndian.Uint32(b[blobIDLen+16:]))
	if r.size < 0 || r.refs < 0 || r.chunkSize <= 0 {
		return blobRecord{}, fmt.Errorf("%w: blob record out of range", ErrCorrupt)
	}
	return r, nil
}

// metaRecord is the value under a/<owner key><handle>. It duplicates the blob id
// and chunk size of the h/ record so that reads need a single lookup.
type metaRecord struct {
	Owner     string `json:"o"`
	MediaType string `json:"m"`
	Label     string `json:"l,omitempty"`
	Size      int64  `json:"s"`
	Hash      string `json:"h"` // hex sha256
	Blob      string `json:"b"` // hex blob id
	ChunkSize int64  `json:"c"`
	Created   int64  `json:"t"` // unix ns
	Expires   int64  `json:"e"` // unix ns
}

func (m metaRecord) encode() ([]byte, error) { return json.Marshal(m) }

func decodeMetaRecord(b []byte) (metaRecord, error) {
	var m metaRecord
	if err := json.Unmarshal(b, &m); err != nil {
		return metaRecord{}, fmt.Errorf("%w: meta record: %v", ErrCorrupt, err)
	}
	if m.Size < 0 || m.ChunkSize <= 0 || len(m.Hash) != 2*sha256.Size || len(m.Blob) != 2*blobIDLen {
		return metaRecord{}, fmt.Errorf("%w: meta record out of range", ErrCorrupt)
	}
	return m, nil
}

func (m metaRecord) blobID() (blobID, error) {
	var id blobID
	if _, err := hex.Decode(id[:], []byte(m.Blob)); err != nil {
		return id, fmt.Errorf("%w: meta record blob id: %v", ErrCorrupt, err)
	}
	return id, nil
}

func (m metaRecord) hashSum() ([sha256.Size]byte, error) {
	var s [sha256.Size]byte
	if _, err := hex.Decode(s[:], []byte(m.Hash)); err != nil {
		return s, fmt.Errorf("%w: meta record hash: %v", ErrCorrupt, err)
	}
	return s, nil
}
