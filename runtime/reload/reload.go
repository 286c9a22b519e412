// Package reload puts a changed configuration in force while quiver
// serves: on a signal (SIGHUP) or when the configuration file changes, it
// loads the file again and hands the result to the runtime's Apply. A file
// that does not load keeps the configuration in force, and says why in one
// log line; settings that cannot change while quiver runs are named in
// the log.
package reload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/quiver-mcp/quiver/runtime"
	"github.com/quiver-mcp/quiver/runtime/config"
)

// DefaultInterval is how often the file is polled.
const DefaultInterval = time.Second

// Target is what a new configuration is applied to (*runtime.Runtime).
type Target interface {
	Apply(context.Context, *config.Config) (runtime.Applied, error)
}

// Options configure Run.
type Options struct {
	// File is the configuration file to watch; Load reads it.
	File string
	// Load reads and validates the configuration (config.Load plus the
	// command line's overrides).
	Load func() (*config.Config, error)
	// Signals, when not nil, asks for a reload on every value received.
	Signals <-chan os.Signal
	// Interval between polls of File (DefaultInterval when 0; a negative
	// one turns the file watch off, leaving Signals).
	Interval time.Duration
	// Logger receives one line per reload (default: discarded).
	Logger *slog.Logger
}

// stamp is what a poll compares.
type stamp struct {
	mod  time.Time
	size int64
}

// Run reloads t's configuration until ctx ends, then returns. A change of
// the file is taken once it held still for one more interval (a file
// caught mid-write is not read) and only when its content changed.
func Run(ctx context.Context, t Target, o Options) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	interval := o.Interval
	if interval == 0 {
		interval = DefaultInterval
	}
	var tick <-chan time.Time
	if interval > 0 {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		tick = tk.C
	}
	last, sum := statFile(o.File), sumFile(o.File)
	var pending *stamp
	reload := func(trigger string) {
		cfg, err := o.Load()
		if err != nil {
			log.Error("configuration not reloaded; the configuration in force stays", "trigger", trigger, "file", o.File, "err", oneLine(err.Error()))
			return
		}
		a, err := t.Apply(ctx, cfg)
		if err != nil {
			log.Error("configuration not reloaded; the configuration in force stays", "trigger", trigger, "file", o.File, "err", oneLine(err.Error()))
			return
		}
		log.Info("configuration reloaded", "trigger", trigger, "file", o.File, "changes", a.String())
		if len(a.Kept) > 0 {
			log.Warn("configuration changes that need a restart were not applied", "settings", strings.Join(a.Kept, ","))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case sig := <-o.Signals:
			last, sum = statFile(o.File), sumFile(o.File)
			pending = nil
			reload(sig.String())
		case <-tick:
			now := statFile(o.File)
			if now == last {
				pending = nil
				continue
			}
			if pending == nil || *pending != now {
				// Changed since the last poll: wait until it holds still.
				pending = &now
				continue
			}
			last, pending = now, nil
			if s := sumFile(o.File); !bytes.Equal(s, sum) {
				sum = s
				reload("file")
			}
		}
	}
}

func statFile(path string) stamp {
	st, err := os.Stat(path)
	if err != nil {
		return stamp{}
	}
	return stamp{mod: st.ModTime(), size: st.Size()}
}

// sumFile is the sha256 of the file's content (of its first
// config.MaxFileSize+1 bytes: a larger file is refused by Load anyway),
// nil when it cannot be read.
func sumFile(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, config.MaxFileSize+1)); err != nil {
		return nil
	}
	return h.Sum(nil)
}

// oneLine keeps an error to one log line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
