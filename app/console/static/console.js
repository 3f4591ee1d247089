// contextd operator console: plain JS over the JSON API, no build step, no dependency.
// The API key lives in sessionStorage and travels only in the Authorization header.
"use strict";

const KEY = "contextd.console.key";
const main = () => document.getElementById("main");
let pollTimer = null;
let renderToken = 0; // a route change makes older renders drop their results

// ---------- DOM and formatting helpers (text only: nothing from the API becomes HTML)
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "style") el.style.cssText = v; // CSSOM: allowed by the page's CSP, unlike a style attribute
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const SVG = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}
const fmt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
function age(iso) {
  if (!iso) return "–";
  const sec = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (sec < 60) return `${Math.round(sec)}s ago`;
  if (sec < 3600) return `${Math.round(sec / 60)}m ago`;
  if (sec < 86400) return `${(sec / 3600).toFixed(1)}h ago`;
  return `${(sec / 86400).toFixed(1)}d ago`;
}
const secs = (v) => (v === null || v === undefined ? "–" : v < 120 ? `${v.toFixed(1)} s` : `${(v / 60).toFixed(1)} min`);
const badge = (status, prefix = "s-") => h("span", { class: `badge ${prefix}${status || "none"}` }, status || "none");
const sessionHref = (id) => `#/session/${encodeURIComponent(id)}`;

function budgetBar(b, label) {
  const usable = Math.max(b.usable_budget, 1);
  const pct = (v) => `${Math.min(100, (100 * v) / usable).toFixed(2)}%`;
  const color = { ok: "var(--ok)", warn: "var(--warn)", compact_needed: "var(--bad)" }[b.status];
  return h("div", { class: "bar", title: `${fmt(b.current_tokens)} of ${fmt(b.usable_budget)} usable tokens` },
    h("div", { class: "fill", style: `width:${pct(b.current_tokens)};background:${color}` }),
    h("div", { class: "tick warn", style: `left:${pct(b.warn_threshold)}` }),
    h("div", { class: "tick compact", style: `left:${pct(b.compact_threshold)}` }),
    h("span", { class: "label" }, label ?? `${fmt(b.current_tokens)} / ${fmt(b.usable_budget)}`));
}

// ---------- API access
class NotFound extends Error {}
class Unauthorized extends Error {}

async function api(path, options = {}) {
  const key = sessionStorage.getItem(KEY);
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  Object.assign(headers, options.headers || {});
  const resp = await fetch(path, { ...options, headers, cache: "no-store", credentials: "omit" });
  if (resp.status === 401) throw new Unauthorized();
  const body = await resp.json().catch(() => ({}));
  if (resp.status === 404) throw new NotFound(body.detail || "not found");
  if (!resp.ok) throw new Error(body.detail || `${resp.status} ${resp.statusText}`);
  return body;
}

function showLogin(message) {
  const tpl = document.getElementById("login-template").content.cloneNode(true);
  main().replaceChildren(tpl);
  document.getElementById("who").replaceChildren();
  const form = document.getElementById("login");
  if (message) document.getElementById("login-error").textContent = message;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const input = document.getElementById("key-input");
    sessionStorage.setItem(KEY, input.value.trim());
    input.value = "";
    route();
  });
  document.getElementById("key-input").focus();
}

async function whoami() {
  const me = await api("/ui/api/me");
  const who = document.getElementById("who");
  const children = [h("span", { id: "tenant" }, `tenant: ${me.tenant}`)];
  if (me.keys_required) {
    children.push(h("button", { type: "button", id: "forget-key", onclick: () => { sessionStorage.removeItem(KEY); route(); } }, "Forget key"));
  }
  who.replaceChildren(...children);
  return me;
}

// ---------- routing
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  // A malformed escape (a hand-edited or cut link) is kept as typed: the session is then
  // "not found", where decodeURIComponent's URIError left the page on "Loading…".
  const decode = (p) => { try { return decodeURIComponent(p); } catch { return p; } };
  const parts = path.split("/").map(decode);
  return { parts, params: new URLSearchParams(query || "") };
}

async function route() {
  const token = ++renderToken;
  if (pollTimer) { clearInterval(pollTimer); pollTimer = null; }
  const { parts, params } = parseHash();
  const page = parts[0] || "sessions";
  for (const a of document.querySelectorAll("[data-nav]")) {
    a.classList.toggle("active", a.dataset.nav === page || (page === "session" && a.dataset.nav === "sessions"));
  }
  try {
    await whoami();
    if (token !== renderToken) return;
    if (page === "session" && parts[1] && parts[2] === "message") await messagePage(token, parts[1], parts[3]);
    else if (page === "session" && parts[1]) await sessionPage(token, parts[1]);
    else if (page === "queue") await queuePage(token);
    else await sessionsPage(token, params);
  } catch (err) {
    if (token !== renderToken) return;
    if (err instanceof Unauthorized) {
      const had = sessionStorage.getItem(KEY);
      sessionStorage.removeItem(KEY);
      showLogin(had ? "That key was not accepted." : "");
    } else if (err instanceof NotFound) {
      main().replaceChildren(h("div", { class: "card", id: "not-found" }, h("h1", {}, "Not found"), h("p", {}, err.message)));
    } else {
      main().replaceChildren(h("div", { class: "card error", id: "failed" }, `Could not load: ${err.message}`));
    }
  }
}

// ---------- sessions page
const sessionsState = { cursors: [null], index: 0, sortCol: null, sortDir: 1 };

async function sessionsPage(token, params) {
  // The latest active first unless asked otherwise: with hundreds of sessions, by id hid them.
  const sort = ["id", "tokens"].includes(params.get("sort")) ? params.get("sort") : "activity";
  const prefix = params.get("prefix") || "";
  const limit = Math.min(Number(params.get("limit")) || 50, 500);
  const key = `${sort}|${prefix}|${limit}`;
  if (sessionsState.key !== key) Object.assign(sessionsState, { key, cursors: [null], index: 0 });
  const q = new URLSearchParams({ sort, limit: String(limit) });
  if (prefix) q.set("prefix", prefix);
  const cursor = sessionsState.cursors[sessionsState.index];
  if (cursor) q.set("cursor", cursor);
  const data = await api(`/ui/api/sessions?${q}`);
  if (token !== renderToken) return;
  sessionsState.next = data.next_cursor;

  const setParam = (name, value) => {
    const p = new URLSearchParams({ sort, prefix, limit: String(limit) });
    if (value) p.set(name, value); else p.delete(name);
    location.hash = `#/sessions?${p}`;
  };
  const statusFilter = new Set(["ok", "warn", "compact_needed"]);
  const tbody = h("tbody", { id: "sessions-body" });
  const columns = [
    ["id", "Session", (r) => r.id],
    ["status", "Status", (r) => ({ ok: 0, warn: 1, compact_needed: 2 })[r.budget.status]],
    ["tokens", "Tokens / usable budget", (r) => r.budget.current_tokens / Math.max(r.budget.usable_budget, 1)],
    ["messages", "Messages", (r) => r.messages],
    ["watermark", "Watermark / last seq", (r) => r.watermark],
    ["compaction", "Last compaction", (r) => (r.last_compaction ? Date.parse(r.last_compaction.created_at) : 0)],
    ["lease", "Lease holder", (r) => r.lease_owner || ""],
  ];
  const draw = () => {
    let rows = data.sessions.filter((r) => statusFilter.has(r.budget.status));
    if (sessionsState.sortCol) {
      const get = columns.find((c) => c[0] === sessionsState.sortCol)[2];
      rows = [...rows].sort((a, b) => (get(a) < get(b) ? -1 : get(a) > get(b) ? 1 : 0) * sessionsState.sortDir);
    }
    tbody.replaceChildren(...rows.map((r) => {
      const job = r.last_compaction;
      return h("tr", { "data-session": r.id, "data-status": r.budget.status },
        h("td", {}, h("a", { href: sessionHref(r.id) }, r.id), h("div", { class: "muted" }, r.model)),
        h("td", {}, badge(r.budget.status)),
        h("td", {}, budgetBar(r.budget)),
        h("td", { class: "num" }, fmt(r.messages)),
        h("td", { class: "num" }, `${fmt(r.watermark)} / ${fmt(r.last_seq)}`),
        h("td", { title: job && job.reason ? job.reason : null }, job ? [badge(job.status), " ", h("span", { class: "muted" }, age(job.finished_at || job.created_at)), job.reason ? h("div", { class: "muted" }, job.reason.length > 80 ? `${job.reason.slice(0, 80)}…` : job.reason) : null] : h("span", { class: "muted" }, "never")),
        h("td", {}, r.lease_owner || h("span", { class: "muted" }, "–")));
    }));
    if (!rows.length) tbody.append(h("tr", {}, h("td", { colspan: columns.length, class: "muted" }, "No sessions.")));
  };
  const headRow = h("tr", {}, columns.map(([id, label]) => h("th", {
    class: "sortable", "data-col": id,
    onclick: () => {
      sessionsState.sortDir = sessionsState.sortCol === id ? -sessionsState.sortDir : 1;
      sessionsState.sortCol = id;
      draw();
    },
  }, label)));
  const statusBoxes = ["ok", "warn", "compact_needed"].map((st) => h("label", {},
    h("input", { type: "checkbox", checked: true, "data-status-filter": st, onchange: (ev) => { ev.target.checked ? statusFilter.add(st) : statusFilter.delete(st); draw(); } }),
    " ", badge(st)));
  const prefixInput = h("input", { type: "search", id: "prefix", placeholder: "id starts with…", value: prefix });
  main().replaceChildren(
    h("h1", {}, "Sessions"),
    h("div", { class: "controls" },
      h("form", { onsubmit: (ev) => { ev.preventDefault(); setParam("prefix", prefixInput.value.trim()); } }, prefixInput, " ", h("button", { type: "submit" }, "Filter")),
      h("label", {}, "Order ", h("select", { id: "sort", onchange: (ev) => setParam("sort", ev.target.value) },
        h("option", { value: "activity", selected: sort === "activity" }, "by last activity, latest first"),
        h("option", { value: "id", selected: sort === "id" }, "by id"),
        h("option", { value: "tokens", selected: sort === "tokens" }, "by tokens, largest first"))),
      h("span", { class: "muted" }, "Show:"), statusBoxes),
    h("table", { id: "sessions" }, h("thead", {}, headRow), tbody),
    h("div", { class: "pager" },
      h("button", { type: "button", id: "prev", disabled: sessionsState.index === 0, onclick: () => { sessionsState.index -= 1; route(); } }, "← Previous"),
      h("span", { class: "muted" }, `page ${sessionsState.index + 1}`),
      h("button", { type: "button", id: "next", disabled: !data.next_cursor, onclick: () => { sessionsState.cursors[sessionsState.index + 1] = data.next_cursor; sessionsState.index += 1; route(); } }, "Next →"),
      h("span", { class: "muted" }, "Column headers sort this page; the order and filter above apply to all sessions.")));
  draw();
}

// ---------- one session
async function sessionPage(token, sid) {
  const base = `/sessions/${encodeURIComponent(sid)}`;
  const session = await api(base); // 404 for another tenant's session, like the API
  const [compaction, context, series] = await Promise.all([
    api(`${base}/compaction`),
    api(`/ui/api/sessions/${encodeURIComponent(sid)}/context`).catch((err) => ({ error: err.message })),
    api(`/ui/api/sessions/${encodeURIComponent(sid)}/series?points=500`),
  ]);
  // Still over the threshold: the dry run says what a compaction could take, and
  // what it must keep (it writes nothing).
  const plan = session.budget.status === "compact_needed"
    ? await api(`${base}/compact`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ dry_run: true }) }).catch((err) => ({ error: err.message }))
    : null;
  if (token !== renderToken) return;
  const b = session.budget;
  main().replaceChildren(
    h("h1", {}, h("a", { href: "#/sessions" }, "Sessions"), " / ", h("span", { id: "session-id" }, session.id), " ", badge(b.status)),
    h("div", { class: "grid" },
      stat(fmt(b.current_tokens), `tokens of ${fmt(b.usable_budget)} usable`),
      stat(fmt(session.stats.message_counts.total), "messages"),
      stat(`${fmt(session.last_compaction_seq)} / ${fmt(session.last_seq)}`, "watermark / last seq"),
      stat(fmt(compaction.compaction_count), "compactions"),
      h("div", { class: "stat", id: "re-reads", title: "tool calls repeating an earlier call whose result the payload no longer held whole" }, h("b", {}, fmt(session.stats.re_reads ?? 0)), h("span", {}, "re-reads")),
      stat(session.effective_model, `model · ${b.tokenizer_mode} tokens`),
      stat(session.lease ? session.lease.owner : "–", session.lease ? `lease until ${new Date(session.lease.expires_at).toLocaleTimeString()}` : "no lease")),
    h("h2", {}, "Budget"), breakdownCard(context, b), whyCard(plan, compaction),
    h("h2", {}, "Tokens over seq"), chartCard(series, b), billLine(session.stats.bill),
    h("h2", {}, "Compaction history"), historyCard(compaction, series, base),
    h("h2", {}, "Current payload"), payloadCard(context, sid));
}

const stat = (value, label) => h("div", { class: "stat" }, h("b", {}, value), h("span", {}, label));
const PARTS = ["system", "tools", "dynamic", "summary", "history"];

function breakdownCard(context, b) {
  if (context.error) return h("div", { class: "card error" }, `GET /context failed: ${context.error}`);
  const br = context.usage.breakdown || {};
  const usable = Math.max(b.usable_budget, 1);
  const pct = (v) => `${Math.min(100, (100 * v) / usable).toFixed(2)}%`;
  let left = 0;
  const segs = PARTS.filter((p) => br[p]).map((p) => {
    const seg = h("div", { class: "fill", "data-part": p, title: `${p}: ${fmt(br[p])} tokens`, style: `left:${pct(left)};width:${pct(br[p])};background:var(--${p})` });
    left += br[p];
    return seg;
  });
  return h("div", { class: "card", id: "breakdown" },
    h("div", { class: "bar stack" }, segs,
      h("div", { class: "tick warn", title: `warn at ${fmt(b.warn_threshold)}`, style: `left:${pct(b.warn_threshold)}` }),
      h("div", { class: "tick compact", title: `compact at ${fmt(b.compact_threshold)}`, style: `left:${pct(b.compact_threshold)}` })),
    h("p", { class: "legend" }, PARTS.map((p) => h("span", {}, h("i", { style: `background:var(--${p})` }), `${p} ${fmt(br[p] || 0)}`)),
      h("span", {}, h("i", { style: "background:var(--warn)" }), `warn ${fmt(b.warn_threshold)}`),
      h("span", {}, h("i", { style: "background:var(--bad)" }), `compact ${fmt(b.compact_threshold)}`),
      h("span", { class: "muted" }, `payload ${fmt(context.usage.input_tokens)} of ${fmt(b.usable_budget)} usable (limit ${fmt(b.context_limit)})`)));
}

// Why a session at compact_needed stays there, in the dry run's words.
function whyCard(plan, compaction) {
  if (!plan) return "";
  if (plan.error) return h("div", { class: "card error", id: "why" }, `dry run failed: ${plan.error}`);
  const tail = plan.tail || {};
  const kept = tail.limited_by === "min_preserved_steps"
    ? `the current turn's last ${fmt(tail.kept_steps)} complete steps are always kept (min_preserved_steps)`
    : `the preserved tail is limited by ${tail.limited_by || "–"}`;
  const lines = [
    h("p", {}, h("b", {}, "Why still compact_needed: "),
      `${fmt(compaction.compaction_count)} compaction${compaction.compaction_count === 1 ? "" : "s"} so far; from seq ${fmt(tail.from_seq)}, ${fmt(tail.tokens)} tokens are never compacted: ${kept}.`),
    plan.would_compact
      ? h("p", {}, `A compaction now would fold seqs ${plan.range.from_seq}–${plan.range.to_seq} and free about ${fmt(plan.estimated_freed_tokens)} tokens.`)
      : h("p", {}, `A compaction now would free nothing${plan.detail ? `: ${plan.detail}` : "."}`),
  ];
  if ((plan.open_group_seqs || []).length) lines.push(h("p", { class: "muted" }, `Tool calls still waiting for results (seqs ${plan.open_group_seqs.join(", ")}) stay out of any compaction.`));
  return h("div", { class: "card", id: "why" }, lines);
}

function chartCard(series, b) {
  const pts = series.points;
  if (!pts.length) return h("div", { class: "card muted", id: "chart" }, "No messages yet.");
  const W = 1000, H = 260, L = 60, R = 12, T = 12, B = 28;
  const maxSeq = Math.max(series.last_seq, 1);
  const maxY = Math.max(b.usable_budget, ...pts.map((p) => p.tokens)) * 1.05;
  const x = (seq) => L + ((W - L - R) * (seq - 1)) / Math.max(maxSeq - 1, 1);
  const y = (v) => H - B - ((H - T - B) * v) / maxY;
  const svg = s("svg", { class: "chart", id: "token-chart", viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none", role: "img", "aria-label": "effective tokens over seq" });
  for (let i = 0; i <= 4; i++) {
    const v = (maxY * i) / 4;
    svg.append(s("line", { class: "gridline", x1: L, x2: W - R, y1: y(v), y2: y(v) }), s("text", { x: 4, y: y(v) + 4 }, fmt(Math.round(v))));
  }
  svg.append(s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  svg.append(s("text", { x: L, y: H - 8 }, "seq 1"), s("text", { x: W - R - 80, y: H - 8 }, `seq ${fmt(maxSeq)}`));
  for (const [cls, v, label] of [["thr-warn", b.warn_threshold, "warn"], ["thr-compact", b.compact_threshold, "compact"]]) {
    svg.append(s("line", { class: cls, x1: L, x2: W - R, y1: y(v), y2: y(v) }), s("text", { x: W - R - 50, y: y(v) - 3 }, label));
  }
  const line = pts.map((p) => `${x(p.seq).toFixed(1)},${y(p.tokens).toFixed(1)}`).join(" ");
  svg.append(s("polygon", { class: "area", points: `${x(pts[0].seq)},${H - B} ${line} ${x(pts[pts.length - 1].seq)},${H - B}` }));
  svg.append(s("polyline", { class: "line", points: line }));
  // Compactions at one seq (several after the same message) share one mark, with a count.
  const bySeq = new Map();
  for (const c of series.compactions) {
    if (c.at_seq === null || c.at_seq === undefined) continue;
    if (!bySeq.has(c.at_seq)) bySeq.set(c.at_seq, []);
    bySeq.get(c.at_seq).push(c);
  }
  for (const [seq, group] of bySeq) {
    const cx = x(seq);
    const last = group[group.length - 1];
    const g = s("g", { class: "compaction-mark", "data-status": last.status, "data-seq": seq, "data-count": group.length });
    g.append(s("line", { class: "compaction", x1: cx, x2: cx, y1: T, y2: H - B }),
      s("circle", { class: `compaction-dot ${last.status}`, cx, cy: T + 4, r: 4 }),
      s("title", {}, group.map((c) => `compaction ${c.status} (${c.trigger}) → watermark ${c.watermark_after ?? "–"}`).join("\n")));
    if (group.length > 1) g.append(s("text", { class: "compaction-count", x: cx + 6, y: T + 8 }, `×${group.length}`));
    svg.append(g);
  }
  return h("div", { class: "card", id: "chart" }, svg,
    h("p", { class: "muted" }, `${pts.length} points (downsampled from ${fmt(series.last_seq)} seqs); dotted lines: compactions (×N: several at one seq); tokens = system + tools + summary + history after the watermark then in effect; the last point is what the session holds now (${fmt(pts[pts.length - 1].tokens)}).`));
}

// Undo the latest stored compaction (POST .../revert) after the operator confirms; a
// leased session answers 409 lock_required, shown in place (the console holds no lease).
function revertButton(base, j) {
  const out = h("span", { class: "error revert-error" });
  const button = h("button", {
    type: "button", class: "revert", "data-job": j.job_id,
    onclick: async () => {
      const to = j.watermark_before ?? 0;
      const ok = window.confirm(`Revert this compaction? The summary and watermark it replaced come back (watermark ${fmt(j.watermark_after)} → ${fmt(to)}); the log is untouched.`);
      if (!ok) return;
      button.disabled = true;
      try {
        await api(`${base}/compaction/${encodeURIComponent(j.job_id)}/revert`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
        route();
      } catch (err) {
        button.disabled = false;
        out.textContent = `Revert failed: ${err.message}`;
      }
    },
  }, "Revert");
  return h("div", {}, button, " ", out);
}

// The quality gate of one job (SPEC §5): the share of each kind of probe the stored context
// keeps, what the gate caught and restored, and what this compaction lost.
function gateView(g) {
  const cite = (seqs) => (seqs && seqs.length ? ` [#${seqs.join(",")}]` : "");
  const scores = Object.entries(g.scores || {}).map(([k, v]) => h("span", { class: "gate-score", "data-kind": k, "data-score": v }, `${k} ${Math.round(v * 100)}%`));
  const lost = g.dropped || [];
  const caught = g.caught || [];
  return h("div", { class: "gate" },
    h("div", { class: "gate-scores" }, "gate: ", scores.length ? scores.map((e, i) => (i ? [" · ", e] : e)) : "no probes",
      g.action && g.action !== "none" ? ` (${g.action})` : ""),
    lost.length
      ? h("details", { class: "gate-lost", open: true }, h("summary", {}, `What this compaction lost (${lost.length})`),
        h("ul", {}, lost.map((d) => h("li", { "data-kind": d.kind }, `${d.kind}: ${d.text}${cite(d.seqs)}${d.over_share ? " — over its share" : ""}`))))
      : h("div", { class: "muted gate-lost" }, "lost nothing the gate checks"),
    caught.length
      ? h("details", { class: "gate-caught" }, h("summary", {}, `Caught and restored (${caught.length})`),
        h("ul", {}, caught.map((c) => h("li", { "data-kind": c.kind }, `${c.kind}: ${c.text}${cite(c.seqs)} — by ${c.by}`))))
      : null);
}

function historyCard(compaction, series, base) {
  const freed = Object.fromEntries(series.compactions.map((c) => [c.job_id, c.tokens_freed]));
  const jobs = compaction.jobs || [];
  const rows = jobs.map((j) => {
    const m = j.compaction_metadata || {};
    const details = [];
    if (j.reverted_at) details.push(h("div", { class: "muted reverted" }, `reverted ${age(j.reverted_at)}: watermark back to ${fmt(j.watermark_before ?? 0)}`));
    if (j.job_id === compaction.revertable_job_id) details.push(revertButton(base, j));
    // Jobs degraded before the job itself carried the reason have it in their metadata only.
    const reason = j.reason || (j.status === "degraded" ? m.reason : null);
    if (reason) details.push(h("div", { class: j.status === "failed" ? "error" : "muted" }, reason));
    if (m.detail) details.push(h("div", { class: "muted" }, m.detail));
    if (j.status === "degraded" || m.anchor_validation_passed === false) {
      details.push(h("div", {}, `anchor validation ${m.anchor_validation_passed === false ? "failed" : "passed"}${m.anchor_retry_used ? " after a retry" : ""}`));
    }
    for (const k of ["degraded_reason", "failed_checks", "missing_anchors", "fallback"]) {
      if (m[k] !== undefined && m[k] !== null && !(Array.isArray(m[k]) && !m[k].length)) details.push(h("div", {}, h("code", {}, `${k}: ${JSON.stringify(m[k])}`)));
    }
    const gate = j.gate || m.gate;
    if (gate) details.push(gateView(gate));
    const range = m.range ? `${m.range.from_seq}–${m.range.to_seq}` : "–";
    return h("tr", { class: "job", "data-status": j.status, "data-job": j.job_id, "data-reverted": j.reverted_at ? "true" : "false" },
      h("td", {}, badge(j.status)), h("td", {}, j.trigger), h("td", {}, age(j.created_at)),
      h("td", { class: "num" }, range), h("td", { class: "num" }, fmt(m.summarized_count)),
      h("td", { class: "num" }, fmt(freed[j.job_id] ?? m.tokens_freed)),
      h("td", {}, details));
  });
  const sum = compaction.summary || {};
  const sections = sum.structure && typeof sum.structure === "object" ? Object.entries(sum.structure).filter(([k, v]) => k !== "seqs" && v && (!Array.isArray(v) || v.length)) : [];
  return h("div", { class: "card", id: "history" },
    jobs.length ? h("table", {}, h("thead", {}, h("tr", {}, ["Status", "Trigger", "Requested", "Range (seq)", "Summarized", "Tokens freed", "Details"].map((t) => h("th", {}, t)))), h("tbody", {}, rows))
      : h("p", { class: "muted" }, "No compaction yet."),
    sum.text ? h("div", {},
      h("h3", {}, `Summary through seq ${fmt(sum.through_seq)} (${fmt(sum.tokens)} tokens)`),
      sections.length ? h("dl", { class: "sections", id: "summary-sections" }, sections.map(([k, v]) => [h("dt", {}, k), h("dd", {}, Array.isArray(v) ? h("ul", {}, v.map((it) => h("li", {}, typeof it === "string" ? it : JSON.stringify(it)))) : typeof v === "string" ? v : JSON.stringify(v))]))
        : h("pre", { id: "summary-text" }, sum.text)) : null);
}

function decisionBySeq(context) {
  const out = new Map();
  for (const d of context.decisions || []) {
    const from = d.seq ?? d.from_seq, to = d.through ?? d.through_seq ?? d.to_seq ?? from;
    for (let q = from; q <= to && q - from < 5000; q++) out.set(q, d);
  }
  return out;
}

function payloadCard(context, sid) {
  if (context.error) return h("div", { class: "card error" }, `GET /context failed: ${context.error}`);
  const decisions = context.decisions || [];
  const runs = h("table", { id: "decisions" }, h("thead", {}, h("tr", {}, ["Seqs", "Decision", "Rule", ""].map((t) => h("th", {}, t)))),
    h("tbody", {}, decisions.slice(0, 400).map((d) => {
      const from = d.seq ?? d.from_seq, to = d.through ?? d.through_seq ?? d.to_seq ?? from;
      return h("tr", { class: "decision", "data-action": d.action },
        h("td", { class: "num" }, from === to ? `${from}` : `${from}–${to}`), h("td", {}, badge(d.action, "k-")), h("td", {}, d.rule || ""),
        h("td", {}, h("a", { href: `#/session/${encodeURIComponent(sid)}/message/${from}` }, from === to ? "message" : "first message")));
    })));
  const bySeq = decisionBySeq(context);
  const kept = context.kept_seqs || [];
  const messages = context.messages || [];
  // The history comes last, in seq order: align the kept seqs with the last messages.
  const offset = messages.length - kept.length;
  const msgs = messages.map((m, i) => {
    const seq = offset >= 0 && i >= offset ? kept[i - offset] : null;
    const d = seq !== null ? bySeq.get(seq) : null;
    const raw = typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? m.tool_calls ?? "");
    const content = raw || (m.tool_calls ? JSON.stringify(m.tool_calls) : "");
    return h("tr", { class: "payload-message", "data-seq": seq ?? "" },
      h("td", { class: "num" }, seq ?? h("span", { class: "muted" }, i === 0 && m.role === "system" ? "system" : "–")),
      h("td", { class: "msg-role" }, m.role),
      h("td", {}, d ? [badge(d.action, "k-"), h("div", { class: "muted" }, d.rule || "")] : null),
      h("td", {}, h("pre", {}, content.length > 600 ? `${content.slice(0, 600)}…` : content)),
      h("td", {}, seq !== null ? h("a", { class: "full-message", href: `#/session/${encodeURIComponent(sid)}/message/${seq}` }, "full message") : null));
  });
  // The system block and the summary, then the newest messages; the rest on request.
  const SHOWN = 40;
  const hidden = Math.max(0, msgs.length - SHOWN - 2);
  const tbody = h("tbody", {}, hidden ? [msgs.slice(0, 2), h("tr", {}, h("td", { colspan: 5, class: "muted" }, `… ${fmt(hidden)} more messages …`)), msgs.slice(-SHOWN)] : msgs);
  return h("div", { class: "card", id: "payload" },
    h("p", {}, `${fmt(context.usage.input_tokens)} input tokens · status `, badge(context.usage.status), ` · strategy ${context.strategy} · ${fmt(kept.length)} seqs kept, ${fmt(context.dropped_count)} dropped · summary ${context.summary && context.summary.included ? `included through seq ${context.summary.through_seq}` : "not included"}${context.over_budget ? " · OVER BUDGET" : ""}`),
    (context.warnings || []).length ? h("ul", { class: "error" }, context.warnings.map((w) => h("li", {}, typeof w === "string" ? w : JSON.stringify(w)))) : null,
    h("h3", {}, "Messages as the model sees them"),
    h("table", { id: "payload-messages" },
      h("thead", {}, h("tr", {}, ["Seq", "Role", "Decision", "Content", ""].map((t) => h("th", {}, t)))),
      tbody),
    hidden ? h("button", { type: "button", id: "show-all", onclick: (ev) => { tbody.replaceChildren(...msgs); ev.target.remove(); } }, `Show all ${fmt(msgs.length)} messages`) : null,
    h("h3", {}, "Decisions per seq"), runs);
}

async function messagePage(token, sid, seq) {
  const m = await api(`/sessions/${encodeURIComponent(sid)}/messages/${encodeURIComponent(seq)}`);
  if (token !== renderToken) return;
  main().replaceChildren(
    h("h1", {}, h("a", { href: "#/sessions" }, "Sessions"), " / ", h("a", { href: sessionHref(sid) }, sid), ` / seq ${seq}`),
    h("div", { class: "card", id: "message" }, h("pre", {}, JSON.stringify(m, null, 2))));
}

// ---------- queue and health
async function queuePage(token) {
  const draw = async () => {
    const q = await api("/ui/api/queue");
    if (token !== renderToken) return;
    const t = q.tenants;
    main().replaceChildren(
      h("h1", {}, "Queue & health ", h("span", { class: "muted", id: "updated" }, `updated ${new Date().toLocaleTimeString()} · refreshes every 3 s`)),
      h("div", { class: "grid", id: "health" },
        stat("reachable", "database"),
        stat(fmt(q.workers), "live contextd worker processes"),
        stat(String(q.compactions_in_process), "compactions run in this server"),
        stat(fmt(t.reduce((n, r) => n + r.pending, 0)), "pending jobs"),
        stat(secs(t[0] ? t[0].oldest_pending_age_s : null), "oldest pending")),
      h("h2", {}, "Queue"),
      h("table", { id: "queue" },
        h("thead", {}, h("tr", {}, ["Tenant", "Pending", "Running", "Oldest pending", "Finished (1 h)", "Failure rate (1 h)"].map((x) => h("th", {}, x)))),
        h("tbody", {}, t.map((r) => h("tr", { "data-tenant": r.tenant },
          h("td", {}, r.tenant), h("td", { class: "num pending" }, fmt(r.pending)), h("td", { class: "num running" }, fmt(r.running)),
          h("td", { class: "num" }, secs(r.oldest_pending_age_s)),
          h("td", {}, Object.entries(r.finished_last_hour).map(([st, n]) => [badge(st), ` ${n} `])),
          h("td", { class: "num" }, r.failure_rate === null ? "–" : `${(100 * r.failure_rate).toFixed(1)} %`))))),
      h("h2", {}, "Recent context.compressed and compaction events"),
      h("table", { id: "events" },
        h("thead", {}, h("tr", {}, ["When", "Session", "Event", "Data"].map((x) => h("th", {}, x)))),
        h("tbody", {}, q.events.length ? q.events.map((e) => h("tr", { class: "event", "data-type": e.type },
          h("td", {}, age(e.created_at)), h("td", {}, h("a", { href: sessionHref(e.session_id) }, e.session_id)),
          h("td", {}, e.type.startsWith("compaction.") ? badge(e.type.slice(11)) : null, " ", e.type),
          h("td", {}, h("code", {}, eventSummary(e))))) : h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No events yet.")))));
  };
  await draw();
  if (token === renderToken) {
    pollTimer = setInterval(() => draw().catch(() => {}), 3000);
  }
}

function eventSummary(e) {
  const d = e.data || {};
  const pick = ["input_tokens", "dropped_count", "previews", "strategy", "summarized_count", "range_tokens", "reason"];
  const parts = pick.filter((k) => d[k] !== undefined && d[k] !== null).map((k) => `${k}=${typeof d[k] === "object" ? JSON.stringify(d[k]) : d[k]}`);
  return parts.length ? parts.join(" ") : JSON.stringify(d).slice(0, 160);
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", route);

// The session's bill (stats.bill) as one line beside the token chart: what the payload
// calls sent, the part billed at the cached rate, the summariser's tokens, and what
// sending the whole history would have cost.
function billLine(bill) {
  if (!bill || !bill.calls) return h("p", { class: "muted", id: "bill" }, "Bill: no payload calls yet.");
  const share = (part, whole) => (whole ? `${Math.round((100 * part) / whole)}%` : "–");
  return h("p", { class: "muted", id: "bill" },
    `Bill: ${fmt(bill.calls)} payload calls sent ${fmt(bill.input_tokens)} input tokens, `
    + `${fmt(bill.cached_input_tokens)} (${share(bill.cached_input_tokens, bill.input_tokens)}) at the cached rate; `
    + `summariser ${fmt(bill.summariser_input_tokens)} in / ${fmt(bill.summariser_output_tokens)} out; `
    + `the whole history would have been ${fmt(bill.full_history_input_tokens)}: `
    + `saved ${fmt(Math.round(bill.saved_tokens))} tokens (${share(bill.saved_tokens, bill.full_history_input_tokens)}).`);
}
