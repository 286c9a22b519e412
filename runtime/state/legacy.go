package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	badger "github.com/dgraph-io/badger/v4"
)

// ImportBadger copies the live entries under prefix of a plain Badger
// database (the per-kind stores of quiver before the state layer, such as
// state_dir/idempotency) into kv, keeping each entry's expiry, and skips
// keys kv already holds. It reports how many entries it copied. The
// directory is opened exclusively and left as it was.
func ImportBadger(ctx context.Context, dir, prefix string, kv KV, log *slog.Logger) (int, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(badgerLogger{log}).WithNumVersionsToKeep(1))
	if err != nil {
		return 0, fmt.Errorf("state: import %s: %w", dir, err)
	}
	defer db.Close()
	now := time.Now()
	n := 0
	err = db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(prefix), PrefetchValues: false})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := ctx.Err(); err != nil {
				return err
			}
			item := it.Item()
			if item.IsDeletedOrExpired() {
				continue
			}
			var ttl time.Duration
			if exp := item.ExpiresAt(); exp != 0 {
				if ttl = time.Unix(int64(exp), 0).Sub(now); ttl <= 0 {
					continue
				}
			}
			val, err := item.ValueCopy(nil)
			if err != nil {
				return err
			}
			key := string(item.KeyCopy(nil))
			ok, err := kv.Create(ctx, key, val, ttl)
			if errors.Is(err, ErrInvalid) || errors.Is(err, ErrTooLarge) {
				log.Warn("state import: an entry no backend can hold is skipped", "dir", dir, "bytes", len(val))
				continue
			}
			if err != nil {
				return err
			}
			if ok {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("state: import %s: %w", dir, err)
	}
	return n, nil
}
