package redisstate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/quiver-mcp/quiver/runtime/state"
)

// KV is the redis [state.KV]. Get, Set, Create and Delete are single
// commands; Swap and Admit are Lua scripts, atomic on the server.
type KV struct {
	c      *conn
	prefix string // c.prefix + "k:"
	closed atomic.Bool
}

var _ state.KV = (*KV)(nil)

// scanBatch is the COUNT hint of SCAN and the keys per MGET.
const scanBatch = 1000

// swapScript replaces KEYS[1] when its value is ARGV[2] (or, with ARGV[1]
// "0", when it does not exist): with ARGV[4] (ARGV[3] "1") for ARGV[5]
// milliseconds (0: no expiry), or by deleting it (ARGV[3] "0").
var swapScript = redis.NewScript(shebang + `local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '0' then
  if cur then return 0 end
elseif (not cur) or cur ~= ARGV[2] then
  return 0
end
if ARGV[3] == '0' then
  redis.call('DEL', KEYS[1])
elseif ARGV[5] == '0' then
  redis.call('SET', KEYS[1], ARGV[4])
else
  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5])
end
return 1
`)

// admitScript runs an AdmitRequest over sorted sets, one per window
// (KEYS), whose members are the admitted calls scored by their time in
// microseconds on the server's clock. ARGV[1] is the window in
// microseconds, ARGV[2] "1" to take, ARGV[3] a random member suffix, ARGV[4]
// the window in milliseconds (PEXPIRE), ARGV[5...] the limits. It trims
// every window, checks every one, and only when all admit adds the call to
// all. It returns {denied index or -1, retry after in microseconds}.
var admitScript = redis.NewScript(shebang + `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cut = now - tonumber(ARGV[1])
for _, k in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', k, '-inf', cut)
end
for i, k in ipairs(KEYS) do
  local lim = tonumber(ARGV[4 + i])
  local n = redis.call('ZCARD', k)
  if n >= lim then
    local e = redis.call('ZRANGE', k, n - lim, n - lim, 'WITHSCORES')
    return {i - 1, tonumber(e[2]) - cut}
  end
end
if ARGV[2] == '1' then
  local m = t[1] .. '.' .. t[2] .. '-' .. ARGV[3]
  for _, k in ipairs(KEYS) do
    redis.call('ZADD', k, now, m)
    redis.call('PEXPIRE', k, ARGV[4])
  end
end
return {-1, 0}
`)

func newKV(c *conn) *KV { return &KV{c: c, prefix: c.prefix + "k:"} }

// enter checks ctx and Close before any network work.
func (s *KV) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed.Load() {
		return state.ErrClosed
	}
	return nil
}

// pxMillis is ttl in whole milliseconds, rounded up (0 stays 0).
func pxMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// Get implements state.KV.
func (s *KV) Get(ctx context.Context, key string) ([]byte, error) {
	if err := state.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	v, err := s.c.rdb.Get(ctx, s.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, state.ErrNotFound
	}
	if err != nil {
		return nil, mapErr(ctx, "get", err)
	}
	return v, nil
}

// Set implements state.KV.
func (s *KV) Set(ctx context.Context, key string, val []byte, ttl time.Duration) error {
	if err := state.CheckWrite(key, val, ttl); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	args := []any{"SET", s.prefix + key, val}
	if ttl > 0 {
		args = append(args, "PX", pxMillis(ttl))
	}
	return mapErr(ctx, "set", s.c.rdb.Do(ctx, args...).Err())
}

// Create implements state.KV with SET NX.
func (s *KV) Create(ctx context.Context, key string, val []byte, ttl time.Duration) (bool, error) {
	if err := state.CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	args := []any{"SET", s.prefix + key, val, "NX"}
	if ttl > 0 {
		args = append(args, "PX", pxMillis(ttl))
	}
	err := s.c.rdb.Do(ctx, args...).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, mapErr(ctx, "create", err)
	}
	return true, nil
}

// Swap implements state.KV with a script comparing the bytes on the server.
func (s *KV) Swap(ctx context.Context, key string, old, val []byte, ttl time.Duration) (bool, error) {
	if err := state.CheckWrite(key, val, ttl); err != nil {
		return false, err
	}
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	hasOld, hasVal := "1", "1"
	if old == nil {
		hasOld, old = "0", []byte{}
	}
	if val == nil {
		hasVal, val = "0", []byte{}
	}
	n, err := swapScript.Run(ctx, s.c.rdb, []string{s.prefix + key}, hasOld, old, hasVal, val, pxMillis(ttl)).Int()
	if err != nil {
		return false, mapErr(ctx, "swap", err)
	}
	return n == 1, nil
}

// Delete implements state.KV.
func (s *KV) Delete(ctx context.Context, key string) error {
	if err := state.CheckKey(key); err != nil {
		return err
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	return mapErr(ctx, "delete", s.c.rdb.Del(ctx, s.prefix+key).Err())
}

// globEscape escapes the glob metacharacters of a MATCH pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Scan implements state.KV: SCAN MATCH over the whole key space of the
// prefix (O(keys under the prefix)), then MGET in key order, skipping keys
// that vanished meanwhile and windows (which are not strings).
func (s *KV) Scan(ctx context.Context, prefix string, limit int) ([]state.Entry, error) {
	if err := state.CheckScan(prefix, limit); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	pattern := globEscape(s.prefix+prefix) + "*"
	seen := map[string]bool{}
	var keys []string
	var cursor uint64
	for {
		page, next, err := s.c.rdb.Scan(ctx, cursor, pattern, scanBatch).Result()
		if err != nil {
			return nil, mapErr(ctx, "scan", err)
		}
		for _, k := range page {
			if !seen[k] && strings.HasPrefix(k, s.prefix+prefix) {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	sort.Strings(keys)
	out := []state.Entry{}
	for len(keys) > 0 && len(out) < limit {
		batch := keys[:min(len(keys), scanBatch, 2*(limit-len(out)))]
		keys = keys[len(batch):]
		vals, err := s.c.rdb.MGet(ctx, batch...).Result()
		if err != nil {
			return nil, mapErr(ctx, "scan", err)
		}
		for i, v := range vals {
			str, ok := v.(string)
			if !ok {
				continue // expired or deleted since SCAN, or not a value
			}
			out = append(out, state.Entry{Key: strings.TrimPrefix(batch[i], s.prefix), Value: []byte(str)})
			if len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// Admit implements state.KV with one script over sorted sets, on the
// server's clock (req.Now is not used), so replicas with skewed clocks
// agree.
func (s *KV) Admit(ctx context.Context, req state.AdmitRequest) (state.AdmitResult, error) {
	if err := state.CheckAdmit(req); err != nil {
		return state.AdmitResult{}, err
	}
	if err := s.enter(ctx); err != nil {
		return state.AdmitResult{}, err
	}
	keys := make([]string, len(req.Keys))
	for i, k := range req.Keys {
		keys[i] = s.prefix + k
	}
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	take := "0"
	if req.Take {
		take = "1"
	}
	micros := max(int64((req.Window+time.Microsecond-1)/time.Microsecond), 1)
	args := make([]any, 0, 4+len(req.Limits))
	args = append(args, micros, take, hex.EncodeToString(suffix[:]), pxMillis(req.Window))
	for _, l := range req.Limits {
		args = append(args, l)
	}
	res, err := admitScript.Run(ctx, s.c.rdb, keys, args...).Int64Slice()
	if err != nil {
		return state.AdmitResult{}, mapErr(ctx, "admit", err)
	}
	if len(res) != 2 {
		return state.AdmitResult{}, fmt.Errorf("redisstate: admit: script returned %d values", len(res))
	}
	if res[0] < 0 {
		return state.AdmitResult{Denied: -1}, nil
	}
	wait := time.Duration(res[1]) * time.Microsecond
	return state.AdmitResult{Denied: int(res[0]), RetryAfter: max(wait, time.Millisecond)}, nil
}

// Close implements state.KV. The connection pool closes when the
// backend's artifact store is closed too.
func (s *KV) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	return s.c.release()
}
