package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	badger "github.com/dgraph-io/badger/v4"
	"github.com/quiver-mcp/quiver/artifacts"
	"github.com/quiver-mcp/quiver/runtime/config"
	"github.com/quiver-mcp/quiver/runtime/policy"
)

// TestImportLegacyState: a state directory of the version before the
// state layer (incident.json, a Badger idempotency store, a Badger
// artifact store) is brought over at the first start: the kill rule, the
// live idempotency records and the artifacts are there, and the old places
// are renamed, not deleted.
func TestImportLegacyState(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "incident"), 0o700))
	old := policy.IncidentState{Kill: []policy.KillRule{{ID: "k1", Server: []string{"alpha"}, Reason: "before the upgrade"}},
		Principals: map[string]policy.Revocation{"mallory": {Reason: "stolen laptop", At: time.Now()}}}
	data, _ := json.Marshal(old)
	must(os.WriteFile(filepath.Join(dir, "incident", "incident.json"), data, 0o600))

	db, err := badger.Open(badger.DefaultOptions(filepath.Join(dir, "idempotency")).WithLogger(nil))
	must(err)
	must(db.Update(func(txn *badger.Txn) error {
		if err := txn.SetEntry(badger.NewEntry([]byte("idem/live"), []byte(`{"state":"done","fingerprint":"f"}`)).WithTTL(time.Hour)); err != nil {
			return err
		}
		return txn.SetEntry(badger.NewEntry([]byte("idem/forever"), []byte(`{"state":"done"}`)))
	}))
	must(db.Close())

	art, err := artifacts.OpenBadger(artifacts.Options{Dir: filepath.Join(dir, "artifacts")})
	must(err)
	meta, err := art.Put(context.Background(), "local:me", artifacts.PutInput{Data: []byte("kept across the upgrade")})
	must(err)
	must(art.Close())

	rg := setup(t, config.ModeGateway, nil, func(r *rig) { r.cfg.StateDir = dir })
	rt, ctx := startOnly(t, rg)
	st, err := rt.auth.incident.State(ctx)
	must(err)
	if len(st.Kill) != 1 || st.Kill[0].ID != "k1" || st.Principals["mallory"].Reason != "stolen laptop" {
		t.Fatalf("incident state after the upgrade: %+v", st)
	}
	if r, err := rt.auth.incident.Revoked(ctx, "", "mallory"); !r || err != nil {
		t.Fatal("a principal revoked before the upgrade is not revoked after it")
	}
	for _, k := range []string{"idem/live", "idem/forever"} {
		if _, err := rt.kv.Get(ctx, k); err != nil {
			t.Fatalf("%s after the upgrade: %v", k, err)
		}
	}
	got, err := rt.store.ReadAt(ctx, "local:me", meta.Handle, 0, 100)
	if err != nil || string(got) != "kept across the upgrade" {
		t.Fatalf("artifact after the upgrade: %q, %v", got, err)
	}
	for _, p := range []string{"incident/incident.json.migrated", "idempotency.migrated"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Fatalf("the old copy is not kept as %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "incident", "incident.json")); !os.IsNotExist(err) {
		t.Fatalf("incident.json would be imported again: %v", err)
	}
}

// TestImportLegacyBadIncident: an unreadable incident file of an earlier
// version stops the start rather than dropping its kill rules.
func TestImportLegacyBadIncident(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "incident"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "incident", "incident.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	rg := setup(t, config.ModeGateway, nil, func(r *rig) { r.cfg.StateDir = dir })
	rt, err := New(rg.cfg, rg.deps)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if err := rt.Start(context.Background()); err == nil {
		t.Fatal("started over an unreadable incident file")
	}
}
