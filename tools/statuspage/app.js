// The Homebase status page: renders /api/status, then each report of /api/events (Server-Sent Events).
// Every value from a peer (names) goes in as text, never as markup. Actions are POSTs carrying the CSRF token
// from the page's <meta>, each after a confirmation.
"use strict";

const csrf = document.querySelector('meta[name="csrf-token"]').content;
const $ = (id) => document.getElementById(id);
let last = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
  return node;
}

const short = (hex) => hex ? hex.slice(0, 8) + "…" : "";
// A peer's name (up to 64 characters, maybe with no break): wraps anywhere rather than widen the page.
const nameOf = (name, pk) => el("span", { class: "name" }, name || short(pk));
const pill = (text, kind) => el("span", { class: "pill " + (kind || "") }, text);

function ago(ms, now) {
  if (ms === null || ms === undefined) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 5) return "just now";
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}

function until(ms, now) {
  if (ms === null || ms === undefined) return "no expiry";
  const s = Math.round((ms - now) / 1000);
  if (s <= 0) return "expired";
  if (s < 3600) return "expires in " + Math.max(1, Math.round(s / 60)) + " min";
  if (s < 86400) return "expires in " + Math.round(s / 3600) + " h";
  return "expires in " + Math.round(s / 86400) + " d";
}

// Memory a loaded model takes (and how much on the GPU), and when Ollama's keep-alive unloads it.
const bytes = (n) => n >= 1e9 ? (n / 1e9).toFixed(1) + " GB" : n >= 1e6 ? Math.round(n / 1e6) + " MB" : Math.round(n / 1e3) + " kB";
function loadDetails(m, now) {
  const parts = [];
  if (m.memory_bytes) {
    const gpu = m.vram_bytes ? Math.round(100 * m.vram_bytes / m.memory_bytes) : 0;
    parts.push(bytes(m.memory_bytes) + (gpu === 100 ? " on the GPU" : gpu ? " (" + gpu + " % GPU)" : " on the CPU"));
  }
  if (m.unloads_at) {
    const s = Math.round((m.unloads_at - now) / 1000);
    parts.push(s > 366 * 86400 ? "kept loaded" : s <= 0 ? "unloading" : s < 90 ? "unloads in " + s + " s" : s < 5400 ? "unloads in " + Math.round(s / 60) + " min" : "unloads in " + Math.round(s / 3600) + " h");
  }
  return parts.join(" · ");
}

// A duration in ms as "840 ms" or "3.2 s"; "–" when unknown.
const ms = (v) => v === null || v === undefined ? "–" : v < 1000 ? Math.round(v) + " ms" : (v / 1000).toFixed(v < 10000 ? 1 : 0) + " s";

const fmt = (n) => n >= 10000 ? (n / 1000).toFixed(n >= 100000 ? 0 : 1) + "k" : String(n);

function fill(tbody, rows, emptyId) {
  // Each cell carries its column's title: the phone layout shows rows as "label value" lines.
  const titles = [...tbody.closest("table").tHead.rows[0].cells].map((th) => th.textContent);
  for (const row of rows) [...row.cells].forEach((td, i) => td.setAttribute("data-label", titles[i] || ""));
  // Rows that did not change stay as they are: a click (or a selection) is not lost to a redraw.
  const html = rows.map((r) => r.outerHTML).join("");
  if (tbody.drawn !== html) {
    tbody.replaceChildren(...rows);
    tbody.drawn = html;
  }
  $(emptyId).style.display = rows.length ? "none" : "";
  tbody.closest("table").style.display = rows.length ? "" : "none";
}

function card(id, kind) {
  $(id).classList.remove("ok", "bad", "warn");
  if (kind) $(id).classList.add(kind);
}

function render(d) {
  last = d;
  const now = d.generated_at;
  $("name").textContent = "· " + d.name;
  $("device").textContent = d.device;
  $("join-line").textContent = "guest join " + d.device;
  const pendingJoins = d.guests.filter((g) => g.state === "pending").length;
  document.title = (pendingJoins ? "(" + pendingJoins + ") " : "") + "Homebase · " + d.name;

  const link = d.relay_link;
  $("relay-state").textContent = link.connected ? "Connected" : "Not connected";
  // Up since, reconnects, the last round trip (a message to the relay's receipt), what it held at login, and
  // how the last connection ended.
  const closed = link.last_close_code === null || link.last_close_code === undefined ? "" : "closed " + link.last_close_code;
  $("relay-detail").textContent = (link.connected
    ? ["up " + ago(link.since, now).replace(" ago", ""),
      link.reconnects + " reconnect" + (link.reconnects === 1 ? "" : "s"),
      link.round_trip_ms === null ? null : "round trip " + ms(link.round_trip_ms),
      link.stored_at_login === null ? null : link.stored_at_login + " stored at login",
      link.last_loss_at ? "last lost " + ago(link.last_loss_at, now) + (closed ? " (" + closed + ")" : "") : null]
    : [link.last_loss_at ? "lost " + ago(link.last_loss_at, now) + (closed ? " · " + closed : "") : "connecting…"])
    .filter(Boolean).join(" · ");
  $("relay-url").textContent = d.relay;
  card("card-relay", link.connected ? "ok" : "bad");

  const rt = d.runtime;
  $("runtime-state").textContent = !rt.verified ? "Not verified" : rt.available ? "Available" : "Unavailable";
  $("runtime-detail").textContent = rt.available
    ? "Ollama " + (rt.version || "?") + " · " + d.models.length + " model" + (d.models.length === 1 ? "" : "s") + " · " + d.models.filter((m) => m.loaded).length + " loaded"
    : (rt.error || "waiting for the first probe");
  $("runtime-url").textContent = d.ollama;
  card("card-runtime", rt.verified && rt.available ? "ok" : rt.verified ? "bad" : "warn");

  const streaming = d.streams.filter((s) => s.state === "streaming");
  const rate = streaming.reduce((a, s) => a + s.tokens_per_s, 0);
  $("now-streams").textContent = streaming.length;
  $("now-detail").textContent = Math.round(rate) + " tokens/s · " + d.admission.queued + " queued · at most " + d.admission.max_concurrent + " at once";
  card("card-now", streaming.length ? "ok" : null);

  const hourTokens = d.series.tokens.reduce((a, b) => a + b, 0);
  const hourRequests = d.series.requests.reduce((a, b) => a + b, 0);
  $("hour-tokens").textContent = fmt(hourTokens);
  const hourEvents = d.events.filter((e) => now - e.at < 3600000).length;
  $("hour-detail").textContent = hourRequests + " request" + (hourRequests === 1 ? "" : "s") + " · " + hourEvents + (hourEvents === 1 ? " error or fallback" : " errors or fallbacks");

  chart(d.series, now - d.started_at);

  fill($("streams").tBodies[0], d.streams.map((s) => el("tr", { class: s.state === "streaming" ? "streaming" : "", "data-peer": s.peer },
    el("td", { class: "who" }, nameOf(s.peer_name, s.peer), el("span", { class: "mono" }, s.kind)),
    el("td", { class: "mono" }, s.model),
    el("td", {}, pill(s.state, s.state === "streaming" ? "info" : "warn")),
    el("td", { class: "num" }, s.tokens),
    el("td", { class: "num" }, s.tokens_per_s.toFixed(1)),
    el("td", { class: "num ttft" }, ms(s.first_token_ms)),
    el("td", { class: "muted" }, ago(s.admitted_at, now)),
    el("td", { class: "actions" }, el("button", { class: "stop",
      onclick: () => confirmAction("Stop this answer to " + (s.peer_name || short(s.peer)) + "?",
        "Only this request ends; its device falls back on-device. Nobody is revoked.", "stop", { peer: s.peer, id: s.id }) }, "Stop")))), "streams-empty");

  fill($("finished").tBodies[0], (d.finished || []).slice(0, 10).map((f) => el("tr", { "data-peer": f.peer },
    el("td", { class: "muted" }, ago(f.at, now)),
    el("td", { class: "who" }, nameOf(f.peer_name, f.peer), el("span", { class: "mono" }, f.kind)),
    el("td", { class: "mono" }, f.model),
    el("td", { class: "num" }, f.tokens),
    el("td", { class: "num" }, ms(f.first_token_ms)),
    el("td", { class: "num" }, ms(f.duration_ms)),
    el("td", {}, pill(f.outcome, f.outcome === "done" ? "ok" : f.outcome === "stopped" || f.outcome.startsWith("cancel") || f.outcome === "cut short" ? "warn" : "bad")))), "finished-empty");

  fill($("guests").tBodies[0], d.guests.map((g) => guestRow(g, now)), "guests-empty");
  fill($("models").tBodies[0], d.models.map((m) => el("tr", { "data-model": m.tag },
    el("td", { class: "mono" }, m.tag),
    el("td", { class: "muted" }, [m.parameter_size, m.quantization].filter(Boolean).join(" · ")),
    el("td", {}, el("div", {}, m.cloud ? pill(m.shared ? "cloud · shared" : "cloud · not shared", "info") : m.loaded ? pill("loaded", "ok") : pill("cold"), m.pinned ? " " : null, m.pinned ? pill("pinned", "info") : null,
      m.loaded && !m.cloud ? el("div", { class: "muted small memory" }, loadDetails(m, now)) : null)),
    el("td", {}, m.pinned
      ? el("button", { onclick: () => confirmAction("Stop keeping " + m.tag + " warm?", "It unloads when Ollama's keep-alive runs out.", "pin", { model: m.tag, pinned: false }) }, "Unpin")
      : el("button", { onclick: () => confirmAction("Keep " + m.tag + " warm?", "The Homebase loads it now and keeps it loaded, so no request waits for a cold load.", "pin", { model: m.tag, pinned: true }) }, "Pin warm")))), "models-empty");

  fill($("siblings").tBodies[0], d.siblings.map((s) => el("tr", {},
    el("td", { class: "who" }, nameOf(s.name, s.pk), el("span", { class: "mono" }, short(s.pk))),
    el("td", { class: "muted" }, s.role),
    el("td", { class: "muted" }, ago(s.last_heard, now)))), "siblings-empty");

  fill($("events").tBodies[0], d.events.slice(0, 12).map((e) => el("tr", {},
    el("td", { class: "muted" }, ago(e.at, now)),
    el("td", { class: "who" }, nameOf(e.peer_name, e.peer), el("span", { class: "mono" }, e.peer_kind)),
    el("td", { class: "mono" }, e.model),
    el("td", {}, pill(e.code || e.kind.replace("_", " "), e.kind === "error" && e.code !== "busy" ? "bad" : "warn")),
    el("td", { class: "muted" }, e.message))), "events-empty");

  // The grant form's models: "all models" or any set of them (a grant takes a list).
  const box = $("grant-models");
  const want = ["*"].concat(d.models.filter((m) => m.capabilities.includes("completion")).map((m) => m.tag));
  const have = [...box.querySelectorAll("input")].map((i) => i.value);
  if (have.length !== want.length || have.some((v, i) => v !== want[i])) {
    const checked = new Set(grantModels());
    box.replaceChildren(box.querySelector("legend"), ...want.map((t) => el("label", {},
      el("input", { type: "checkbox", value: t, onchange: (e) => modelsChanged(e.target) }),
      el("span", {}, t === "*" ? "all models" : t))));
    setGrantModels(checked.size ? [...checked] : ["*"]);
  }
}

function grantModels() {
  return [...$("grant-models").querySelectorAll("input:checked")].map((i) => i.value);
}

function setGrantModels(models) {
  for (const i of $("grant-models").querySelectorAll("input")) i.checked = models.includes(i.value);
}

// "all models" and single models exclude each other.
function modelsChanged(input) {
  if (!input.checked) return;
  for (const i of $("grant-models").querySelectorAll("input")) {
    if (i !== input && (input.value === "*" || i.value === "*")) i.checked = false;
  }
}

// Fills the grant form for `g`: a pending guest to grant, or a granted one to edit (its models and expiry).
function editGrant(g) {
  $("grant-guest").value = g.pubkey;
  $("grant-title").textContent = g.state === "granted" ? "Edit the grant of " + (g.name || short(g.pubkey)) : "Grant " + (g.name || short(g.pubkey));
  if (g.models && g.models.length) setGrantModels(g.models);
  if (g.state === "granted") {
    const hours = g.expires_at === null ? null : (g.expires_at - last.generated_at) / 3600000;
    const options = [...$("grant-expires").options];
    const best = hours === null ? options.find((o) => o.value === "")
      : options.filter((o) => o.value).reduce((a, o) => Math.abs(o.value - hours) < Math.abs(a.value - hours) ? o : a);
    $("grant-expires").value = best.value;
  }
  $("grant-form").scrollIntoView({ block: "nearest" });
  $("grant-guest").focus();
}

function guestRow(g, now) {
  const state = g.state === "granted" && g.expired ? "expired" : g.state;
  const kind = { granted: "ok", pending: "warn", revoked: "bad", expired: "bad" }[state];
  const models = g.models === null ? "–" : g.models.includes("*") ? "all models" : g.models.join(", ");
  const week = g.daily.map((day) => day.usage.tokens);
  const top = Math.max(1, ...week);
  const bars = el("span", { class: "bars", title: "tokens per day, last " + week.length + " days" },
    ...week.map((t) => { const i = el("i"); i.style.height = Math.max(2, Math.round(16 * t / top)) + "px"; return i; }));
  const actions = el("td", { class: "actions" });
  const who = g.name || short(g.pubkey);
  if (g.state === "granted") {
    actions.append(el("button", { class: "edit", onclick: () => editGrant(g) }, "Edit…"));
    actions.append(el("button", { class: "danger", "data-guest": g.pubkey,
      onclick: () => confirmAction("Revoke " + who + "?",
        "Refused from its next request; a stream in progress is stopped. Its device falls back on-device.", "revoke", { guest: g.pubkey }) }, "Revoke"));
  } else {
    actions.append(el("button", { class: "grant", onclick: () => editGrant(g) }, "Grant…"));
    if (g.state === "pending") {
      actions.append(el("button", { class: "decline",
        onclick: () => confirmAction("Decline " + who + "?",
          "Its join is forgotten: it is a stranger again, and can ask to join once more.", "decline", { guest: g.pubkey }) }, "Decline"));
    }
  }
  return el("tr", { "data-guest": g.pubkey },
    el("td", { class: "who" }, g.name ? nameOf(g.name) : "(invited)", el("span", { class: "mono" }, short(g.pubkey))),
    el("td", {}, el("div", {}, pill(state, kind), el("div", { class: "muted small" }, g.state === "granted" ? until(g.expires_at, now) : ""))),
    el("td", { class: "mono" }, models),
    el("td", { class: "muted" }, ago(g.last_heard, now)),
    el("td", { class: "num" }, el("span", {}, g.usage_today.requests + " req · " + fmt(g.usage_today.tokens) + " tok", bars)),
    actions);
}

// The last hour; for a daemon up less than that, the time since it started in whole quarters of minutes (four
// minutes at least), so a young Homebase's chart is not a flat line with a spike at its end.
function chart(series, uptimeMs) {
  const svg = $("chart");
  const W = 720, top = 14, bottom = 150;
  const hour = series.tokens.length * series.bucket_ms / 60000;
  const minutes = Math.min(hour, Math.max(4, 4 * Math.ceil(uptimeMs / 60000 / 4)));
  const span = Math.round(minutes * 60000 / series.bucket_ms);
  const tokens = series.tokens.slice(-span), requests = series.requests.slice(-span);
  $("chart-title").textContent = "Tokens per second and requests, "
    + (span === series.tokens.length ? "last hour" : "last " + Math.round(minutes) + " min");
  $("chart-axis").replaceChildren(...[4, 3, 2, 1, 0].map((q) =>
    el("span", {}, q ? "−" + minutes * q / 4 + " min" : "now")));
  const n = tokens.length, step = W / n, seconds = series.bucket_ms / 1000;
  const rates = tokens.map((t) => t / seconds);
  const maxRate = niceMax(Math.max(1, ...rates));
  const maxReq = Math.max(1, ...requests);
  const ns = "http://www.w3.org/2000/svg";
  const node = (tag, attrs) => { const e = document.createElementNS(ns, tag); for (const k in attrs) e.setAttribute(k, attrs[k]); return e; };
  const y = (v) => bottom - (bottom - top) * v / maxRate;
  const parts = [];
  // The scale's labels are HTML over the chart, not SVG text, which the stretched drawing would stretch too.
  const labels = [];
  for (const f of [0, 0.5, 1]) {
    parts.push(node("line", { class: "grid", x1: 0, x2: W, y1: y(maxRate * f), y2: y(maxRate * f) }));
    if (f > 0) {
      const label = el("span", {}, rateText(maxRate * f) + " tok/s");
      label.style.top = (100 * y(maxRate * f) / 170) + "%";
      labels.push(label);
    }
  }
  $("chart-labels").replaceChildren(...labels);
  requests.forEach((r, i) => {
    if (!r) return;
    const h = 26 * r / maxReq;
    parts.push(node("rect", { class: "bar", x: i * step, y: bottom - h, width: Math.max(1, step - 0.6), height: h }));
  });
  let line = "";
  rates.forEach((r, i) => { line += (i ? "L" : "M") + (i * step + step / 2).toFixed(1) + " " + y(r).toFixed(1); });
  parts.push(node("path", { class: "area", d: line + "L" + (W - step / 2) + " " + bottom + "L" + step / 2 + " " + bottom + "Z" }));
  parts.push(node("path", { class: "line", d: line }));
  svg.replaceChildren(...parts);
}

// 0.5 stays 0.5: an idle chart's scale reads "0.5" and "1", not "1" twice.
const rateText = (v) => Number.isInteger(v) ? String(v) : v < 10 ? v.toFixed(1) : String(Math.round(v));

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

let pending = null;
function confirmAction(title, text, action, body) {
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  const labels = { revoke: "Revoke", grant: "Grant", decline: "Decline", stop: "Stop" };
  $("confirm-ok").textContent = labels[action] || "Confirm";
  $("confirm-ok").className = ["revoke", "decline", "stop"].includes(action) ? "primary danger-fill" : "primary";
  pending = { action, body };
  $("confirm").showModal();
}

$("confirm-cancel").addEventListener("click", () => { pending = null; $("confirm").close(); });
$("confirm-ok").addEventListener("click", async () => {
  const p = pending;
  pending = null;
  $("confirm").close();
  if (p) await post(p.action, p.body);
});

async function post(action, body) {
  try {
    const response = await fetch("/api/" + action, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body),
    });
    const type = response.headers.get("Content-Type") || "";
    const answer = type.startsWith("application/json") ? await response.json() : { message: await response.text() };
    toast(answer.message || response.statusText, !response.ok);
  } catch (e) {
    toast("the Homebase does not answer: " + e, true);
  }
}

function toast(text, isError) {
  const t = $("toast");
  t.textContent = text;
  t.className = "show" + (isError ? " error" : "");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.className = ""; }, 4000);
}

$("grant-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const guest = $("grant-guest").value.trim().toLowerCase();
  const models = grantModels();
  if (!models.length) return toast("choose at least one model, or all models", true);
  const hours = $("grant-expires").value;
  const known = last && last.guests.find((g) => g.pubkey === guest);
  confirmAction("Grant " + (known && known.name ? known.name : short(guest)) + "?",
    "It may use " + (models.includes("*") ? "all models" : models.join(", ")) + ", " + (hours ? "for " + $("grant-expires").selectedOptions[0].text.replace("in ", "") : "with no expiry") + ". The signed grant is sent within a second.",
    "grant", { guest, models, expires_hours: hours ? Number(hours) : null });
});

// The clipboard API needs a secure context (loopback is one, a LAN address is not): else a selection and copy.
async function copy(text, what) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
    } else {
      const area = el("textarea", { readonly: "", class: "offscreen" }, text);
      document.body.append(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      if (!ok) throw new Error("the browser refused");
    }
    toast(what + " copied");
  } catch (e) {
    toast("cannot copy: " + e.message + "; select the text instead", true);
  }
}

// A one-time pairing code from the daemon, shown as text and as a QR code drawn from its module rows.
let pairTimer = null;
async function pair() {
  let answer;
  try {
    const response = await fetch("/api/pair", {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: "{}",
    });
    answer = await response.json();
    if (!response.ok) return toast(answer.message || response.statusText, true);
  } catch (e) {
    return toast("the Homebase does not answer: " + e, true);
  }
  const quiet = 4, n = answer.qr.size;
  const svg = $("pair-qr");
  svg.setAttribute("viewBox", "0 0 " + (n + 2 * quiet) + " " + (n + 2 * quiet));
  svg.setAttribute("data-size", n);
  let d = "";
  answer.qr.rows.forEach((row, y) => { for (let x = 0; x < n; x++) if (row[x] === "1") d += "M" + (x + quiet) + " " + (y + quiet) + "h1v1h-1z"; });
  const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
  path.setAttribute("d", d);
  svg.replaceChildren(path);
  $("pair-line").textContent = "handset pair '" + answer.code + "'";
  $("pair-line").dataset.code = answer.code;
  const until = Date.now() + answer.expires_in_s * 1000;
  const tick = () => {
    const s = Math.max(0, Math.round((until - Date.now()) / 1000));
    $("pair-left").textContent = s ? Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s" : "no longer (expired)";
  };
  tick();
  clearInterval(pairTimer);
  pairTimer = setInterval(tick, 1000);
  $("pair").showModal();
}

$("pair-button").addEventListener("click", pair);
$("pair-copy").addEventListener("click", () => copy($("pair-line").textContent, "the pairing line"));
$("pair-close").addEventListener("click", () => { clearInterval(pairTimer); $("pair").close(); });

$("copy-key").addEventListener("click", () => copy(last ? last.device : "", "the device key"));
$("copy-join").addEventListener("click", () => copy($("join-line").textContent, "the join line"));

function setLive(on, text) {
  $("live").classList.toggle("off", !on);
  $("live-text").textContent = text;
}

async function start() {
  try {
    const response = await fetch("/api/status", { credentials: "same-origin" });
    if (response.ok) render(await response.json());
  } catch (e) { /* the event stream below reports the state */ }
  const events = new EventSource("/api/events");
  events.addEventListener("status", (e) => { render(JSON.parse(e.data)); setLive(true, "live"); });
  events.addEventListener("error", () => setLive(false, "reconnecting…"));
}

setInterval(() => { if (last && Date.now() - last.generated_at > 5000) setLive(false, "no update for " + Math.round((Date.now() - last.generated_at) / 1000) + " s"); }, 2000);
start();
