package runtime

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/quiver-mcp/quiver/runtime/guard"
)

// The registry manifests are watched by polling (no fsnotify dependency):
// every registryPoll the matched files' names, sizes, modification times
// and inodes are compared, and every registryRehash polls their contents
// are hashed too, which catches an edit that kept size and mtime.
const (
	registryPoll   = 250 * time.Millisecond
	registryRehash = 20
)

// watchRegistry applies changes of the registry manifests on disk until
// ctx ends (spec 002's registry, issue #15 finding 9): a valid change is
// pinned in the connector at once (a call the front door judged under the
// old registry fails parity) and a catalog rebuild brings the front door
// to it; an invalid one makes the connector refuse every call at once
// (REGISTRY_VERSION_MISMATCH) with a log line, until it is fixed. An
// injected registry loader (Deps.Registry) is not watched.
func (r *Runtime) watchRegistry(ctx context.Context) {
	if r.deps.Registry != nil {
		return
	}
	// The globs in force: a reload may pin others (and then the next
	// poll sees a change).
	globsNow := func() []string {
		if pn := r.pins.Load(); pn != nil {
			return pn.globs
		}
		return nil
	}
	stat, _ := registryFingerprint(globsNow(), false)
	content, _ := registryFingerprint(globsNow(), true)
	// A change between the pin at start and this first look.
	failed := r.applyRegistry("")
	t := time.NewTicker(registryPoll)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		globs := globsNow()
		if len(globs) == 0 {
			continue
		}
		s, _ := registryFingerprint(globs, false)
		changed := s != stat
		if !changed && n%registryRehash == 0 {
			c, _ := registryFingerprint(globs, true)
			changed = c != content
		}
		if !changed {
			continue
		}
		stat = s
		content, _ = registryFingerprint(globs, true)
		failed = r.applyRegistry(failed)
	}
}

// applyRegistry reloads the registry and pins it, or fails the connector;
// failed is the error last logged ("" when the registry was valid), and
// the new one is returned.
func (r *Runtime) applyRegistry(failed string) string {
	pn := r.pins.Load()
	if pn == nil || len(pn.globs) == 0 {
		return ""
	}
	old := pn.connector.Pinned().Version()
	reg, err := r.loadRegistry(pn.globs, r.upstreams())
	if err != nil {
		pn.connector.Fail()
		if msg := err.Error(); msg != failed {
			r.log.Error("the tool registry on disk is invalid; every tool_execute is refused (REGISTRY_VERSION_MISMATCH) until it is fixed", "err", err)
			failed = msg
		}
		r.poke()
		return failed
	}
	if reg.Version() == old && failed == "" {
		return ""
	}
	pn.connector.Repin(reg)
	r.log.Warn("the tool registry changed on disk; applied", "previous", old, "current", reg.Version(), "manifests", reg.Manifests(), "tools", reg.Tools())
	r.poke()
	return ""
}

// poke asks the rebuild loop for a catalog rebuild (the front door and the
// cards follow the registry).
func (r *Runtime) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// registryFingerprint summarizes the files globs match: their names and,
// with contents, a hash of their bytes (at most MaxManifestBytes+1 each),
// else their size, mtime and inode. Errors become part of the summary, so
// a file that appears, vanishes or turns unreadable is a change.
func registryFingerprint(globs []string, contents bool) (string, error) {
	h := sha256.New()
	var files []string
	for _, g := range globs {
		m, err := filepath.Glob(g)
		if err != nil {
			return "", err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00", f)
		st, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(h, "err:%v\x00", err)
			continue
		}
		if !contents {
			fmt.Fprintf(h, "%d:%d:%v\x00", st.Size(), st.ModTime().UnixNano(), inode(st))
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			fmt.Fprintf(h, "err:%v\x00", err)
			continue
		}
		_, err = io.Copy(h, io.LimitReader(fh, guard.MaxManifestBytes+1))
		fh.Close()
		if err != nil {
			fmt.Fprintf(h, "err:%v\x00", err)
		}
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}
