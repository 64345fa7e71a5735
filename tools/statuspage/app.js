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

const fmt = (n) => n >= 10000 ? (n / 1000).toFixed(n >= 100000 ? 0 : 1) + "k" : String(n);

function fill(tbody, rows, emptyId) {
  tbody.replaceChildren(...rows);
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
  document.title = "Homebase · " + d.name;

  const link = d.relay_link;
  $("relay-state").textContent = link.connected ? "Connected" : "Not connected";
  $("relay-detail").textContent = link.connected
    ? "up " + ago(link.since, now).replace(" ago", "") + " · " + link.reconnects + " reconnect" + (link.reconnects === 1 ? "" : "s")
    : (link.last_loss_at ? "lost " + ago(link.last_loss_at, now) : "connecting…");
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
    el("td", { class: "who" }, s.peer_name || short(s.peer), el("span", { class: "mono" }, s.kind)),
    el("td", { class: "mono" }, s.model),
    el("td", {}, pill(s.state, s.state === "streaming" ? "info" : "warn")),
    el("td", { class: "num" }, s.tokens),
    el("td", { class: "num" }, s.tokens_per_s.toFixed(1)),
    el("td", { class: "muted" }, ago(s.admitted_at, now)))), "streams-empty");

  fill($("guests").tBodies[0], d.guests.map((g) => guestRow(g, now)), "guests-empty");
  fill($("models").tBodies[0], d.models.map((m) => el("tr", { "data-model": m.tag },
    el("td", { class: "mono" }, m.tag),
    el("td", { class: "muted" }, [m.parameter_size, m.quantization].filter(Boolean).join(" · ")),
    el("td", {}, m.cloud ? pill(m.shared ? "cloud · shared" : "cloud · not shared", "info") : m.loaded ? pill("loaded", "ok") : pill("cold"), m.pinned ? " " : null, m.pinned ? pill("pinned", "info") : null),
    el("td", {}, m.pinned
      ? el("button", { onclick: () => confirmAction("Stop keeping " + m.tag + " warm?", "It unloads when Ollama's keep-alive runs out.", "pin", { model: m.tag, pinned: false }) }, "Unpin")
      : el("button", { onclick: () => confirmAction("Keep " + m.tag + " warm?", "The Homebase loads it now and keeps it loaded, so no request waits for a cold load.", "pin", { model: m.tag, pinned: true }) }, "Pin warm")))), "models-empty");

  fill($("siblings").tBodies[0], d.siblings.map((s) => el("tr", {},
    el("td", { class: "who" }, s.name, el("span", { class: "mono" }, short(s.pk))),
    el("td", { class: "muted" }, s.role),
    el("td", { class: "muted" }, ago(s.last_heard, now)))), "siblings-empty");

  fill($("events").tBodies[0], d.events.slice(0, 12).map((e) => el("tr", {},
    el("td", { class: "muted" }, ago(e.at, now)),
    el("td", { class: "who" }, e.peer_name || short(e.peer), el("span", { class: "mono" }, e.peer_kind)),
    el("td", { class: "mono" }, e.model),
    el("td", {}, pill(e.code || e.kind.replace("_", " "), e.kind === "error" && e.code !== "busy" ? "bad" : "warn")),
    el("td", { class: "muted" }, e.message))), "events-empty");

  const select = $("grant-models");
  const want = ["*"].concat(d.models.filter((m) => m.capabilities.includes("completion")).map((m) => m.tag));
  if (select.options.length !== want.length || [...select.options].some((o, i) => o.value !== want[i])) {
    select.replaceChildren(...want.map((t) => el("option", { value: t }, t === "*" ? "all models" : t)));
  }
}

function guestRow(g, now) {
  const state = g.state === "granted" && g.expired ? "expired" : g.state;
  const kind = { granted: "ok", pending: "warn", revoked: "bad", expired: "bad" }[state];
  const models = g.models === null ? "–" : g.models.includes("*") ? "all models" : g.models.join(", ");
  const week = g.daily.map((day) => day.usage.tokens);
  const top = Math.max(1, ...week);
  const bars = el("span", { class: "bars", title: "tokens per day, last " + week.length + " days" },
    ...week.map((t) => { const i = el("i"); i.style.height = Math.max(2, Math.round(16 * t / top)) + "px"; return i; }));
  const actions = el("td", {});
  if (g.state === "granted") {
    actions.append(el("button", { class: "danger", "data-guest": g.pubkey,
      onclick: () => confirmAction("Revoke " + (g.name || short(g.pubkey)) + "?",
        "Refused from its next request; a stream in progress is stopped. Its device falls back on-device.", "revoke", { guest: g.pubkey }) }, "Revoke"));
  } else {
    actions.append(el("button", { onclick: () => { $("grant-guest").value = g.pubkey; $("grant-guest").focus(); } }, "Grant…"));
  }
  return el("tr", { "data-guest": g.pubkey },
    el("td", { class: "who" }, g.name || "(invited)", el("span", { class: "mono" }, short(g.pubkey))),
    el("td", {}, pill(state, kind), el("div", { class: "muted small" }, g.state === "granted" ? until(g.expires_at, now) : "")),
    el("td", { class: "mono" }, models),
    el("td", { class: "muted" }, ago(g.last_heard, now)),
    el("td", { class: "num" }, g.usage_today.requests + " req · " + fmt(g.usage_today.tokens) + " tok", bars),
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
  for (const f of [0, 0.5, 1]) {
    parts.push(node("line", { class: "grid", x1: 0, x2: W, y1: y(maxRate * f), y2: y(maxRate * f) }));
    const label = node("text", { x: 4, y: y(maxRate * f) - 3 });
    label.textContent = Math.round(maxRate * f) + " tok/s";
    if (f > 0) parts.push(label);
  }
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

function niceMax(v) {
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

let pending = null;
function confirmAction(title, text, action, body) {
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = action === "revoke" ? "Revoke" : action === "grant" ? "Grant" : "Confirm";
  $("confirm-ok").className = action === "revoke" ? "primary danger-fill" : "primary";
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
  const model = $("grant-models").value;
  const hours = $("grant-expires").value;
  const known = last && last.guests.find((g) => g.pubkey === guest);
  confirmAction("Grant " + (known && known.name ? known.name : short(guest)) + "?",
    "It may use " + (model === "*" ? "all models" : model) + ", " + (hours ? "for " + $("grant-expires").selectedOptions[0].text.replace("in ", "") : "with no expiry") + ". The signed grant is sent within a second.",
    "grant", { guest, models: [model], expires_hours: hours ? Number(hours) : null });
});

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
