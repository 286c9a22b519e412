package policy

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/quiver-mcp/quiver/runtime/identity"
)

func TestIncident(t *testing.T) {
	c := newTestClock()
	dir := t.TempDir()
	in, err := OpenIncident(IncidentOptions{Dir: dir, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	tok := alice
	tok.JTI = "jti-9"
	high := Request{Principal: tok, Server: "github", Namespace: "github", ToolID: "github:delete_repo#22222222", ToolClass: "write", Risk: "HIGH", SessionID: "s1", Action: ActionCall}
	low := high
	low.Risk, low.ToolClass, low.ToolID = "LOW", "read", "github:list#1"
	check := func(name string, r Request, code string) {
		t.Helper()
		denied, reason := in.Check(r)
		if denied != (code != "") || reason != code {
			t.Fatalf("%s: denied=%v reason=%q, want %q", name, denied, reason, code)
		}
	}
	check("nothing in force", high, "")
	if in.Active() {
		t.Fatal("active at start")
	}

	// Incident mode: high-risk tools are denied at once.
	if err := in.Enable("ops", "supply chain alert", ""); err != nil {
		t.Fatal(err)
	}
	if !in.Active() {
		t.Fatal("not active")
	}
	check("incident mode high", high, ReasonIncidentMode)
	check("incident mode low", low, "")
	crit := low
	crit.Risk = "bogus"
	check("unknown risk counts as critical", crit, ReasonIncidentMode)
	if err := in.Disable(); err != nil {
		t.Fatal(err)
	}
	check("disabled", high, "")

	// Kill rules.
	k, err := in.AddKill(KillRule{Server: []string{"git*"}, ToolClass: []string{"write"}, Reason: "bad release", By: "ops"})
	if err != nil || k.ID == "" {
		t.Fatal(err)
	}
	if !in.Active() {
		t.Fatal("a kill rule makes incident mode active")
	}
	if d := in.Evaluate(high); d.Code != ReasonKillSwitch || d.RuleID != k.ID {
		t.Fatalf("%+v", d)
	}
	check("kill rule does not match reads", low, "")
	byID, _ := in.AddKill(KillRule{ID: "list-kill", ToolID: []string{"github:list*"}})
	check("glob kill", low, ReasonKillSwitch)
	if err := in.RemoveKill(byID.ID); err != nil {
		t.Fatal(err)
	}
	check("kill lifted", low, "")
	if err := in.RemoveKill("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}
	for _, bad := range []KillRule{{}, {All: true, MinRisk: "HIGH"}, {MinRisk: "HUGE"}, {ToolID: []string{`x\`}}} {
		if _, err := in.AddKill(bad); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	if _, err := in.AddKill(KillRule{ID: k.ID, All: true}); !errors.Is(err, ErrInvalidRequest) {
		t.Fatal("duplicate kill id accepted")
	}
	if err := in.RemoveKill(k.ID); err != nil {
		t.Fatal(err)
	}

	// Revocations and quarantine.
	if err := in.Quarantine("s1", "ops", "anomaly", time.Time{}); err != nil {
		t.Fatal(err)
	}
	check("quarantined session", low, ReasonSessionQuarantined)
	other := low
	other.SessionID = "s2"
	check("other session", other, "")
	if err := in.RevokeToken("jti-9", "ops", "leaked", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check("revoked token", other, ReasonTokenRevoked)
	if !in.Revoked("jti-9", "nobody") || in.Revoked("jti-8", "nobody") {
		t.Fatal("Revoked by jti")
	}
	if err := in.RevokePrincipal("jwt:corp:bob.smith", "ops", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	rb := other
	rb.Principal = bob
	check("revoked principal key", rb, ReasonPrincipalRevoked)
	if err := in.RevokePrincipal("carol", "ops", "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if !in.Revoked("", "carol") {
		t.Fatal("Revoked by sub")
	}
	if err := in.RevokeToken("x", "ops", "", c.Now().Add(-time.Second)); !errors.Is(err, ErrInvalidRequest) {
		t.Fatal("revocation in the past accepted")
	}

	// Everything survives a restart.
	in2, err := OpenIncident(IncidentOptions{Dir: dir, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	st := in2.State()
	if len(st.Sessions) != 1 || len(st.Tokens) != 1 || len(st.Principals) != 2 || len(st.Kill) != 0 {
		t.Fatalf("state after restart %+v", st)
	}
	check2 := func(r Request, code string) {
		t.Helper()
		if _, reason := in2.Check(r); reason != code {
			t.Fatalf("after restart: %q, want %q", reason, code)
		}
	}
	check2(low, ReasonSessionQuarantined)
	// A timed revocation lapses.
	c.Advance(2 * time.Hour)
	check2(other, "")
	if err := in2.Release("s1"); err != nil {
		t.Fatal(err)
	}
	if st := in2.State(); len(st.Tokens) != 0 {
		t.Fatalf("lapsed revocation kept: %+v", st.Tokens)
	}
	if err := in2.RestorePrincipal("carol"); err != nil {
		t.Fatal(err)
	}
	if err := in2.RestoreToken("jti-9"); !errors.Is(err, ErrNotFound) {
		t.Fatal(err)
	}

	// An unreadable state file refuses to start.
	if err := os.WriteFile(filepath.Join(dir, incidentFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenIncident(IncidentOptions{Dir: dir}); !errors.Is(err, ErrIncidentState) {
		t.Fatalf("corrupt state: %v", err)
	}
}

func TestIncidentAllKill(t *testing.T) {
	in, _ := OpenIncident(IncidentOptions{})
	if _, err := in.AddKill(KillRule{All: true}); err != nil {
		t.Fatal(err)
	}
	if denied, _ := in.Check(Request{Principal: identity.Principal{Sub: "x"}, Risk: "LOW", Action: ActionList}); !denied {
		t.Fatal("all: true did not deny")
	}
}

func TestIncidentNotPersisted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	in, err := OpenIncident(IncidentOptions{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Replace the directory with a file: writes fail, even for root. The
	// change must take effect all the same.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err = in.Enable("ops", "", "")
	if !errors.Is(err, ErrNotPersisted) {
		t.Fatalf("err = %v", err)
	}
	if !in.Active() {
		t.Fatal("the kill switch waited for the disk")
	}
}
