// quiver console: the live receipt tail. Everything else works without
// JavaScript. Rows are built with textContent only (receipts hold no
// argument values, but nothing from the server is parsed as HTML).
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) { return; }
  const status = document.getElementById("live-status");
  const tbody = document.querySelector("#receipts tbody");
  let source = null;
  live.hidden = false;

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) { td.className = cls; }
    tr.appendChild(td);
    return td;
  }

  function badgeClass(result) {
    if (result === "allow") { return "ok"; }
    if (result === "require_approval") { return "warn"; }
    return "bad";
  }

  function row(r) {
    const tr = document.createElement("tr");
    tr.className = "fresh";
    const t = cell(tr, "");
    const a = document.createElement("a");
    a.href = "/ui/receipt?id=" + encodeURIComponent(r.id) + "&day=" + encodeURIComponent(r.day);
    a.textContent = r.ts;
    t.appendChild(a);
    cell(tr, r.sub);
    cell(tr, r.method);
    const tool = cell(tr, "");
    const code = document.createElement("code");
    code.textContent = r.tool;
    tool.appendChild(code);
    const res = cell(tr, "");
    const badge = document.createElement("span");
    badge.className = "badge " + badgeClass(r.result);
    badge.textContent = r.result;
    res.appendChild(badge);
    cell(tr, r.code);
    cell(tr, (r.ms || 0).toFixed(1), "num");
    return tr;
  }

  function stop() {
    if (source) { source.close(); source = null; }
    live.setAttribute("aria-pressed", "false");
    live.textContent = "Live tail";
    status.textContent = "";
  }

  live.addEventListener("click", function () {
    if (source) { stop(); return; }
    source = new EventSource(live.dataset.stream);
    live.setAttribute("aria-pressed", "true");
    live.textContent = "Stop live tail";
    status.textContent = "Live: new receipts appear at the top.";
    source.addEventListener("receipt", function (ev) {
      const empty = tbody.querySelector("tr.empty");
      if (empty) { empty.remove(); }
      tbody.insertBefore(row(JSON.parse(ev.data)), tbody.firstChild);
      while (tbody.rows.length > 500) { tbody.deleteRow(tbody.rows.length - 1); }
    });
    source.onerror = function () { status.textContent = "Live tail interrupted; retrying."; };
    source.onopen = function () { status.textContent = "Live: new receipts appear at the top."; };
  });
})();
