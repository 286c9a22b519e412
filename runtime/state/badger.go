package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Values are stored behind a small header: a version byte and the expiry
// in Unix nanoseconds (0: never), big endian. Badger's own TTL has
// one-second granularity, so the header is what decides whether an entry
// is live; Badger's TTL (rounded up, plus a second) only lets it drop the
// entry during compaction.
const (
	valueVersion = 1
	headerLen    = 9
)

// Badger tuning for the KV: values are small records (idempotency,
// approvals, windows) with the occasional large one.
const (
	kvMemTableSize   = 8 << 20
	kvValueThreshold = 64 << 10
	kvValueLogSize   = 64 << 20
	// DefaultGCInterval is how often the owner runs Badger's value-log GC
	// on the KV.
	DefaultGCInterval = 5 * time.Minute
	kvGCDiscardRatio  = 0.5
	kvGCMaxRounds     = 8
	kvConflictRetries = 1000
)

// BadgerKV is a KV kept in a Badger database on disk, with synchronous
// writes: a write that returned survives a crash of the process. One
// process at a time may open a directory; OpenEmbedded shares it with the
// other processes of the machine.
type BadgerKV struct {
	db  *badger.DB
	now func() time.Time
	log *slog.Logger

	// closeMu is held shared by every operation and exclusively by Close.
	closeMu sync.RWMutex
	closed  bool

	gcCancel context.CancelFunc
	gcDone   chan struct{}
}

var _ KV = (*BadgerKV)(nil)

// BadgerOptions configures OpenBadgerKV.
type BadgerOptions struct {
	// Dir holds the Badger files; created 0700 when missing. Required.
	Dir string
	// Logger receives Badger's warnings and errors (its info and debug lines
	// are dropped). Discarded when nil.
	Logger *slog.Logger
	// GCInterval is the period of value-log GC; DefaultGCInterval when zero,
	// none when negative.
	GCInterval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// OpenBadgerKV opens (or creates) a Badger KV in o.Dir.
func OpenBadgerKV(o BadgerOptions) (*BadgerKV, error) {
	if o.Dir == "" {
		return nil, errInvalid("badger: Dir is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.GCInterval == 0 {
		o.GCInterval = DefaultGCInterval
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("state: create kv dir: %w", err)
	}
	bo := badger.DefaultOptions(o.Dir).
		WithLogger(badgerLogger{o.Logger}).
		WithSyncWrites(true).
		WithMemTableSize(kvMemTableSize).
		WithValueThreshold(kvValueThreshold).
		WithValueLogFileSize(kvValueLogSize).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithNumVersionsToKeep(1).
		WithMetricsEnabled(false)
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("state: open badger: %w", err)
	}
	s := &BadgerKV{db: db, now: o.Now, log: o.Logger}
	if o.GCInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.gcCancel, s.gcDone = cancel, make(chan struct{})
		go s.gcLoop(ctx, o.GCInterval)
	}
	return s, nil
}

// gcLoop runs value-log GC every period until ctx ends (Close).
func (s *BadgerKV) gcLoop(ctx context.Context, every time.Duration) {
	defer close(s.gcDone)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.runGC(ctx)
		}
	}
}

func (s *BadgerKV) runGC(ctx context.Context) {
	if s.enter(ctx) != nil {
		return
	}
	defer s.leave()
	for range kvGCMaxRounds {
		if ctx.Err() != nil {
			return
		}
		err := s.db.RunValueLogGC(kvGCDiscardRatio)
		if err == nil {
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
			s.log.Warn("state: value-log GC", "err", err)
		}
		return
	}
}

func (s *BadgerKV) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *BadgerKV) leave() { s.closeMu.RUnlock() }

// encodeValue prepends the header to val.
func encodeValue(val []byte, exp int64) []byte {
	b := make([]byte, headerLen, headerLen+len(val))
	b[0] = valueVersion
	binary.BigEndian.PutUint64(b[1:], uint64(exp))
	return append(b, val...)
}

// decodeValue splits a stored value; ok is false for an expired or
// malformed one.
func decodeValue(b []byte, now int64) (val []byte, ok bool) {
	if len(b) < headerLen || b[0] != valueVersion {
		return nil, false
	}
	exp := int64(binary.BigEndian.Uint64(b[1:]))
	if exp != 0 && now >= exp {
		return nil, false
	}
	return b[headerLen:], true
}

// entry builds the Badger entry for key = val with ttl.
func (s *BadgerKV) entry(key string, val []byte, ttl time.Duration) *badger.Entry {
	var exp int64
	if ttl > 0 {
		exp = s.now().Add(ttl).UnixNano()
	}
	e := badger.NewEntry([]byte(key), encodeValue(val, exp))
	if ttl > 0 {
		// Badger's ExpiresAt is in whole seconds: round up and add one so
		// Badger never drops an entry our header still calls live.
		e = e.WithTTL(ttl.Truncate(time.Second) + 2*time.Second)
	}
	return e
}

// live reads key in txn and returns its value when it exists and has not
// expired. The value is a copy.
func (s *BadgerKV) live(txn *badger.Txn, key string) ([]byte, bool, error) {
	it, err := txn.Get([]byte(key))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state: badger get: %w", err)
	}
	raw, err := it.ValueCopy(nil)
	if err != nil {
		return nil, false, fmt.Errorf("state: badger value: %w", err)
	}
	v, ok := decodeValue(raw, s.now().UnixNano())
	return v, ok, nil
}

// update runs fn in a read-write transaction, retrying on conflicts.
func (s *BadgerKV) update(ctx context.Context, fn func(txn *badger.Txn) error) error {
	for range kvConflictRetries {
		err := s.db.Update(fn)
		if !errors.Is(err, badger.ErrConflict) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: too many transaction conflicts", ErrUnavailable)
}

func wrapBadger(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrUnavailable) || strings.HasPrefix(err.Error(), "state:") {
		return err
	}
	if errors.Is(err, badger.ErrTxnTooBig) || errors.Is(err, badger.ErrValueLogSize) {
		return fmt.Errorf("%w: %v", ErrTooLarge, err)
	}
	return fmt.Errorf("state: badger: %w", err)
}

// Get implements KV.
func (s *BadgerKV) Get(ctx context.Context, key string) ([]byte, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []byte
	var found bool
	err := s.db.View(func(txn *badger.Txn) error {
		v, ok, err := s.live(txn, key)
		out, found = v, ok
		return err
	})
	if err != nil {
		return nil, wrapBadger(err)
	}
	if !found {
		return nil, ErrNotFound
	}
	return out, nil
}

// Set implements KV.
func (s *BadgerKV) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := CheckWrite(key, val, ttl); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	return wrapBadger(s.update(ctx, func(txn *badger.Txn) error {
		return txn.SetEntry(s.entry(key, val, ttl))
	}))
}

// Create implements KV.
func (s *BadgerKV) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	return s.Swap(ctx, key, nil, nonNil(val), ttl)
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Swap implements KV.
func (s *BadgerKV) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error) {
	if err := CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	defer s.leave()
	var done bool
	err := s.update(ctx, func(txn *badger.Txn) error {
		done = false
		cur, ok, err := s.live(txn, key)
		if err != nil {
			return err
		}
		if old == nil && ok || old != nil && (!ok || !bytes.Equal(cur, old)) {
			return nil
		}
		if val == nil {
			err = txn.Delete([]byte(key))
		} else {
			err = txn.SetEntry(s.entry(key, val, ttl))
		}
		done = err == nil
		return err
	})
	if err != nil {
		return false, wrapBadger(err)
	}
	return done, nil
}

// Delete implements KV.
func (s *BadgerKV) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.leave()
	return wrapBadger(s.update(ctx, func(txn *badger.Txn) error {
		return txn.Delete([]byte(key))
	}))
}

// Scan implements KV.
func (s *BadgerKV) Scan(ctx context.Context, prefix string, limit int) ([]Entry, error) {
	es, _, err := s.scanPage(ctx, prefix, "", limit, 0)
	return es, err
}

// scanPage is Scan starting after the key after (from the prefix when
// empty), stopping once the entries returned reach budget bytes (no budget
// when zero; at least one entry is always returned). more reports that
// the budget cut the page short.
func (s *BadgerKV) scanPage(ctx context.Context, prefix, after string, limit int, budget int) ([]Entry, bool, error) {
	if err := CheckScan(prefix, limit); err != nil {
		return nil, false, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, false, err
	}
	defer s.leave()
	var out []Entry
	var more bool
	now := s.now().UnixNano()
	err := s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix)})
		defer it.Close()
		start := []byte(prefix)
		if after != "" {
			start = append([]byte(after), 0)
		}
		size := 0
		for it.Seek(start); it.Valid(); it.Next() {
			if len(out) >= limit {
				return nil
			}
			if len(out)&255 == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			raw, err := item.ValueCopy(nil)
			if err != nil {
				return fmt.Errorf("state: badger value: %w", err)
			}
			v, ok := decodeValue(raw, now)
			if !ok {
				continue
			}
			if budget > 0 && len(out) > 0 && size+len(v)+int(item.KeySize()) > budget {
				more = true
				return nil
			}
			size += len(v) + int(item.KeySize())
			out = append(out, Entry{Key: string(item.Key()), Value: v})
		}
		return nil
	})
	if err != nil {
		return nil, false, wrapBadger(err)
	}
	return out, more, nil
}

// Admit implements KV.
func (s *BadgerKV) Admit(ctx context.Context, req AdmitRequest) (AdmitResult, error) {
	if err := CheckAdmit(req); err != nil {
		return AdmitResult{}, err
	}
	if err := s.enter(ctx); err != nil {
		return AdmitResult{}, err
	}
	defer s.leave()
	var res AdmitResult
	err := s.update(ctx, func(txn *badger.Txn) error {
		logs := make([][]int64, len(req.Keys))
		for i, k := range req.Keys {
			v, ok, err := s.live(txn, k)
			if err != nil {
				return err
			}
			if ok {
				logs[i] = DecodeWindow(v)
			}
		}
		var next [][]int64
		res, next = AdmitLogs(req, logs)
		for i, l := range next {
			if err := txn.SetEntry(s.entry(req.Keys[i], EncodeWindow(l), req.Window)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return AdmitResult{}, wrapBadger(err)
	}
	return res, nil
}

// Close implements KV: it waits for operations in flight, stops the GC
// loop and closes the database.
func (s *BadgerKV) Close() error {
	if s.gcCancel != nil {
		s.gcCancel()
		<-s.gcDone
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("state: close badger: %w", err)
	}
	return nil
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
