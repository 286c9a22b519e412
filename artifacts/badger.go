package artifacts

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Storage tuning. Chunks are the unit of storage and of reads: ReadAt touches only
// the chunks its range overlaps.
const (
	// defaultChunkSize splits content into 1 MiB values: well under Badger's
	// per-transaction batch limit (15% of the 64 MiB memtable), large enough that
	// a 5 MiB log is five lookups.
	defaultChunkSize int64 = 1 << 20
	// diskMemTableSize is the memtable of an on-disk store.
	diskMemTableSize = 8 << 20
	// memMemTableSize is the memtable of an in-memory store.
	memMemTableSize = 16 << 20
	// memChunkSize is the chunk size of an in-memory store: without a value
	// log, Badger refuses values of 64 KiB and more.
	memChunkSize int64 = 60 << 10
	// chunkTxnBytes bounds the chunk bytes committed per transaction while
	// staging a large artifact, so a streamed Body is never buffered whole.
	chunkTxnBytes = 4 << 20
	// valueThreshold sends values of 64 KiB and more to Badger's value log
	// instead of the LSM tree, so large chunks are not rewritten by compaction.
	valueThreshold = 64 << 10
	// valueLogFileSize keeps value-log files small enough that value-log GC can
	// reclaim space from evicted artifacts at a useful granularity.
	valueLogFileSize = 128 << 20
	// evictBatch bounds the artifacts removed per Badger transaction.
	evictBatch = 256
	// gcDiscardRatio is the share of a value-log file that must be garbage for
	// value-log GC to rewrite it.
	gcDiscardRatio = 0.5
	// gcMaxRounds bounds value-log files rewritten per maintenance tick.
	gcMaxRounds = 8
)

// syncMode selects how a Put is made durable. Only syncExplicit is used outside
// this package's benchmarks, which compare the three.
type syncMode int

const (
	// syncExplicit calls DB.Sync after the chunks and again after the metadata
	// commit (one fsync of the WAL and the value log each time).
	syncExplicit syncMode = iota
	// syncBadgerWrites opens Badger with SyncWrites: every commit fsyncs.
	syncBadgerWrites
	// syncNone never fsyncs: survives a process crash, not a power loss.
	syncNone
)

// Options configure [OpenBadger].
type Options struct {
	// Dir is the directory holding the Badger files; it is created (0700) if
	// missing. Required unless InMemory.
	Dir string
	// InMemory runs Badger in its in-memory mode (no files, nothing survives
	// Close). Meant for tests; Dir must be empty.
	InMemory bool
	// TTL is how long an artifact lives after Put; DefaultTTL when zero.
	TTL time.Duration
	// MaxBytes bounds the total size of stored content, counted once per
	// distinct content; DefaultMaxBytes when zero.
	MaxBytes int64
	// SweepInterval is the period of the background loop that removes expired
	// artifacts and runs Badger's value-log GC; DefaultSweepInterval when zero,
	// no background loop when negative (call Sweep yourself).
	SweepInterval time.Duration
	// Now is the clock; time.Now when nil. Tests inject a fake.
	Now func() time.Time
	// Logger receives the store's and Badger's warnings and errors; Badger's
	// info and debug lines are dropped. Discarded when nil.
	Logger *slog.Logger

	// chunkSize overrides defaultChunkSize (tests exercise chunk boundaries with
	// small chunks). Stored per blob, so changing it never breaks old data.
	chunkSize int64
	// sync overrides the durability mode (benchmarks only).
	sync syncMode
}

// BadgerStore is the embedded [Store]: a Badger database on disk (or in Badger's
// in-memory mode). Key layout and invariants are described in keys.go.
//
// Writes. New content that fits one chunk (1 MiB) is committed with its metadata
// in a single Badger transaction. Larger content is staged: a garbage mark for a
// fresh blob id is committed first, then the chunks (4 MiB of them per
// transaction, so a streamed Body is never buffered whole), then DB.Sync, and only
// then one transaction that creates the content record, the handle's metadata and
// expiry entry and drops the garbage mark; a second DB.Sync makes the Put durable
// before it returns. Content already stored (same sha256) only gains a reference.
//
// Crashes. A process crash (kill -9) loses nothing already handed to Badger (its
// logs are memory-mapped files), and Badger replays only whole transactions, so
// after a crash every handle is either fully committed or absent; OpenBadger then
// deletes the chunks under every garbage mark, i.e. every write that never
// committed. The first Sync of a staged Put guards against power loss: chunks of
// 64 KiB and more live in Badger's value log, a different file from the
// write-ahead log holding the metadata, and the fsync orders the two.
//
// Why explicit DB.Sync instead of Badger's SyncWrites: SyncWrites fsyncs every
// commit, including the garbage mark, each staging transaction, each eviction or
// deletion and the chunk deletions of garbage collection, none of which needs to
// be durable on its own (the marks make them redoable on the next open). Explicit
// Sync puts fsyncs only where ordering or the Put's promise needs them: one per
// small Put or Delete, two per staged Put. Measured on the development VM: 2 vs 2
// msync calls per 1 KiB Put, 4 vs 8 per 5 MiB Put; per-Put latency of the two
// was within that machine's (large) fsync noise, and about 10x that of a Put
// without any sync for small artifacts.
//
// Deletion, expiry and eviction commit first (dropping references and marking
// content left without any as garbage), Sync, and only then delete chunks, so a
// chunk never disappears under a record that survived a power loss. An open
// stream holds its content: chunks of content deleted meanwhile go when the
// stream closes (they briefly occupy disk beyond the quota).
//
// Quota. MaxBytes bounds the bytes of distinct live content. Eviction removes the
// artifacts that expire soonest, which with a constant TTL are the oldest. The
// running total is not persisted: OpenBadger recomputes it from the content
// records, which change in the same transactions as the handles, so it cannot
// drift across crashes.
//
// Concurrency. One metadata lock serialises commits, deletions and eviction (and
// makes Badger's conflict detection unnecessary); chunk writes, ReadAt and stream
// reads run outside it on Badger snapshots. Close waits for operations in flight.
type BadgerStore struct {
	db        *badger.DB
	ttl       time.Duration
	maxBytes  int64
	chunkSize int64
	txnBytes  int64 // chunk bytes committed per staging transaction
	syncMode  syncMode
	now       func() time.Time
	log       *slog.Logger

	// sem is the metadata lock (a channel so waiting honours ctx). Every change
	// to h/, a/, x/ and g/ records, and the fields below, happen under it.
	sem      chan struct{}
	used     int64          // bytes of live content (sum of h/ record sizes)
	reserved int64          // bytes reserved by Puts still writing chunks
	holds    map[blobID]int // open streams per blob; held chunks outlive their records

	// closeMu is held shared by every operation and exclusively by Close, so
	// Close waits for operations in flight and nothing touches a closed DB.
	closeMu sync.RWMutex
	closed  bool

	stopOnce   sync.Once
	loopCancel context.CancelFunc // nil without a background loop
	loopDone   chan struct{}

	garbageSinceGC atomic.Int64 // blobs deleted since the last value-log GC
	recovered      int          // garbage blobs deleted by OpenBadger (tests report it)
}

var _ Store = (*BadgerStore)(nil)

// OpenBadger opens (or creates) a Badger-backed store. On open it deletes the
// chunks of writes that never committed and recomputes the quota accounting.
func OpenBadger(opts Options) (*BadgerStore, error) {
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.chunkSize == 0 {
		opts.chunkSize = defaultChunkSize
		if opts.InMemory {
			opts.chunkSize = memChunkSize
		}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case opts.TTL < 0:
		return nil, fmt.Errorf("%w: negative TTL", ErrInvalid)
	case opts.MaxBytes < 0:
		return nil, fmt.Errorf("%w: negative MaxBytes", ErrInvalid)
	case opts.chunkSize < 0 || opts.chunkSize > defaultChunkSize || opts.InMemory && opts.chunkSize > memChunkSize:
		return nil, fmt.Errorf("%w: chunk size out of range", ErrInvalid)
	case opts.InMemory && opts.Dir != "":
		return nil, fmt.Errorf("%w: Dir must be empty with InMemory", ErrInvalid)
	case !opts.InMemory && opts.Dir == "":
		return nil, fmt.Errorf("%w: Dir is required", ErrInvalid)
	}

	bo := badger.DefaultOptions(opts.Dir).
		// On disk, chunks live in the value log and the LSM holds only
		// metadata and pointers: a 64 MiB memtable arena (the default,
		// allocated up front) would be most of the store's memory.
		WithMemTableSize(diskMemTableSize)
	txnBytes := int64(chunkTxnBytes)
	if opts.InMemory {
		// Without a value log every chunk sits in the memtable, and a
		// transaction may hold at most 15% of it.
		bo = badger.DefaultOptions("").WithInMemory(true).WithMemTableSize(memMemTableSize)
		txnBytes = memMemTableSize / 8
	} else if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("artifacts: create state dir: %w", err)
	}
	bo = bo.
		WithLogger(badgerLogger{opts.Logger}).
		WithSyncWrites(opts.sync == syncBadgerWrites).
		// Every read-write transaction runs under sem or writes keys nobody else
		// can know (fresh blob ids), so Badger's conflict detection is pure cost.
		WithDetectConflicts(false).
		WithValueThreshold(valueThreshold).
		WithValueLogFileSize(valueLogFileSize).
		// Values are not compressed (the large ones live in the value log, which
		// Badger never compresses), so no block cache is needed.
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithMetricsEnabled(false)

	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("artifacts: open badger: %w", err)
	}
	s := &BadgerStore{
		db:        db,
		ttl:       opts.TTL,
		maxBytes:  opts.MaxBytes,
		chunkSize: opts.chunkSize,
		txnBytes:  txnBytes,
		syncMode:  opts.sync,
		now:       opts.Now,
		log:       opts.Logger,
		sem:       make(chan struct{}, 1),
		holds:     make(map[blobID]int),
	}
	if err := s.recover(); err != nil {
		_ = db.Close()
		return nil, err
	}
	if opts.SweepInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.loopCancel = cancel
		s.loopDone = make(chan struct{})
		go s.loop(ctx, opts.SweepInterval)
	}
	return s, nil
}

// recover finishes interrupted garbage collection (including the chunks of Puts
// that never committed) and recomputes the quota accounting from the h/ records.
func (s *BadgerStore) recover() error {
	var garbage []blobID
	var used int64
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixGarbage)})
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != len(prefixGarbage)+blobIDLen {
				continue
			}
			var id blobID
			copy(id[:], k[len(prefixGarbage):])
			garbage = append(garbage, id)
		}
		it.Close()
		it = txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixHash), PrefetchValues: true, PrefetchSize: 100})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			err := it.Item().Value(func(v []byte) error {
				r, err := decodeBlobRecord(v)
				used += r.size
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("artifacts: recover: %w", err)
	}
	s.used = used
	s.recovered = len(garbage)
	if err := s.collect(garbage); err != nil {
		return fmt.Errorf("artifacts: recover: %w", err)
	}
	if len(garbage) > 0 {
		s.log.Info("artifacts: removed uncommitted or unreferenced content on open", "blobs", len(garbage))
	}
	return nil
}

// Close stops the background loop, waits for operations in flight and closes
// Badger. It is idempotent.
func (s *BadgerStore) Close() error {
	s.stopOnce.Do(func() {
		if s.loopCancel != nil {
			s.loopCancel()
			<-s.loopDone
		}
	})
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("artifacts: close badger: %w", err)
	}
	return nil
}

// enter marks an operation in flight; pair with leave.
func (s *BadgerStore) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *BadgerStore) leave() { s.closeMu.RUnlock() }

// lock takes the metadata lock unless ctx ends first.
func (s *BadgerStore) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockAlways takes the metadata lock for cleanup that must happen regardless.
func (s *BadgerStore) lockAlways() { s.sem <- struct{}{} }

func (s *BadgerStore) unlock() { <-s.sem }

// sync makes every commit so far durable (see syncMode).
func (s *BadgerStore) sync() error {
	if s.syncMode != syncExplicit {
		return nil
	}
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("artifacts: sync: %w", err)
	}
	return nil
}

// Usage returns the bytes of content currently counted against MaxBytes.
func (s *BadgerStore) Usage() int64 {
	s.lockAlways()
	defer s.unlock()
	return s.used
}

// Put implements [Store].
func (s *BadgerStore) Put(ctx context.Context, owner string, in PutInput) (Meta, error) {
	if err := validateOwner(owner); err != nil {
		return Meta{}, err
	}
	rec, err := s.checkPutInput(owner, in)
	if err != nil {
		return Meta{}, err
	}
	if rec.Size > s.maxBytes {
		return Meta{}, fmt.Errorf("%w: %d bytes exceeds the store quota of %d", ErrTooLarge, rec.Size, s.maxBytes)
	}
	data := in.Data
	if in.Body != nil && in.Size <= s.chunkSize {
		// A small body is read before the store is entered, so a slow reader
		// cannot delay Close.
		data = make([]byte, in.Size)
		if err := readExactly(in.Body, data); err != nil {
			return Meta{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Meta{}, err
	}
	if err := s.enter(); err != nil {
		return Meta{}, err
	}
	defer s.leave()
	handle := newHandle()
	mk := metaKey(ownerKey(owner), handle)
	if in.Body == nil || data != nil {
		sum := sha256.Sum256(data)
		rec.Hash = hex.EncodeToString(sum[:])
		return s.putKnown(ctx, handle, mk, rec, sum, data)
	}
	return s.putStaged(ctx, handle, mk, rec, [sha256.Size]byte{}, nil, in.Body)
}

// checkPutInput validates in and returns the metadata record to fill.
func (s *BadgerStore) checkPutInput(owner string, in PutInput) (metaRecord, error) {
	if err := ValidatePutInput(in); err != nil {
		return metaRecord{}, err
	}
	rec := metaRecord{Owner: owner, MediaType: in.MediaType, Label: in.Label, Size: int64(len(in.Data))}
	if rec.MediaType == "" {
		rec.MediaType = DefaultMediaType
	}
	if in.Body != nil {
		rec.Size = in.Size
	}
	return rec, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// readExactly fills buf from r and checks that r has nothing more.
func readExactly(r io.Reader, buf []byte) error {
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("%w: body shorter than its declared size: %v", ErrInvalid, err)
	}
	var one [1]byte
	for {
		n, err := r.Read(one[:])
		if n > 0 {
			return fmt.Errorf("%w: body longer than its declared size", ErrInvalid)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading body: %v", ErrInvalid, err)
		}
	}
}

// putKnown stores content already in memory. Known content (same sha256) only
// gains a reference; new content that fits one chunk is committed in a single
// transaction; larger new content goes through putStaged.
func (s *BadgerStore) putKnown(ctx context.Context, handle string, mk []byte, rec metaRecord, sum [sha256.Size]byte, data []byte) (Meta, error) {
	if err := s.lock(ctx); err != nil {
		return Meta{}, err
	}
	_, found, err := s.getBlob(sum)
	if err != nil {
		s.unlock()
		return Meta{}, err
	}
	if !found && rec.Size > s.chunkSize {
		return s.putStaged(ctx, handle, mk, rec, sum, data, nil) // takes over the lock
	}
	var garbage []blobID
	err = s.commitLocked(ctx, mk, &rec, sum, nil, data, &garbage)
	s.unlock()
	return s.finishPut(handle, rec, garbage, err)
}

// putStaged writes new content chunk by chunk under a fresh blob id, then
// commits. With data != nil (whose sha256 is sum) it is entered holding the
// lock; with a body it is entered without and hashes as it goes.
func (s *BadgerStore) putStaged(ctx context.Context, handle string, mk []byte, rec metaRecord, sum [sha256.Size]byte, data []byte, body io.Reader) (Meta, error) {
	if data == nil {
		if err := s.lock(ctx); err != nil {
			return Meta{}, err
		}
	}
	var garbage []blobID
	if err := s.evictLocked(ctx, rec.Size, &garbage); err != nil {
		s.unlock()
		return Meta{}, errors.Join(err, s.syncAndCollect(garbage))
	}
	id := newBlobID()
	// The garbage mark is committed before the first chunk, so a crash at any
	// later point leaves chunks that OpenBadger finds and deletes.
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(garbageKey(id), nil) }); err != nil {
		s.unlock()
		return Meta{}, errors.Join(fmt.Errorf("artifacts: stage: %w", err), s.syncAndCollect(garbage))
	}
	s.reserved += rec.Size
	s.unlock()

	bodySum, err := s.writeChunks(ctx, id, rec.Size, data, body)
	if body != nil {
		sum = bodySum
	}
	if err == nil {
		err = s.sync() // every chunk is durable before the metadata can commit
	}
	if err == nil {
		err = s.lock(ctx)
	}
	if err != nil {
		s.lockAlways()
		s.reserved -= rec.Size
		s.unlock()
		return Meta{}, errors.Join(err, s.syncAndCollect(append(garbage, id)))
	}
	rec.Hash = hex.EncodeToString(sum[:])
	err = s.commitLocked(ctx, mk, &rec, sum, &id, nil, &garbage)
	s.unlock()
	return s.finishPut(handle, rec, garbage, err)
}

// finishPut makes the commit durable and collects garbage produced on the way
// (evicted content, or a staged duplicate).
func (s *BadgerStore) finishPut(handle string, rec metaRecord, garbage []blobID, err error) (Meta, error) {
	if err != nil {
		return Meta{}, errors.Join(err, s.syncAndCollect(garbage))
	}
	if err := s.sync(); err != nil {
		return Meta{}, err
	}
	if err := s.collect(garbage); err != nil {
		// The artifact is committed; leftovers stay marked and go on next open.
		s.log.Warn("artifacts: deleting unreferenced content", "err", err)
	}
	return rec.meta(handle), nil
}

// commitLocked commits the metadata of a new artifact in one transaction: the
// a/ record, its x/ entry, and a reference on the content's h/ record (created if
// absent). staged names chunks already written for this Put (their reservation
// is released here); inline is new content of at most one chunk, written in the
// same transaction when the content is not stored yet. Caller holds the lock.
func (s *BadgerStore) commitLocked(ctx context.Context, mk []byte, rec *metaRecord, sum [sha256.Size]byte, staged *blobID, inline []byte, garbage *[]blobID) error {
	if staged != nil {
		s.reserved -= rec.Size // from here on the bytes count as used, or not at all
	}
	br, found, err := s.getBlob(sum)
	if err == nil && !found && staged == nil {
		// New inline content: make room. Eviction cannot create h/sum, so
		// found stays false.
		err = s.evictLocked(ctx, rec.Size, garbage)
	}
	if err != nil {
		if staged != nil {
			*garbage = append(*garbage, *staged)
		}
		return err
	}
	var created bool
	switch {
	case found:
		br.refs++
		if staged != nil { // someone committed the same content meanwhile
			*garbage = append(*garbage, *staged)
		}
	case staged != nil:
		br = blobRecord{blob: *staged, size: rec.Size, refs: 1, chunkSize: s.chunkSize}
		created = true
	default:
		br = blobRecord{blob: newBlobID(), size: rec.Size, refs: 1, chunkSize: s.chunkSize}
		created = true
	}
	now := s.now()
	rec.Created = now.UnixNano()
	rec.Expires = now.Add(s.ttl).UnixNano()
	rec.Blob = hex.EncodeToString(br.blob[:])
	rec.ChunkSize = br.chunkSize
	val, err := rec.encode()
	if err != nil {
		return fmt.Errorf("artifacts: encode meta: %w", err)
	}
	err = s.db.Update(func(txn *badger.Txn) error {
		if !found && staged == nil && len(inline) > 0 {
			if err := txn.Set(chunkKey(br.blob, 0), inline); err != nil {
				return err
			}
		}
		if staged != nil && !found {
			if err := txn.Delete(garbageKey(*staged)); err != nil {
				return err
			}
		}
		if err := txn.Set(hashKey(sum), br.encode()); err != nil {
			return err
		}
		if err := txn.Set(mk, val); err != nil {
			return err
		}
		return txn.Set(expiryKey(rec.Expires, mk), nil)
	})
	if err != nil {
		if staged != nil && !found {
			*garbage = append(*garbage, *staged)
		}
		return fmt.Errorf("artifacts: commit: %w", err)
	}
	if created {
		s.used += rec.Size
	}
	return nil
}

// writeChunks writes size bytes from data (or body) as chunks of blob id and
// returns the sha256 of a body (data is hashed by the caller). It commits every
// chunkTxnBytes so nothing large is buffered.
func (s *BadgerStore) writeChunks(ctx context.Context, id blobID, size int64, data []byte, body io.Reader) ([sha256.Size]byte, error) {
	var sum [sha256.Size]byte
	h := sha256.New()
	txn := s.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var pending int64
	commit := func() error {
		if err := txn.Commit(); err != nil {
			return fmt.Errorf("artifacts: write chunks: %w", err)
		}
		txn = s.db.NewTransaction(true)
		pending = 0
		return nil
	}
	for idx, off := int64(0), int64(0); off < size; idx, off = idx+1, off+s.chunkSize {
		if err := ctx.Err(); err != nil {
			return sum, err
		}
		n := min(s.chunkSize, size-off)
		var c []byte
		if data != nil {
			c = data[off : off+n]
		} else {
			c = make([]byte, n)
			if _, err := io.ReadFull(body, c); err != nil {
				return sum, fmt.Errorf("%w: body shorter than its declared size: %v", ErrInvalid, err)
			}
		}
		if body != nil {
			h.Write(c)
		}
		k := chunkKey(id, idx)
		err := txn.Set(k, c)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err = commit(); err == nil {
				err = txn.Set(k, c)
			}
		}
		if err != nil {
			return sum, fmt.Errorf("artifacts: write chunks: %w", err)
		}
		if pending += n; pending >= s.txnBytes {
			if err := commit(); err != nil {
				return sum, err
			}
		}
	}
	if body != nil {
		if err := readExactly(body, nil); err != nil {
			return sum, err
		}
	}
	if err := commit(); err != nil {
		return sum, err
	}
	h.Sum(sum[:0])
	return sum, nil
}

// getBlob reads the h/ record of a content hash.
func (s *BadgerStore) getBlob(sum [sha256.Size]byte) (blobRecord, bool, error) {
	var br blobRecord
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		br, found, err = getBlobTxn(txn, hashKey(sum))
		return err
	})
	return br, found, err
}

func getBlobTxn(txn *badger.Txn, hk []byte) (blobRecord, bool, error) {
	item, err := txn.Get(hk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return blobRecord{}, false, nil
	}
	if err != nil {
		return blobRecord{}, false, fmt.Errorf("artifacts: read content record: %w", err)
	}
	var br blobRecord
	err = item.Value(func(v []byte) error {
		br, err = decodeBlobRecord(v)
		return err
	})
	return br, err == nil, err
}

// getMeta reads the a/ record under mk. Unknown, foreign (mk embeds the owner)
// and expired handles all yield ErrNotFound through the same lookup.
func (s *BadgerStore) getMeta(txn *badger.Txn, mk []byte, now time.Time) (metaRecord, error) {
	item, err := txn.Get(mk)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return metaRecord{}, ErrNotFound
	}
	if err != nil {
		return metaRecord{}, fmt.Errorf("artifacts: read meta: %w", err)
	}
	var rec metaRecord
	if err := item.Value(func(v []byte) error {
		rec, err = decodeMetaRecord(v)
		return err
	}); err != nil {
		return metaRecord{}, err
	}
	if rec.Expires <= now.UnixNano() {
		return metaRecord{}, ErrNotFound
	}
	return rec, nil
}

// Stat implements [Store].
func (s *BadgerStore) Stat(ctx context.Context, owner, handle string) (Meta, error) {
	if err := validateRef(owner, handle); err != nil {
		return Meta{}, err
	}
	if err := ctx.Err(); err != nil {
		return Meta{}, err
	}
	if err := s.enter(); err != nil {
		return Meta{}, err
	}
	defer s.leave()
	mk := metaKey(ownerKey(owner), handle)
	var rec metaRecord
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		rec, err = s.getMeta(txn, mk, s.now())
		return err
	})
	if err != nil {
		return Meta{}, err
	}
	return rec.meta(handle), nil
}

// ReadAt implements [Store]. It reads the metadata and the chunks in one Badger
// snapshot, in which a visible artifact always has all of its chunks.
func (s *BadgerStore) ReadAt(ctx context.Context, owner, handle string, off, n int64) ([]byte, error) {
	if err := validateRef(owner, handle); err != nil {
		return nil, err
	}
	switch {
	case off < 0:
		return nil, fmt.Errorf("%w: negative offset", ErrInvalid)
	case n < 0:
		return nil, fmt.Errorf("%w: negative length", ErrInvalid)
	case n > MaxReadBytes:
		return nil, fmt.Errorf("%w: length %d exceeds %d", ErrInvalid, n, MaxReadBytes)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	mk := metaKey(ownerKey(owner), handle)
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		rec, err := s.getMeta(txn, mk, s.now())
		if err != nil {
			return err
		}
		if off > rec.Size {
			return fmt.Errorf("%w: offset %d beyond size %d", ErrOutOfRange, off, rec.Size)
		}
		end := off + min(n, rec.Size-off)
		out = make([]byte, 0, end-off)
		if end == off {
			return nil
		}
		id, err := rec.blobID()
		if err != nil {
			return err
		}
		return readChunks(ctx, txn, id, rec.Size, rec.ChunkSize, off, end, func(p []byte) { out = append(out, p...) })
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// readChunks passes the bytes [off, end) of blob id to fn, chunk by chunk. It
// reads through an iterator: Badger defers deleting value-log files rewritten by
// GC while iterators are open, which a plain Get does not guarantee.
func readChunks(ctx context.Context, txn *badger.Txn, id blobID, size, chunkSize, off, end int64, fn func([]byte)) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: chunkPrefix(id)})
	defer it.Close()
	first, last := off/chunkSize, (end-1)/chunkSize
	it.Seek(chunkKey(id, first))
	for idx := first; idx <= last; idx++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !it.Valid() || !bytes.Equal(it.Item().Key(), chunkKey(id, idx)) {
			return fmt.Errorf("%w: missing chunk %d", ErrCorrupt, idx)
		}
		base := idx * chunkSize
		want := min(chunkSize, size-base)
		err := it.Item().Value(func(v []byte) error {
			if int64(len(v)) != want {
				return fmt.Errorf("%w: chunk %d has %d bytes, want %d", ErrCorrupt, idx, len(v), want)
			}
			fn(v[max(off-base, 0):min(end-base, want)])
			return nil
		})
		if err != nil {
			return err
		}
		it.Next()
	}
	return nil
}

// Open implements [Store]. The stream holds the content's chunks: deleting or
// evicting the artifact meanwhile defers deleting them until the stream closes.
func (s *BadgerStore) Open(ctx context.Context, owner, handle string) (io.ReadCloser, error) {
	if err := validateRef(owner, handle); err != nil {
		return nil, err
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.unlock()
	mk := metaKey(ownerKey(owner), handle)
	var rec metaRecord
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		rec, err = s.getMeta(txn, mk, s.now())
		return err
	})
	if err != nil {
		return nil, err
	}
	id, err := rec.blobID()
	if err != nil {
		return nil, err
	}
	sum, err := rec.hashSum()
	if err != nil {
		return nil, err
	}
	s.holds[id]++
	return (&chunks{s: s, ctx: ctx, id: id, size: rec.Size, chunkSize: rec.ChunkSize}).stream(sum), nil
}

// release drops a stream's hold on a blob and deletes the blob's chunks if the
// hold was the last thing keeping them.
func (s *BadgerStore) release(id blobID) error {
	if err := s.enter(); err != nil {
		return nil // closed: anything left is collected on the next open
	}
	defer s.leave()
	s.lockAlways()
	s.holds[id]--
	var isGarbage bool
	var err error
	if s.holds[id] <= 0 {
		delete(s.holds, id)
		err = s.db.View(func(txn *badger.Txn) error {
			_, err := txn.Get(garbageKey(id))
			if errors.Is(err, badger.ErrKeyNotFound) {
				return nil
			}
			isGarbage = err == nil
			return err
		})
	}
	s.unlock()
	if err != nil {
		return fmt.Errorf("artifacts: release: %w", err)
	}
	if isGarbage {
		return s.syncAndCollect([]blobID{id})
	}
	return nil
}

// Delete implements [Store].
func (s *BadgerStore) Delete(ctx context.Context, owner, handle string) error {
	if err := validateRef(owner, handle); err != nil {
		return err
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := s.lock(ctx); err != nil {
		return err
	}
	mk := metaKey(ownerKey(owner), handle)
	var expired bool
	err := s.db.View(func(txn *badger.Txn) error {
		_, err := s.getMeta(txn, mk, s.now())
		if errors.Is(err, ErrNotFound) {
			// An expired artifact still has its record: remove it anyway,
			// but report it like any other missing handle.
			if _, gerr := txn.Get(mk); gerr == nil {
				expired = true
			}
		}
		return err
	})
	if err != nil && !expired {
		s.unlock()
		return err
	}
	var garbage []blobID
	_, rerr := s.removeLocked([]victim{{mk: mk}}, -1, &garbage)
	s.unlock()
	if rerr != nil {
		return rerr
	}
	if err := s.syncAndCollect(garbage); err != nil {
		return err
	}
	if expired {
		return ErrNotFound
	}
	return nil
}

// evictLocked removes the artifacts that expire soonest (with a constant TTL:
// the oldest) until need more bytes fit under the quota. Caller holds the lock.
// Content freed here is appended to garbage, to be collected after the caller's
// commit is durable.
func (s *BadgerStore) evictLocked(ctx context.Context, need int64, garbage *[]blobID) error {
	for s.used+s.reserved+need > s.maxBytes {
		if s.reserved+need > s.maxBytes {
			return fmt.Errorf("%w: %d bytes do not fit: writes in flight hold %d of %d bytes", ErrTooLarge, need, s.reserved, s.maxBytes)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		victims, err := s.scanExpiry(evictBatch, -1)
		if err != nil {
			return err
		}
		if len(victims) == 0 {
			return fmt.Errorf("%w: %d bytes do not fit: %d bytes used of %d", ErrTooLarge, need, s.used, s.maxBytes)
		}
		n, err := s.removeLocked(victims, s.used+s.reserved+need-s.maxBytes, garbage)
		if err != nil {
			return err
		}
		s.log.Debug("artifacts: evicted for quota", "artifacts", n, "used", s.used, "need", need)
	}
	return nil
}

// victim names an artifact to remove: its meta key and, when known, its x/ key
// (so an x/ entry whose a/ record is missing still goes).
type victim struct{ mk, xk []byte }

// scanExpiry returns up to limit artifacts in expiry order, only those expiring
// at or before upTo (unix ns) unless upTo < 0.
func (s *BadgerStore) scanExpiry(limit int, upTo int64) ([]victim, error) {
	var mks []victim
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefixExpiry)})
		defer it.Close()
		for it.Rewind(); it.Valid() && len(mks) < limit; it.Next() {
			exp, mk, ok := parseExpiryKey(it.Item().Key())
			if !ok {
				continue
			}
			if upTo >= 0 && exp > upTo {
				break
			}
			mks = append(mks, victim{mk: mk, xk: it.Item().KeyCopy(nil)})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("artifacts: scan expiry: %w", err)
	}
	return mks, nil
}

// removeLocked deletes the given artifacts in one
// transaction, dropping their content references; content whose last reference
// goes is marked garbage and, unless a stream holds it, appended to garbage.
// With enough >= 0 it stops once that many bytes of content are freed. Caller
// holds the lock.
func (s *BadgerStore) removeLocked(victims []victim, enough int64, garbage *[]blobID) (int, error) {
	var removed int
	var freed int64
	var dead []blobID
	err := s.db.Update(func(txn *badger.Txn) error {
		removed, freed, dead = 0, 0, dead[:0]
		blobs := map[string]blobRecord{} // h/ records touched in this txn
		for _, v := range victims {
			mk := v.mk
			item, err := txn.Get(mk)
			if errors.Is(err, badger.ErrKeyNotFound) {
				if v.xk != nil {
					if err := txn.Delete(v.xk); err != nil {
						return err
					}
				}
				continue
			}
			if err != nil {
				return err
			}
			var rec metaRecord
			if err := item.Value(func(v []byte) error {
				rec, err = decodeMetaRecord(v)
				return err
			}); err != nil {
				return err
			}
			sum, err := rec.hashSum()
			if err != nil {
				return err
			}
			if err := txn.Delete(mk); err != nil {
				return err
			}
			if err := txn.Delete(expiryKey(rec.Expires, mk)); err != nil {
				return err
			}
			removed++
			hk := hashKey(sum)
			br, ok := blobs[string(hk)]
			if !ok {
				if br, ok, err = getBlobTxn(txn, hk); err != nil {
					return err
				}
				if !ok {
					s.log.Error("artifacts: meta record without content record", "hash", rec.Hash)
					continue
				}
			}
			br.refs--
			blobs[string(hk)] = br
			if br.refs == 0 {
				freed += br.size
			}
			if enough >= 0 && freed >= enough {
				break
			}
		}
		for hk, br := range blobs {
			if br.refs > 0 {
				if err := txn.Set([]byte(hk), br.encode()); err != nil {
					return err
				}
				continue
			}
			if err := txn.Delete([]byte(hk)); err != nil {
				return err
			}
			if err := txn.Set(garbageKey(br.blob), nil); err != nil {
				return err
			}
			if s.holds[br.blob] == 0 {
				dead = append(dead, br.blob)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("artifacts: remove: %w", err)
	}
	s.used -= freed
	*garbage = append(*garbage, dead...)
	return removed, nil
}

// Sweep removes every expired artifact now and returns how many it removed. The
// background loop calls it every SweepInterval.
func (s *BadgerStore) Sweep(ctx context.Context) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	total := 0
	for {
		if err := s.lock(ctx); err != nil {
			return total, err
		}
		victims, err := s.scanExpiry(evictBatch, s.now().UnixNano())
		var garbage []blobID
		var n int
		if err == nil && len(victims) > 0 {
			n, err = s.removeLocked(victims, -1, &garbage)
		}
		s.unlock()
		total += n
		if err != nil {
			return total, err
		}
		if err := s.syncAndCollect(garbage); err != nil {
			return total, err
		}
		if len(victims) < evictBatch {
			return total, nil
		}
	}
}

// syncAndCollect makes the removal of the blobs' records durable, then deletes
// their chunks. The order matters: after a power loss a chunk must never be
// missing under a record that survived.
func (s *BadgerStore) syncAndCollect(ids []blobID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := s.sync(); err != nil {
		return err
	}
	return s.collect(ids)
}

// collect deletes the chunks of garbage blobs, then their garbage marks. The
// blobs must be unreferenced and unheld, so nothing else touches their keys.
func (s *BadgerStore) collect(ids []blobID) error {
	var errs []error
	for _, id := range ids {
		if err := s.collectOne(id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *BadgerStore) collectOne(id blobID) error {
	var keys [][]byte
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: chunkPrefix(id)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			keys = append(keys, it.Item().KeyCopy(nil))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("artifacts: collect: %w", err)
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return fmt.Errorf("artifacts: collect: %w", err)
		}
	}
	// The mark goes last: it stays until every chunk delete is committed.
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("artifacts: collect: %w", err)
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(garbageKey(id)) }); err != nil {
		return fmt.Errorf("artifacts: collect: %w", err)
	}
	s.garbageSinceGC.Add(1)
	return nil
}

// loop is the background maintenance goroutine; it ends when Close cancels ctx.
func (s *BadgerStore) loop(ctx context.Context, every time.Duration) {
	defer close(s.loopDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.maintain(ctx)
		}
	}
}

// maintain sweeps expired artifacts and, if content was deleted since the last
// run, lets Badger's value-log GC reclaim the space.
func (s *BadgerStore) maintain(ctx context.Context) {
	if n, err := s.Sweep(ctx); err != nil {
		if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("artifacts: sweep", "err", err)
		}
	} else if n > 0 {
		s.log.Debug("artifacts: swept expired", "artifacts", n)
	}
	if s.garbageSinceGC.Swap(0) == 0 {
		return
	}
	if err := s.enter(); err != nil {
		return
	}
	defer s.leave()
	for range gcMaxRounds {
		if ctx.Err() != nil {
			return
		}
		err := s.db.RunValueLogGC(gcDiscardRatio)
		if err == nil {
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrGCInMemoryMode) && !errors.Is(err, badger.ErrRejected) {
			s.log.Warn("artifacts: value-log GC", "err", err)
		}
		return
	}
}

// meta converts a stored record to the public shape.
func (m metaRecord) meta(handle string) Meta {
	return Meta{
		Handle:      handle,
		Owner:       m.Owner,
		MediaType:   m.MediaType,
		SizeBytes:   m.Size,
		Label:       m.Label,
		ContentHash: m.Hash,
		CreatedAt:   time.Unix(0, m.Created).UTC(),
		ExpiresAt:   time.Unix(0, m.Expires).UTC(),
	}
}

// badgerLogger sends Badger's warnings and errors to slog and drops the rest.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any) {
	b.l.Error("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (b badgerLogger) Warningf(f string, a ...any) {
	b.l.Warn("badger: " + strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (badgerLogger) Infof(string, ...any)  {}
func (badgerLogger) Debugf(string, ...any) {}
