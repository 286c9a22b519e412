package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/quiver-mcp/quiver/runtime/policy"
	qstate "github.com/quiver-mcp/quiver/runtime/state"
)

// Before the state layer, quiver kept each kind of state in a place of its
// own under state_dir. A state directory from then is brought over once,
// at the first start of this version, so that an upgrade loses no kill
// rule, revocation, idempotency record or artifact; what was brought over
// is renamed with a ".migrated" suffix, never deleted.
const migratedSuffix = ".migrated"

// moveLegacyArtifacts puts an earlier version's artifact store where the
// embedded backend opens it: the Badger format is the same, so a rename
// keeps every artifact readable. Called before the backend is opened.
func moveLegacyArtifacts(stateDir string) error {
	old, next := filepath.Join(stateDir, "artifacts"), filepath.Join(stateDir, "state", "artifacts")
	if _, err := os.Stat(old); err != nil {
		return nil
	}
	if _, err := os.Stat(next); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(next), 0o700); err != nil {
		return fmt.Errorf("state: moving the artifacts of an earlier version: %w", err)
	}
	// Several processes may start at once: one rename wins.
	if err := os.Rename(old, next); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: moving the artifacts of an earlier version: %w", err)
	}
	return nil
}

// importLegacy copies an earlier version's incident state and idempotency
// records into kv. A key kv already holds wins over the old copy.
func (r *Runtime) importLegacy(ctx context.Context, kv qstate.KV) error {
	dir := r.cfg.StateDir
	file := filepath.Join(dir, "incident", "incident.json")
	if data, err := os.ReadFile(file); err == nil {
		var st policy.IncidentState
		if err := json.Unmarshal(data, &st); err != nil {
			// Starting with the kill switch silently off would be worse
			// than not starting.
			return fmt.Errorf("incident state of an earlier version (%s): %w", file, err)
		}
		st.Version = max(st.Version, 1)
		raw, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("incident state of an earlier version: %w", err)
		}
		created, err := kv.Create(ctx, policy.IncidentKey, raw, 0)
		if err != nil {
			return fmt.Errorf("incident state of an earlier version: %w", err)
		}
		if created {
			r.log.Info("incident state of an earlier version imported", "file", file, "kill_rules", len(st.Kill), "revoked_principals", len(st.Principals), "revoked_tokens", len(st.Tokens))
		} else {
			r.log.Warn("incident state of an earlier version not imported: the state store already holds one", "file", file)
		}
		if err := os.Rename(file, file+migratedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("incident state of an earlier version: %w", err)
		}
	}
	idem := filepath.Join(dir, "idempotency")
	if _, err := os.Stat(filepath.Join(idem, "MANIFEST")); err == nil {
		n, err := qstate.ImportBadger(ctx, idem, "idem/", kv, r.log)
		if err != nil {
			// Another process starting at the same time holds it, and
			// imports it.
			r.log.Warn("idempotency records of an earlier version not imported", "dir", idem, "err", err)
		} else {
			r.log.Info("idempotency records of an earlier version imported", "dir", idem, "records", n)
			if err := os.Rename(idem, idem+migratedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("idempotency records of an earlier version: %w", err)
			}
		}
	}
	journal := filepath.Join(dir, "approvals", "approvals.jsonl")
	if _, err := os.Stat(journal); err == nil {
		r.log.Warn("approvals of an earlier version are not carried over (they lapse within their TTL anyway): pending calls ask again", "file", journal)
		if err := os.Rename(journal, journal+migratedSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("approvals of an earlier version: %w", err)
		}
	}
	return nil
}
