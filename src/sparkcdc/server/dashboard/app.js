// The sparkcdc dashboard: reads the server's /api/v2 with the API token and draws what it says.
// No build step, no library: the server ships this file as it is.
"use strict";

const API = "/api/v2";
const TOKEN_KEY = "sparkcdc-token";
const REFRESH_MS = 2000;
const HOUR_S = 3600;

const state = {
  token: sessionStorage.getItem(TOKEN_KEY),
  selected: null, // {namespace, id}
  changefeeds: [],
  timer: null,
};

const $ = (id) => document.getElementById(id);

class AuthRequired extends Error {}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const resp = await fetch(API + path, Object.assign({}, options, { headers }));
  if (resp.status === 401) throw new AuthRequired();
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const err = new Error(body.error_msg || resp.statusText);
    err.code = body.error_code;
    throw err;
  }
  return body;
}

function cfPath(cf, suffix = "") {
  return `/changefeeds/${encodeURIComponent(cf.id)}${suffix}?namespace=${encodeURIComponent(cf.namespace)}`;
}

function el(tag, attrs = {}, text) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  if (text !== undefined) node.textContent = text;
  return node;
}

function formatLag(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return seconds.toFixed(1) + " s";
  if (seconds < 3600) return (seconds / 60).toFixed(1) + " min";
  return (seconds / 3600).toFixed(1) + " h";
}

function formatNumber(n) {
  if (n === null || n === undefined) return "–";
  return Math.round(n).toLocaleString("en-US");
}

function isRunning(cf) {
  return cf.state === "normal" && cf.owner && cf.stats && "lag_s" in cf.stats;
}

// ------------------------------------------------------------------ the list

function renderList() {
  const tbody = $("changefeeds").querySelector("tbody");
  tbody.replaceChildren();
  $("empty").hidden = state.changefeeds.length > 0;
  for (const cf of state.changefeeds) {
    const running = isRunning(cf);
    const stats = cf.stats || {};
    const row = el("tr", { class: "cf-row", "data-id": cf.id, "data-namespace": cf.namespace });
    const label = cf.namespace === "default" ? cf.id : `${cf.namespace}/${cf.id}`;
    row.append(
      el("td", { class: "cf-id" }, label),
      el("td", { class: `cf-state state ${cf.state}` }, cf.state),
      el("td", { class: "cf-checkpoint" }, cf.checkpoint_time),
      el("td", { class: "cf-lag num" }, running ? formatLag(stats.lag_s) : "–"),
      el("td", { class: "cf-rate num" }, running ? formatNumber(stats.rows_per_sec) : "–"),
      el("td", { class: "cf-rows num" }, formatNumber(stats.rows_total)),
      el("td", { class: "cf-owner muted" }, cf.owner ? cf.owner.slice(0, 8) : "–"),
    );
    if (state.selected && state.selected.id === cf.id && state.selected.namespace === cf.namespace) {
      row.classList.add("selected");
    }
    row.addEventListener("click", () => select(cf));
    tbody.append(row);
  }
}

function select(cf) {
  state.selected = { namespace: cf.namespace, id: cf.id };
  location.hash = `cf=${encodeURIComponent(cf.namespace)}/${encodeURIComponent(cf.id)}`;
  renderList();
  refreshDetail();
}

function selectionFromHash() {
  const m = /^#cf=([^/]+)\/(.+)$/.exec(location.hash);
  return m ? { namespace: decodeURIComponent(m[1]), id: decodeURIComponent(m[2]) } : null;
}

// ------------------------------------------------------------------ one changefeed

function renderProblem(detail) {
  const box = $("problem");
  let kind = null, code = "", message = "", when = "";
  if (detail.error) {
    kind = "Error";
    code = detail.error.code || "";
    message = detail.error.message || "";
    when = detail.error.time || "";
  } else if (detail.warning) {
    kind = "Warning";
    const m = /^\[([^\]]+)\]\s*(.*)$/s.exec(detail.warning);
    code = m ? m[1] : "";
    message = m ? m[2] : detail.warning;
  }
  box.hidden = kind === null;
  box.className = kind === "Error" ? "error" : "";
  $("problem-kind").textContent = kind ? kind + ":" : "";
  $("problem-code").textContent = code;
  $("problem-message").textContent = message;
  $("problem-time").textContent = when;
}

function renderActions(detail) {
  $("btn-pause").disabled = !["normal", "failed"].includes(detail.state);
  $("btn-resume").disabled = !["stopped", "failed"].includes(detail.state);
  $("btn-remove").disabled = false;
}

function renderSnapshot(snap) {
  const box = $("snapshot");
  box.replaceChildren();
  if (!snap.items.length) {
    box.append(el("p", { class: "muted" }, "No initial snapshot ([snapshot] mode = \"none\"), or it has not planned its ranges yet."));
    return;
  }
  for (const t of snap.items) {
    const div = el("div", { class: "snapshot-table", "data-table": `${t.schema}.${t.table}` });
    const head = el("div");
    head.append(
      el("span", { class: "name" }, `${t.schema}.${t.table}`),
      el("span", { class: "figures" },
        `${formatNumber(t.rows_copied)} of ~${formatNumber(t.estimated_rows)} rows · ranges ${t.ranges_done}/${t.ranges_total}`),
    );
    const bar = el("progress", { max: String(t.ranges_total || 1), value: String(t.ranges_done) });
    const ranges = el("div", { class: "ranges" });
    for (const r of t.ranges) {
      const chip = el("span", { class: `range ${r.stage}`, title: `range ${r.range_id}: ${r.stage}, ${r.rows_copied} rows copied of ~${r.estimated_rows}` },
        `#${r.range_id} ${formatNumber(r.rows_copied)}`);
      ranges.append(chip);
    }
    div.append(head, bar, ranges);
    box.append(div);
  }
}

function drawChart(canvas, points, value, color, unit) {
  const ratio = window.devicePixelRatio || 1;
  const cssW = canvas.clientWidth || canvas.width, cssH = canvas.clientHeight || canvas.height;
  canvas.width = Math.round(cssW * ratio);
  canvas.height = Math.round(cssH * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, cssW, cssH);
  const pad = { left: 52, right: 10, top: 10, bottom: 22 };
  const w = cssW - pad.left - pad.right, h = cssH - pad.top - pad.bottom;
  const now = Date.now() / 1000;
  // The samples of the last hour; a younger history fills the width (at least a minute of it).
  const span = Math.min(HOUR_S, Math.max(60, points.length ? now - points[0].time : 0));
  const t0 = now - span;
  const values = points.map(value);
  const top = 4 * niceStep(Math.max(1e-9, ...values, 0) / 4);
  const x = (t) => pad.left + ((t - t0) / span) * w;
  const y = (v) => pad.top + h - (v / top) * h;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = "#667085";
  ctx.strokeStyle = "#e5e7eb";
  ctx.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4, yy = Math.round(y(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(pad.left, yy); ctx.lineTo(pad.left + w, yy); ctx.stroke();
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    ctx.fillText(shortNumber(v) + unit, pad.left - 6, yy);
  }
  ctx.textAlign = "center"; ctx.textBaseline = "top";
  for (const k of [4, 3, 2, 1, 0]) {
    const ago = (span * k) / 4;
    const label = k === 0 ? "now" : ago >= 120 ? `-${Math.round(ago / 60)} min` : `-${Math.round(ago)} s`;
    ctx.fillText(label, x(now - ago), pad.top + h + 5);
  }
  if (points.length) {
    ctx.strokeStyle = color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    points.forEach((p, i) => {
      const xx = x(Math.max(p.time, t0)), yy = y(value(p));
      if (i === 0) ctx.moveTo(xx, yy); else ctx.lineTo(xx, yy);
    });
    if (points.length === 1) ctx.lineTo(x(now), y(value(points[0])));
    ctx.stroke();
    ctx.lineTo(x(points.length === 1 ? now : points[points.length - 1].time), y(0));
    ctx.lineTo(x(Math.max(points[0].time, t0)), y(0));
    ctx.closePath();
    ctx.globalAlpha = 0.12; ctx.fillStyle = color; ctx.fill(); ctx.globalAlpha = 1;
  }
  canvas.dataset.points = String(points.length);
  canvas.dataset.max = String(Math.max(0, ...values));
  canvas.dataset.last = String(values.length ? values[values.length - 1] : 0);
}

function niceStep(v) {
  const exp = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * exp) return m * exp;
  return 10 * exp;
}

function shortNumber(v) {
  if (v >= 1e6) return (v / 1e6).toFixed(1).replace(/\.0$/, "") + "M";
  if (v >= 1e3) return (v / 1e3).toFixed(1).replace(/\.0$/, "") + "k";
  if (v >= 10 || v === 0) return String(Math.round(v));
  return v.toFixed(1);
}

async function refreshDetail() {
  const sel = state.selected;
  if (!sel) { $("detail").hidden = true; return; }
  const [detail, history, snap] = await Promise.all([
    api(cfPath(sel)), api(cfPath(sel, "/history")), api(cfPath(sel, "/snapshot")),
  ]);
  if (state.selected !== sel) return; // another changefeed was picked meanwhile
  $("detail").hidden = false;
  $("detail").dataset.id = detail.id;
  $("detail-title").textContent = detail.namespace === "default" ? detail.id : `${detail.namespace}/${detail.id}`;
  const st = $("detail-state");
  st.textContent = detail.state;
  st.className = `state ${detail.state}`;
  $("detail-sink").textContent = `${detail.upstream_uri} → ${detail.sink_uri}`;
  renderProblem(detail);
  renderActions(detail);
  drawChart($("chart-lag"), history.items, (p) => p.lag_s, "#d97706", "s");
  drawChart($("chart-rate"), history.items, (p) => p.rows_per_sec, "#2563eb", "");
  renderSnapshot(snap);
}

async function act(verb) {
  const sel = state.selected;
  if (!sel) return;
  if (verb === "remove" && !confirm(`Remove changefeed ${sel.id}? Its checkpoint is kept only as a tombstone.`)) return;
  const status = $("action-status");
  status.textContent = `${verb}…`;
  try {
    if (verb === "remove") await api(cfPath(sel), { method: "DELETE" });
    else await api(cfPath(sel, "/" + verb), { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
    // a remove answers once no server runs the changefeed; pause and resume take effect on the owner's next tick
    status.textContent = verb === "remove" ? "removed" : `${verb} requested`;
    if (verb === "remove") { state.selected = null; location.hash = ""; }
    await refresh();
  } catch (err) {
    if (err instanceof AuthRequired) return showLogin();
    status.textContent = `${verb} refused: ${err.code ? "[" + err.code + "] " : ""}${err.message}`;
  }
}

// ------------------------------------------------------------------ refresh loop and sign-in

async function refresh() {
  try {
    const list = await api("/changefeeds");
    state.changefeeds = list.items;
    if (!state.selected) state.selected = selectionFromHash();
    if (state.selected && !list.items.some((c) => c.id === state.selected.id && c.namespace === state.selected.namespace)) {
      state.selected = null;
    }
    if (!state.selected && list.items.length) state.selected = { namespace: list.items[0].namespace, id: list.items[0].id };
    renderList();
    await refreshDetail();
    $("refreshed").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (err) {
    if (err instanceof AuthRequired) return showLogin();
    $("refreshed").textContent = "refresh failed: " + err.message;
  }
}

function showLogin(message) {
  clearInterval(state.timer);
  $("main").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || (state.token ? "That token was refused." : "");
  $("token").focus();
}

async function start() {
  try {
    const status = await api("/status");
    $("server-info").textContent = `server ${status.id.slice(0, 8)} · ${status.address} · v${status.version}`;
  } catch (err) {
    if (err instanceof AuthRequired) return showLogin();
    $("server-info").textContent = "server unreachable: " + err.message;
  }
  $("login").hidden = true;
  $("main").hidden = false;
  await refresh();
  clearInterval(state.timer);
  state.timer = setInterval(refresh, REFRESH_MS);
}

$("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.token = $("token").value.trim();
  sessionStorage.setItem(TOKEN_KEY, state.token);
  start();
});
$("btn-pause").addEventListener("click", () => act("pause"));
$("btn-resume").addEventListener("click", () => act("resume"));
$("btn-remove").addEventListener("click", () => act("remove"));

start();
