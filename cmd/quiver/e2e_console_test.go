package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/golang-jwt/jwt/v5"
)

// chromiumPath finds a headless-capable Chromium. Without one the browser
// test skips, unless QUIVER_REQUIRE_CHROMIUM is set (CI installs Debian's
// chromium and sets it, so the test cannot silently stop running).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("QUIVER_REQUIRE_CHROMIUM") != "" {
		t.Fatal("QUIVER_REQUIRE_CHROMIUM is set and no chromium is on PATH")
	}
	t.Skip("no chromium on PATH")
	return ""
}

// a11yCheck runs in the page: every visible form control has a label,
// the document has a language, and the text of body copy, table headers,
// badges, buttons and links meets WCAG AA contrast (4.5:1) against the
// background it is drawn on. It returns the problems found.
const a11yCheck = `(() => {
  const problems = [];
  if (!document.documentElement.lang) problems.push("no lang on <html>");
  for (const el of document.querySelectorAll("input, select, textarea")) {
    if (el.type === "hidden" || el.offsetParent === null) continue;
    const byFor = el.id && document.querySelector('label[for="' + el.id + '"]');
    if (!byFor && !el.closest("label") && !el.getAttribute("aria-label")) problems.push("unlabelled " + el.tagName + " " + (el.name || el.id));
  }
  for (const el of document.querySelectorAll("button")) {
    if (el.offsetParent !== null && !(el.textContent.trim() || el.getAttribute("aria-label"))) problems.push("button without a name");
  }
  const rgb = s => { const m = s.match(/rgba?\(([^)]+)\)/); if (!m) return null; const p = m[1].split(",").map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); }; return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const bg = el => { for (let e = el; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor); if (c && c.a > 0.5) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
  for (const el of document.querySelectorAll("p, td, th, .badge, button, a, label, h1, h2, code")) {
    if (el.offsetParent === null || !el.textContent.trim()) continue;
    const fg = rgb(getComputedStyle(el).color), b = bg(el);
    if (!fg) continue;
    const l1 = lum(fg), l2 = lum(b);
    const ratio = (Math.max(l1, l2) + 0.05) / (Math.min(l1, l2) + 0.05);
    if (ratio < 4.5) problems.push("contrast " + ratio.toFixed(2) + " on " + el.tagName + " '" + el.textContent.trim().slice(0, 30) + "'");
  }
  return problems;
})()`

// TestE2EConsoleBrowser drives the operator console in headless Chromium
// against the real binary: log in, see the fleet, find a tool, watch a
// denied call arrive in the live receipts, approve a pending call and see
// the requester's retry succeed, turn incident mode on and see the next
// call refused; on every page the accessibility basics hold. With
// QUIVER_CONSOLE_SCREENSHOTS=dir it writes a screenshot of each page
// there (docs/console/ holds the committed ones).
func TestE2EConsoleBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	e := startSafety(t, "")
	alice := e.as(t, hsToken(t, "alice", jwt.MapClaims{"groups": []string{"sre"}}))
	add := listedID(t, alice, listNames(t, alice), "alpha", "add")

	shots := os.Getenv("QUIVER_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first run starts the browser, on a context without a deadline
	// (a deadline there would end the browser); every later run is
	// bounded.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			// What the browser showed, for the log.
			sctx, cancel := context.WithTimeout(bctx, 10*time.Second)
			defer cancel()
			body, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("%s: %v\n%s", what, err, body)
		}
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), buf, 0o644)
		})
	}
	checkA11y := func(page string) {
		t.Helper()
		problems, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](a11yCheck))
		if err != nil {
			t.Fatalf("%s: accessibility check: %v", page, err)
		}
		if len(problems) > 0 {
			t.Errorf("%s: accessibility: %v", page, problems)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return s
	}

	// Log in: a page asks for the login first.
	run("login page", chromedp.Navigate(e.srv.base+"/ui/fleet"), chromedp.WaitVisible(chromedp.ID("token")))
	checkA11y("login")
	run("log in", shot("login"), chromedp.SendKeys(chromedp.ID("token"), safetyAdminToken+kb.Enter),
		chromedp.WaitVisible(`//h1[text()="Fleet"]`))
	// The fleet: the upstreams with their state.
	if body := text("main"); !strings.Contains(body, "alpha") || !strings.Contains(body, "ready") || !strings.Contains(body, "fleet") {
		t.Fatalf("fleet page: %s", body)
	}
	checkA11y("fleet")
	// From the top of a page the keyboard reaches the skip link first,
	// and the skip link moves the focus to the content.
	focusAfter := func(key string) string {
		t.Helper()
		run("key", chromedp.KeyEvent(key))
		f, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(e => e.className || e.id || e.textContent.trim())(document.activeElement)`))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	run("fleet again", chromedp.Navigate(e.srv.base+"/ui/fleet"), chromedp.WaitVisible(`//h1[text()="Fleet"]`))
	if f := focusAfter(kb.Tab); f != "skip" {
		t.Fatalf("the first Tab focuses %q, want the skip link", f)
	}
	if f := focusAfter(kb.Enter); f != "main" {
		t.Fatalf("the skip link focuses %q, want main", f)
	}
	if f := focusAfter(kb.Tab); f != "alpha" {
		t.Fatalf("the first Tab in the content focuses %q, want the first upstream", f)
	}
	run("fleet", shot("fleet"))

	// The catalog as carol sees it: find the tool and open it.
	run("catalog", chromedp.Navigate(e.srv.base+"/ui/catalog"), chromedp.WaitVisible(chromedp.ID("q")),
		chromedp.SendKeys(chromedp.ID("q"), "add"), chromedp.SendKeys(chromedp.ID("as"), "carol"),
		chromedp.Submit(chromedp.ID("q")), chromedp.WaitVisible(`//code[contains(text(), "alpha:add")]`))
	checkA11y("catalog")
	run("catalog shot", shot("catalog"), chromedp.Click(`//a[contains(@href, "/ui/tool") and contains(@href, "alpha%3Aadd")]`),
		chromedp.WaitVisible(`//h2[text()="Input schema"]`))
	if body := text("main"); !strings.Contains(body, "require_approval") || !strings.Contains(body, "alpha-add-approval") {
		t.Fatalf("tool page as carol: %s", body)
	}
	checkA11y("tool")
	run("tool shot", shot("tool"))

	// The live tail: a denied call appears without a reload.
	run("receipts", chromedp.Navigate(e.srv.base+"/ui/receipts"), chromedp.WaitVisible(chromedp.ID("live")),
		chromedp.Click(chromedp.ID("live")), chromedp.WaitVisible(`//span[@id="live-status" and contains(text(), "Live")]`))
	// The stream is open once the page says so; the call comes after.
	time.Sleep(300 * time.Millisecond)
	bob := e.as(t, hsToken(t, "bob", nil))
	if res, m := execute(t, bob, add, map[string]any{"a": 1, "b": 1}); !res.IsError {
		t.Fatalf("bob's call of alpha was allowed: %v", m)
	}
	run("denied call in the live tail", chromedp.WaitVisible(`//tr[contains(@class, "fresh")]/td[text()="bob"]`))
	checkA11y("receipts")
	run("receipts shot", shot("receipts"))

	// Approvals: carol's call waits; the operator grants it with a
	// comment; carol's retry goes through at once.
	args := map[string]any{"a": 2, "b": 3}
	if _, m := execute(t, e.as(t, hsToken(t, "carol", nil)), add, args); errCode(m) != "APPROVAL_REQUIRED" {
		t.Fatalf("carol before the approval: %v", m)
	}
	run("approvals", chromedp.Navigate(e.srv.base+"/ui/approvals"), chromedp.WaitVisible(`//td[text()="carol"]`))
	if body := text("main"); !strings.Contains(body, "rule alpha-add-approval") {
		t.Fatalf("the approval does not say why it is needed: %s", body)
	}
	checkA11y("approvals")
	run("grant", shot("approvals"), chromedp.SendKeys(`//td[text()="carol"]/..//input[@name="comment"]`, "checked the numbers"),
		chromedp.Click(`//td[text()="carol"]/..//button[text()="Grant"]`), chromedp.WaitVisible(`//p[contains(@class, "flash")]`))
	if res, m := execute(t, e.as(t, hsToken(t, "carol", nil)), add, args); res.IsError {
		t.Fatalf("carol's retry after the grant: %v", m)
	}
	e.waitReceipt(t, "the grant, with its comment", func(r map[string]any) bool {
		msg, _ := field(r, "outcome.message").(string)
		return field(r, "mcp.method") == "admin/console.approval.grant" && strings.Contains(msg, "checked the numbers")
	})

	// Incident mode from the browser: the next call is refused.
	if res, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2}); res.IsError {
		t.Fatalf("alice before the incident: %v", m)
	}
	run("incident", chromedp.Navigate(e.srv.base+"/ui/incident"), chromedp.WaitVisible(chromedp.ID("reason")))
	checkA11y("incident")
	run("incident on", chromedp.SendKeys(chromedp.ID("reason"), "suspected token leak"),
		chromedp.Click(`//button[text()="Turn incident mode on"]`), chromedp.WaitVisible(`//h2[@id="mode"]/span[text()="on"]`))
	run("incident shot", shot("incident"))
	_, m := execute(t, alice, add, map[string]any{"a": 1, "b": 2})
	if errCode(m) != "POLICY_DENIED" {
		t.Fatalf("alice's call in incident mode: %v", m)
	}
	e.waitReceipt(t, "incident mode from the console", func(r map[string]any) bool {
		return field(r, "mcp.method") == "admin/console.incident.enable" && field(r, "principal.sub") == "admin-token"
	})
	for _, name := range []string{"login", "fleet", "catalog", "tool", "receipts", "approvals", "incident"} {
		if st, err := os.Stat(filepath.Join(shots, name+".png")); err != nil || st.Size() < 1000 {
			t.Errorf("screenshot %s: %v", name, err)
		}
	}
	fmt.Fprintln(os.Stderr, "console screenshots in", shots)
}
