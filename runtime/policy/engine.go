package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// DefaultWatchInterval is how often Watch polls the policy file.
const DefaultWatchInterval = 2 * time.Second

// Engine holds the policy in force and swaps it atomically: a decision
// sees the old or the new policy, never a mix. The zero Engine denies
// everything until a policy is stored.
type Engine struct {
	cur atomic.Pointer[Policy]
}

// NewEngine returns an Engine deciding with p (nil: deny everything).
func NewEngine(p *Policy) *Engine {
	e := &Engine{}
	e.cur.Store(p)
	return e
}

// Policy returns the policy in force (nil when none).
func (e *Engine) Policy() *Policy { return e.cur.Load() }

// Swap puts p in force and returns the policy it replaces.
func (e *Engine) Swap(p *Policy) *Policy { return e.cur.Swap(p) }

// Decide answers req with the policy in force.
func (e *Engine) Decide(req Request) Decision { return e.cur.Load().Decide(req) }

// WatchOptions configure Engine.Watch.
type WatchOptions struct {
	// Interval between polls (default 2 s).
	Interval time.Duration
	// OnChange is called after each attempt to load a changed file: with
	// the new policy (now in force) and a nil error, or with a nil policy
	// and the error that kept the old policy in force. It runs on the
	// Watch goroutine. Optional.
	OnChange func(p *Policy, err error)
}

// fileStamp is what Watch compares between polls.
type fileStamp struct {
	mod  time.Time
	size int64
	sum  [32]byte
}

// Watch keeps the engine's policy in step with the file at path until ctx
// is done, then returns ctx's error. It polls the file's modification
// time and size every Interval; when they changed and then held still for
// one more interval (so a file caught mid-write is not taken), it reads
// the file and, if its content hash changed too, parses it. A valid new
// policy is put in force with one atomic swap; a broken, missing or
// unreadable file keeps the policy in force, and is reported to OnChange
// once per distinct content. No fsnotify dependency is involved.
//
// The file is read once when Watch starts and put in force if its version
// differs from the engine's. The caller owns the goroutine that runs
// Watch: cancel ctx to end it.
func (e *Engine) Watch(ctx context.Context, path string, o WatchOptions) error {
	if o.Interval <= 0 {
		o.Interval = DefaultWatchInterval
	}
	notify := func(p *Policy, err error) {
		if o.OnChange != nil {
			o.OnChange(p, err)
		}
	}
	var last fileStamp
	var lastErr string
	// pending is a changed (modification time, size) seen at the previous
	// poll: a change is read only once it held still for one interval, so
	// a file caught half-written is not reported as broken.
	var pending *fileStamp
	report := func(err error, format string) {
		if msg := err.Error(); msg != lastErr {
			lastErr = msg
			notify(nil, &ParseError{File: path, Msg: format + oneLine(msg), Err: err})
		}
	}
	poll := func(settle bool) {
		st, err := os.Stat(path)
		if err != nil {
			pending = nil
			last = fileStamp{}
			report(err, "cannot read the policy file; the policy in force is kept: ")
			return
		}
		seen := fileStamp{mod: st.ModTime(), size: st.Size()}
		if seen.mod.Equal(last.mod) && seen.size == last.size {
			pending = nil
			return
		}
		if settle && (pending == nil || !pending.mod.Equal(seen.mod) || pending.size != seen.size) {
			pending = &seen
			return
		}
		pending = nil
		data, err := readCapped(path)
		if err != nil {
			report(err, "cannot read the policy file; the policy in force is kept: ")
			return
		}
		seen.sum = sha256.Sum256(data)
		unchanged := bytes.Equal(seen.sum[:], last.sum[:])
		last = seen
		if unchanged {
			return
		}
		p, err := Parse(path, data)
		if err != nil {
			lastErr = err.Error()
			notify(nil, fmt.Errorf("policy reload refused; the policy in force is kept: %w", err))
			return
		}
		lastErr = ""
		if cur := e.cur.Load(); cur != nil && cur.Version == p.Version {
			return
		}
		e.cur.Store(p)
		notify(p, nil)
	}
	poll(false)
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			poll(true)
		}
	}
}
