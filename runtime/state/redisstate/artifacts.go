package redisstate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/runtime/state"
)

// Artifact storage tuning.
const (
	// chunkSize splits content into 1 MiB string values: ReadAt fetches only
	// the chunks its range overlaps, and no single reply is large.
	chunkSize int64 = 1 << 20
	// pendingTTL is how long a Put may take between reserving its bytes and
	// committing. A reservation older than this (its writer crashed or
	// stalled) is reclaimed by the next Put on any replica.
	pendingTTL = 15 * time.Minute
	// grace is how long the chunks of a deleted, evicted or expired artifact
	// stay readable, so that a stream opened before the removal can finish.
	// They briefly occupy memory beyond the quota.
	grace = time.Minute
	// reclaimBatch bounds the expired artifacts one script call reclaims.
	reclaimBatch = 256
	// cleanupTimeout bounds releasing a failed Put's reservation, which runs
	// even when the Put's context has ended.
	cleanupTimeout = 5 * time.Second
)

// luaCommon holds helpers shared by the artifact scripts. KEYS[1] is the
// expiry index (a sorted set of committed artifacts by expiry, in ms),
// KEYS[2] the reservations (a sorted set of Puts in flight by deadline),
// KEYS[3] the bytes of committed artifacts, KEYS[4] the bytes reserved by
// Puts in flight. ARGV[1] is the artifact key prefix. A member is
// "<owner key>:<handle>|<blob>|<size>|<chunks>" (the owner key and handle
// are empty for a reservation).
const luaCommon = `
local A = ARGV[1]
local function parse(m)
  local ref, blob, size, n = string.match(m, '^(.*)|(%x+)|(%d+)|(%d+)$')
  return ref, blob, tonumber(size), tonumber(n)
end
local function counter(k) return tonumber(redis.call('GET', k) or '0') end
local function drop_chunks(blob, n, grace)
  for i = 0, n - 1 do
    local k = A .. 'c:' .. blob .. ':' .. i
    if grace > 0 then redis.call('PEXPIRE', k, grace) else redis.call('DEL', k) end
  end
end
-- remove deletes a committed artifact (its chunks stay readable for grace
-- ms) and returns its size, or -1 when it was not indexed.
local function remove(m, grace)
  if redis.call('ZREM', KEYS[1], m) == 0 then return -1 end
  local ref, blob, size, n = parse(m)
  if not ref then return 0 end
  redis.call('DEL', A .. 'm:' .. ref)
  drop_chunks(blob, n, grace)
  redis.call('DECRBY', KEYS[3], size)
  return size
end
-- unreserve gives up a reservation and deletes its chunks.
local function unreserve(m)
  local _, blob, size, n = parse(m)
  if not blob then return end
  drop_chunks(blob, n, 0)
  if redis.call('ZSCORE', KEYS[2], m) then
    redis.call('DECRBY', KEYS[4], size)
    redis.call('ZREM', KEYS[2], m)
  end
end
-- reclaim removes expired artifacts and abandoned reservations.
local function reclaim(now, grace, batch)
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, batch)) do remove(m, grace) end
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, batch)) do unreserve(m) end
end
-- make_room evicts the artifacts that expire soonest until need more bytes
-- fit under quota. It returns true and the number evicted, or false and
-- the bytes in use when they cannot fit (evicting nothing when reservations
-- alone leave too little room).
local function make_room(need, quota, grace)
  local used, reserved = counter(KEYS[3]), counter(KEYS[4])
  if reserved + need > quota then return false, used + reserved end
  local evicted = 0
  while used + reserved + need > quota do
    local first = redis.call('ZRANGE', KEYS[1], 0, 0)
    if #first == 0 then return false, used + reserved end
    local freed = remove(first[1], grace)
    if freed > 0 then used = used - freed end
    evicted = evicted + 1
  end
  return true, evicted
end
`

// Scripts start with a shebang (Redis 7): the server then refuses a script
// that writes as a whole, before it runs, when it is at maxmemory, instead
// of failing at its first write and leaving the steps before applied.
// Scripts that only free memory may run at maxmemory.
const (
	shebang         = "#!lua\n"
	shebangAllowOOM = "#!lua flags=allow-oom\n"
)

// reserveScript reclaims (ARGV[2] is now in ms, ARGV[7] the grace in ms,
// ARGV[8] the reclaim batch), then, unless ARGV[5] is empty, makes room for
// ARGV[3] bytes under the quota ARGV[4] and reserves them as member ARGV[5]
// until ARGV[6]. It returns {1, evicted} or {0, bytes in use}.
var reserveScript = redis.NewScript(shebang + luaCommon + `
local need, quota, g = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[7])
reclaim(tonumber(ARGV[2]), g, tonumber(ARGV[8]))
if ARGV[5] == '' then return {1, 0} end
local ok, x = make_room(need, quota, g)
if not ok then return {0, x} end
redis.call('INCRBY', KEYS[4], need)
redis.call('ZADD', KEYS[2], ARGV[6], ARGV[5])
return {1, x}
`)

// commitScript turns reservation ARGV[2] into the artifact ARGV[3]: it
// checks every chunk is there (extending them to ARGV[7] ms), writes the
// metadata ARGV[5] under "m:" ARGV[4] for ARGV[6] ms and indexes the
// artifact at expiry ARGV[8]. It returns 1, or 0 when the reservation was
// reclaimed or a chunk is missing (then nothing is committed).
var commitScript = redis.NewScript(shebang + luaCommon + `
if redis.call('ZSCORE', KEYS[2], ARGV[2]) == false then return 0 end
local _, blob, size, n = parse(ARGV[2])
for i = 0, n - 1 do
  if redis.call('PEXPIRE', A .. 'c:' .. blob .. ':' .. i, ARGV[7]) == 0 then
    unreserve(ARGV[2])
    return 0
  end
end
redis.call('SET', A .. 'm:' .. ARGV[4], ARGV[5], 'PX', ARGV[6])
redis.call('ZADD', KEYS[1], ARGV[8], ARGV[3])
redis.call('INCRBY', KEYS[3], size)
redis.call('DECRBY', KEYS[4], size)
redis.call('ZREM', KEYS[2], ARGV[2])
return 1
`)

// putScript stores an artifact of at most one chunk in one step: reclaim
// and make room as reserveScript does (ARGV[2] now, ARGV[3] size, ARGV[4]
// quota, ARGV[5] grace, ARGV[6] batch), then write the chunk ARGV[13] (if
// any) under blob ARGV[12] for ARGV[10] ms, the metadata ARGV[8] under "m:"
// ARGV[7] for ARGV[9] ms, and index member ARGV[14] at expiry ARGV[11]. It
// returns {1, evicted} or {0, bytes in use}.
var putScript = redis.NewScript(shebang + luaCommon + `
local need, g = tonumber(ARGV[3]), tonumber(ARGV[5])
reclaim(tonumber(ARGV[2]), g, tonumber(ARGV[6]))
local ok, x = make_room(need, tonumber(ARGV[4]), g)
if not ok then return {0, x} end
if need > 0 then redis.call('SET', A .. 'c:' .. ARGV[12] .. ':0', ARGV[13], 'PX', ARGV[10]) end
redis.call('SET', A .. 'm:' .. ARGV[7], ARGV[8], 'PX', ARGV[9])
redis.call('ZADD', KEYS[1], ARGV[11], ARGV[14])
redis.call('INCRBY', KEYS[3], need)
return {1, x}
`)

// releaseScript gives up reservation ARGV[2]: its chunks go and its bytes
// are freed.
var releaseScript = redis.NewScript(shebangAllowOOM + luaCommon + `
unreserve(ARGV[2])
return 1
`)

// deleteScript removes the artifact ARGV[2], leaving its chunks readable
// for ARGV[3] ms. It returns 1, or 0 when it was already gone.
var deleteScript = redis.NewScript(shebangAllowOOM + luaCommon + `
if remove(ARGV[2], tonumber(ARGV[3])) < 0 then return 0 end
return 1
`)

// readScript returns the bytes ReadAt needs from the chunks KEYS: from
// offset ARGV[1] of the first chunk to offset ARGV[2] (inclusive) of the
// last, each chunk only when its length is ARGV[2 + i] (nil otherwise: a
// missing or damaged chunk). It only reads, so it runs even at maxmemory.
var readScript = redis.NewScript(`#!lua flags=no-writes
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('STRLEN', k) ~= tonumber(ARGV[2 + i]) then
    out[i] = false
  else
    local from, to = 0, -1
    if i == 1 then from = tonumber(ARGV[1]) end
    if i == #KEYS then to = tonumber(ARGV[2]) end
    out[i] = redis.call('GETRANGE', k, from, to)
  end
end
return out
`)

// Store is the redis [artifacts.Store]. It keeps the Badger store's
// semantics across replicas:
//
//   - Handles are artifacts.NewHandle's; the metadata key embeds
//     sha256(owner), so another owner's handle is a plain miss, exactly
//     like an unknown one.
//   - Content is written in 1 MiB chunks first and the metadata last, by a
//     script that checks every chunk is there: a partial artifact is never
//     visible. Every key has a TTL (chunks a little longer than their
//     metadata), so nothing outlives its artifact by more than a minute even
//     if no replica runs again.
//   - The byte quota (MaxBytes) is kept by scripts, atomically across
//     replicas: a usage counter, a sorted set of committed artifacts by
//     expiry and one of reservations by deadline. A Put reserves its bytes
//     before writing (reclaiming expired artifacts and abandoned
//     reservations, then evicting the artifacts that expire soonest, or
//     ErrTooLarge when reservations in flight hold the rest), commits or
//     releases them. Content is not deduplicated.
//   - A Put is as durable as the server's persistence makes it (appendonly
//     with appendfsync everysec or always); without persistence a server
//     restart loses every artifact, consistently with its accounting.
//   - Open streams chunk by chunk and checks the sha256 at the end; a
//     stream survives a Delete or eviction for a minute (grace).
type Store struct {
	c        *conn
	prefix   string // c.prefix + "a:"
	keys     []string
	ttl      time.Duration
	maxBytes int64
	now      func() time.Time
	log      *slog.Logger
	closed   atomic.Bool
}

var _ artifacts.Store = (*Store)(nil)

func newStore(c *conn, o artifacts.Options) (*Store, error) {
	if o.TTL == 0 {
		o.TTL = artifacts.DefaultTTL
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = artifacts.DefaultMaxBytes
	}
	switch {
	case o.TTL < 0:
		return nil, fmt.Errorf("%w: negative TTL", artifacts.ErrInvalid)
	case o.MaxBytes < 0:
		return nil, fmt.Errorf("%w: negative MaxBytes", artifacts.ErrInvalid)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	p := c.prefix + "a:"
	return &Store{
		c: c, prefix: p, keys: []string{p + "exp", p + "pend", p + "used", p + "reserved"},
		ttl: o.TTL, maxBytes: o.MaxBytes, now: o.Now, log: o.Logger,
	}, nil
}

// record is the metadata stored under m:<owner key>:<handle>.
type record struct {
	Owner     string `json:"o"`
	MediaType string `json:"m"`
	Label     string `json:"l,omitempty"`
	Size      int64  `json:"s"`
	Hash      string `json:"h"` // hex sha256
	Blob      string `json:"b"` // hex id of the chunks
	ChunkSize int64  `json:"c"`
	Created   int64  `json:"t"` // unix ns
	Expires   int64  `json:"e"` // unix ns
}

func (r record) chunks() int64 { return (r.Size + r.ChunkSize - 1) / r.ChunkSize }

func (r record) meta(handle string) artifacts.Meta {
	return artifacts.Meta{
		Handle: handle, Owner: r.Owner, MediaType: r.MediaType, SizeBytes: r.Size, Label: r.Label,
		ContentHash: r.Hash, CreatedAt: time.Unix(0, r.Created).UTC(), ExpiresAt: time.Unix(0, r.Expires).UTC(),
	}
}

// ref is the owner-scoped name of a handle: hex sha256 of the owner (with
// the same domain separation as the Badger store) and the handle.
func ref(owner, handle string) string {
	h := sha256.New()
	h.Write([]byte("quiver/artifacts/owner\x00"))
	h.Write([]byte(owner))
	return hex.EncodeToString(h.Sum(nil)) + ":" + handle
}

// member names an artifact (ref non-empty) or a reservation in the sorted
// sets.
func member(ref, blob string, size, chunks int64) string {
	return ref + "|" + blob + "|" + strconv.FormatInt(size, 10) + "|" + strconv.FormatInt(chunks, 10)
}

func (s *Store) chunkKey(blob string, idx int64) string {
	return s.prefix + "c:" + blob + ":" + strconv.FormatInt(idx, 10)
}

// enter checks ctx and Close before any network work.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return artifacts.ErrClosed
	}
	return nil
}

// storeErr maps a client error: the context's error, ErrClosed, ErrTooLarge
// for a full server, and otherwise an "artifacts:" error wrapping what
// mapErr makes of it (state.ErrUnavailable for a server that cannot answer).
func (s *Store) storeErr(ctx context.Context, op string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, redis.ErrClosed) || s.closed.Load():
		return fmt.Errorf("%w: %s", artifacts.ErrClosed, op)
	}
	m := mapErr(ctx, op, err)
	if errors.Is(m, state.ErrTooLarge) {
		return fmt.Errorf("%w: %w", artifacts.ErrTooLarge, m)
	}
	return fmt.Errorf("artifacts: %w", m)
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// Put implements artifacts.Store.
func (s *Store) Put(ctx context.Context, owner string, in artifacts.PutInput) (artifacts.Meta, error) {
	if err := artifacts.ValidateOwner(owner); err != nil {
		return artifacts.Meta{}, err
	}
	if err := artifacts.ValidatePutInput(in); err != nil {
		return artifacts.Meta{}, err
	}
	rec := record{Owner: owner, MediaType: in.MediaType, Label: in.Label, Size: int64(len(in.Data)), ChunkSize: chunkSize}
	if rec.MediaType == "" {
		rec.MediaType = artifacts.DefaultMediaType
	}
	if in.Body != nil {
		rec.Size = in.Size
	}
	if rec.Size > s.maxBytes {
		return artifacts.Meta{}, fmt.Errorf("%w: %d bytes exceeds the store quota of %d", artifacts.ErrTooLarge, rec.Size, s.maxBytes)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	rec.Blob = hex.EncodeToString(id[:])
	if rec.Size <= chunkSize {
		data := in.Data
		if in.Body != nil {
			// Read before anything is reserved, so a slow reader holds no
			// quota.
			data = make([]byte, rec.Size)
			if _, err := io.ReadFull(in.Body, data); err != nil {
				return artifacts.Meta{}, fmt.Errorf("%w: body shorter than its declared size: %v", artifacts.ErrInvalid, err)
			}
			if err := expectEOF(in.Body); err != nil {
				return artifacts.Meta{}, err
			}
		}
		if err := s.enter(ctx); err != nil {
			return artifacts.Meta{}, err
		}
		return s.putSmall(ctx, &rec, data)
	}
	if err := s.enter(ctx); err != nil {
		return artifacts.Meta{}, err
	}
	pend := member("", rec.Blob, rec.Size, rec.chunks())

	now := s.now()
	r, err := reserveScript.Run(ctx, s.c.rdb, s.keys, s.prefix, ms(now), rec.Size, s.maxBytes, pend,
		ms(now.Add(pendingTTL)), grace.Milliseconds(), reclaimBatch).Int64Slice()
	if err != nil {
		// The script may have run: release whatever it reserved.
		return artifacts.Meta{}, errors.Join(s.storeErr(ctx, "put", err), s.release(ctx, pend))
	}
	if r[0] == 0 {
		return artifacts.Meta{}, fmt.Errorf("%w: %d bytes do not fit: %d bytes used or reserved of %d", artifacts.ErrTooLarge, rec.Size, r[1], s.maxBytes)
	}
	if r[1] > 0 {
		s.log.Debug("artifacts: evicted for quota", "artifacts", r[1], "need", rec.Size)
	}
	meta, err := s.write(ctx, &rec, pend, in)
	if err != nil {
		return artifacts.Meta{}, errors.Join(err, s.release(ctx, pend))
	}
	return meta, nil
}

// putSmall stores content of at most one chunk with one script.
func (s *Store) putSmall(ctx context.Context, rec *record, data []byte) (artifacts.Meta, error) {
	sum := sha256.Sum256(data)
	rec.Hash = hex.EncodeToString(sum[:])
	now := s.now()
	handle, r, val, err := s.seal(rec, now)
	if err != nil {
		return artifacts.Meta{}, err
	}
	res, err := putScript.Run(ctx, s.c.rdb, s.keys, s.prefix, ms(now), rec.Size, s.maxBytes, grace.Milliseconds(), reclaimBatch,
		r, val, s.ttl.Milliseconds(), (s.ttl + grace).Milliseconds(), ms(now.Add(s.ttl)), rec.Blob, data,
		member(r, rec.Blob, rec.Size, rec.chunks())).Int64Slice()
	if err != nil {
		return artifacts.Meta{}, s.storeErr(ctx, "put", err)
	}
	if res[0] == 0 {
		return artifacts.Meta{}, fmt.Errorf("%w: %d bytes do not fit: %d bytes used or reserved of %d", artifacts.ErrTooLarge, rec.Size, res[1], s.maxBytes)
	}
	if res[1] > 0 {
		s.log.Debug("artifacts: evicted for quota", "artifacts", res[1], "need", rec.Size)
	}
	return rec.meta(handle), nil
}

// seal stamps rec with its times and returns a fresh handle, its
// owner-scoped ref and the encoded record.
func (s *Store) seal(rec *record, now time.Time) (handle, r string, val []byte, err error) {
	rec.Created, rec.Expires = now.UnixNano(), now.Add(s.ttl).UnixNano()
	val, err = json.Marshal(rec)
	if err != nil {
		return "", "", nil, fmt.Errorf("artifacts: encode meta: %w", err)
	}
	handle = artifacts.NewHandle()
	return handle, ref(rec.Owner, handle), val, nil
}

// release gives up a reservation; it runs even after ctx ended.
func (s *Store) release(ctx context.Context, pend string) error {
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := releaseScript.Run(c, s.c.rdb, s.keys, s.prefix, pend).Err(); err != nil {
		// The reservation expires on its own after pendingTTL.
		s.log.Warn("artifacts: releasing a failed put's reservation", "err", err)
	}
	return nil
}

// write stores the chunks, then commits the metadata.
func (s *Store) write(ctx context.Context, rec *record, pend string, in artifacts.PutInput) (artifacts.Meta, error) {
	h := sha256.New()
	px := (pendingTTL + grace).Milliseconds()
	var buf []byte
	if in.Body != nil {
		buf = make([]byte, min(chunkSize, rec.Size))
	}
	for idx, off := int64(0), int64(0); off < rec.Size; idx, off = idx+1, off+chunkSize {
		if err := ctx.Err(); err != nil {
			return artifacts.Meta{}, err
		}
		n := min(chunkSize, rec.Size-off)
		var c []byte
		if in.Body == nil {
			c = in.Data[off : off+n]
		} else {
			c = buf[:n]
			if _, err := io.ReadFull(in.Body, c); err != nil {
				return artifacts.Meta{}, fmt.Errorf("%w: body shorter than its declared size: %v", artifacts.ErrInvalid, err)
			}
		}
		h.Write(c)
		if err := s.c.rdb.Set(ctx, s.chunkKey(rec.Blob, idx), c, time.Duration(px)*time.Millisecond).Err(); err != nil {
			return artifacts.Meta{}, s.storeErr(ctx, "put", err)
		}
	}
	if in.Body != nil {
		if err := expectEOF(in.Body); err != nil {
			return artifacts.Meta{}, err
		}
	}
	rec.Hash = hex.EncodeToString(h.Sum(nil))
	now := s.now()
	handle, r, val, err := s.seal(rec, now)
	if err != nil {
		return artifacts.Meta{}, err
	}
	ok, err := commitScript.Run(ctx, s.c.rdb, s.keys, s.prefix, pend, member(r, rec.Blob, rec.Size, rec.chunks()),
		r, val, s.ttl.Milliseconds(), (s.ttl + grace).Milliseconds(), ms(now.Add(s.ttl))).Int()
	if err != nil {
		return artifacts.Meta{}, s.storeErr(ctx, "put", err)
	}
	if ok != 1 {
		return artifacts.Meta{}, fmt.Errorf("%w: the put took longer than %v and its reservation was reclaimed, or its content was lost", artifacts.ErrTooLarge, pendingTTL)
	}
	return rec.meta(handle), nil
}

// expectEOF checks that r has nothing left.
func expectEOF(r io.Reader) error {
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return fmt.Errorf("%w: body longer than its declared size", artifacts.ErrInvalid)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading body: %v", artifacts.ErrInvalid, err)
		}
	}
}

// get reads owner's live record of handle. Unknown, foreign and expired
// handles all yield artifacts.ErrNotFound itself.
func (s *Store) get(ctx context.Context, op, owner, handle string) (record, error) {
	b, err := s.c.rdb.Get(ctx, s.prefix+"m:"+ref(owner, handle)).Bytes()
	if errors.Is(err, redis.Nil) {
		return record{}, artifacts.ErrNotFound
	}
	if err != nil {
		return record{}, s.storeErr(ctx, op, err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil {
		return record{}, fmt.Errorf("%w: meta record: %v", artifacts.ErrCorrupt, err)
	}
	if rec.Size < 0 || rec.ChunkSize <= 0 || len(rec.Hash) != 2*sha256.Size || rec.Blob == "" || strings.ContainsAny(rec.Blob, ":|") {
		return record{}, fmt.Errorf("%w: meta record out of range", artifacts.ErrCorrupt)
	}
	if rec.Expires <= s.now().UnixNano() {
		return record{}, artifacts.ErrNotFound
	}
	return rec, nil
}

func validateRef(owner, handle string) error {
	if err := artifacts.ValidateOwner(owner); err != nil {
		return err
	}
	return artifacts.ValidateHandle(handle)
}

// Stat implements artifacts.Store.
func (s *Store) Stat(ctx context.Context, owner, handle string) (artifacts.Meta, error) {
	if err := validateRef(owner, handle); err != nil {
		return artifacts.Meta{}, err
	}
	if err := s.enter(ctx); err != nil {
		return artifacts.Meta{}, err
	}
	rec, err := s.get(ctx, "stat", owner, handle)
	if err != nil {
		return artifacts.Meta{}, err
	}
	return rec.meta(handle), nil
}

// ReadAt implements artifacts.Store: one lookup for the metadata, then one
// read-only script that checks the length of every chunk the range
// overlaps and returns only the bytes asked for.
func (s *Store) ReadAt(ctx context.Context, owner, handle string, off, n int64) ([]byte, error) {
	if err := validateRef(owner, handle); err != nil {
		return nil, err
	}
	switch {
	case off < 0:
		return nil, fmt.Errorf("%w: negative offset", artifacts.ErrInvalid)
	case n < 0:
		return nil, fmt.Errorf("%w: negative length", artifacts.ErrInvalid)
	case n > artifacts.MaxReadBytes:
		return nil, fmt.Errorf("%w: length %d exceeds %d", artifacts.ErrInvalid, n, artifacts.MaxReadBytes)
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rec, err := s.get(ctx, "read", owner, handle)
	if err != nil {
		return nil, err
	}
	if off > rec.Size {
		return nil, fmt.Errorf("%w: offset %d beyond size %d", artifacts.ErrOutOfRange, off, rec.Size)
	}
	end := off + min(n, rec.Size-off)
	out := make([]byte, 0, end-off)
	if end == off {
		return out, nil
	}
	first, last := off/rec.ChunkSize, (end-1)/rec.ChunkSize
	keys := make([]string, 0, last-first+1)
	args := make([]any, 0, 2+last-first+1)
	args = append(args, off-first*rec.ChunkSize, end-1-last*rec.ChunkSize)
	for i := first; i <= last; i++ {
		keys = append(keys, s.chunkKey(rec.Blob, i))
		args = append(args, min(rec.ChunkSize, rec.Size-i*rec.ChunkSize))
	}
	vals, err := readScript.Run(ctx, s.c.rdb, keys, args...).Slice()
	if err != nil {
		return nil, s.storeErr(ctx, "read", err)
	}
	for j, v := range vals {
		p, ok := v.(string)
		if !ok {
			// Removed meanwhile (ErrNotFound), or lost or damaged.
			if _, err := s.get(ctx, "read", owner, handle); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%w: chunk %d is missing or has the wrong size", artifacts.ErrCorrupt, first+int64(j))
		}
		out = append(out, p...)
	}
	if int64(len(out)) != end-off {
		return nil, fmt.Errorf("%w: read %d bytes, want %d", artifacts.ErrCorrupt, len(out), end-off)
	}
	return out, nil
}

// checkChunk checks a fetched chunk. A missing one means the artifact was
// removed meanwhile (ErrNotFound) or lost (ErrCorrupt).
func (s *Store) checkChunk(ctx context.Context, owner, handle string, rec record, idx int64, v any) ([]byte, error) {
	want := min(rec.ChunkSize, rec.Size-idx*rec.ChunkSize)
	str, ok := v.(string)
	if !ok {
		if _, err := s.get(ctx, "read", owner, handle); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: missing chunk %d", artifacts.ErrCorrupt, idx)
	}
	if int64(len(str)) != want {
		return nil, fmt.Errorf("%w: chunk %d has %d bytes, want %d", artifacts.ErrCorrupt, idx, len(str), want)
	}
	return []byte(str), nil
}

// Open implements artifacts.Store.
func (s *Store) Open(ctx context.Context, owner, handle string) (io.ReadCloser, error) {
	if err := validateRef(owner, handle); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rec, err := s.get(ctx, "open", owner, handle)
	if err != nil {
		return nil, err
	}
	want, err := hex.DecodeString(rec.Hash)
	if err != nil {
		return nil, fmt.Errorf("%w: meta record hash: %v", artifacts.ErrCorrupt, err)
	}
	r := &chunks{s: s, ctx: ctx, owner: owner, handle: handle, rec: rec}
	return artifacts.NewStream(want, r.fetch, nil), nil
}

// Delete implements artifacts.Store. The content stays readable by streams
// already open for a minute.
func (s *Store) Delete(ctx context.Context, owner, handle string) error {
	if err := validateRef(owner, handle); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	r := ref(owner, handle)
	b, err := s.c.rdb.Get(ctx, s.prefix+"m:"+r).Bytes()
	if errors.Is(err, redis.Nil) {
		return artifacts.ErrNotFound
	}
	if err != nil {
		return s.storeErr(ctx, "delete", err)
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil || rec.ChunkSize <= 0 {
		return fmt.Errorf("%w: meta record: %v", artifacts.ErrCorrupt, err)
	}
	n, err := deleteScript.Run(ctx, s.c.rdb, s.keys, s.prefix, member(r, rec.Blob, rec.Size, rec.chunks()), grace.Milliseconds()).Int()
	if err != nil {
		return s.storeErr(ctx, "delete", err)
	}
	// An expired artifact whose record is still there is removed too, but
	// reported like any other missing handle.
	if n == 0 || rec.Expires <= s.now().UnixNano() {
		return artifacts.ErrNotFound
	}
	return nil
}

// Sweep reclaims the bytes of expired artifacts and abandoned
// reservations now (every Put does it too; Redis itself drops their keys).
func (s *Store) Sweep(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	err := reserveScript.Run(ctx, s.c.rdb, s.keys, s.prefix, ms(s.now()), 0, s.maxBytes, "", 0, grace.Milliseconds(), reclaimBatch).Err()
	return s.storeErr(ctx, "sweep", err)
}

// Usage returns the bytes counted against MaxBytes: committed artifacts
// not reclaimed yet and reservations of Puts in flight, across replicas.
func (s *Store) Usage(ctx context.Context) (int64, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	vals, err := s.c.rdb.MGet(ctx, s.keys[2], s.keys[3]).Result()
	if err != nil {
		return 0, s.storeErr(ctx, "usage", err)
	}
	var total int64
	for _, v := range vals {
		if str, ok := v.(string); ok {
			n, err := strconv.ParseInt(str, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: usage counter %q", artifacts.ErrCorrupt, str)
			}
			total += n
		}
	}
	return total, nil
}

// Close implements artifacts.Store. Later calls, and reads of streams still
// open, return ErrClosed. The connection pool closes when the backend's KV
// is closed too.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.c.release()
}

// chunks fetches an artifact's chunks for an artifacts.Stream.
type chunks struct {
	s      *Store
	ctx    context.Context
	owner  string
	handle string
	rec    record
	next   int64 // index of the next chunk to fetch
}

// fetch returns chunk r.next, and whether it is the last.
func (r *chunks) fetch() ([]byte, bool, error) {
	if r.next*r.rec.ChunkSize >= r.rec.Size {
		return nil, true, nil
	}
	if err := r.s.enter(r.ctx); err != nil {
		return nil, false, err
	}
	v, err := r.s.c.rdb.Get(r.ctx, r.s.chunkKey(r.rec.Blob, r.next)).Result()
	var val any = v
	if errors.Is(err, redis.Nil) {
		val = nil
	} else if err != nil {
		return nil, false, r.s.storeErr(r.ctx, "read", err)
	}
	c, err := r.s.checkChunk(r.ctx, r.owner, r.handle, r.rec, r.next, val)
	if err != nil {
		return nil, false, err
	}
	r.next++
	return c, r.next*r.rec.ChunkSize >= r.rec.Size, nil
}
