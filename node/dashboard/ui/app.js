// meshllm dashboard: renders the events of /ui/events (see node/dashboard*.go).
// Plain JavaScript, no build step, no libraries. Everything that comes from
// the network is inserted as text (textContent), never as HTML.
"use strict";

const MAX_DECISIONS = 200; // feed entries kept
const MAX_SAMPLES = 600;   // chart points kept
const CHART_POINTS = 180;  // chart points drawn at most
const CHART_MIN = 30;      // a short history is drawn over at least this many points
const HIT_WINDOW = 10;     // samples the hit rate is averaged over
const SHARE_WINDOW = 30;   // samples the traffic share is computed over
const SVG = "http://www.w3.org/2000/svg";

const state = { self: "", status: null, hot: [], decisions: [], samples: [], seen: 0, interval: 1000, pulses: new Map() };

// ---- helpers ---------------------------------------------------------------

function $(id) { return document.getElementById(id); }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// short shortens a peer ID: libp2p IDs share their first characters.
function short(id) { return id && id.length > 10 ? "…" + id.slice(-6) : id || ""; }

function fmtMs(v) {
  if (v === undefined || v === null) return "–";
  if (v >= 1000) return (v / 1000).toFixed(2) + " s";
  if (v >= 10) return v.toFixed(0) + " ms";
  return v.toFixed(1) + " ms";
}

function clock(t) { return new Date(t).toTimeString().slice(0, 8); }

// peerColor gives each peer a stable colour; this peer is always blue.
const PALETTE = ["#3ecf8e", "#f5b941", "#c78bff", "#ff7f6e", "#5fd4e8", "#e8e15f", "#ff8fd0", "#9ad36a"];
function peerColor(id) {
  if (id === state.self) return "#4da3ff";
  let h = 0;
  for (const c of id) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return PALETTE[h % PALETTE.length];
}

// peerState classifies a peer for colours and the state column.
function peerState(p) {
  if (p.cooldown_until && new Date(p.cooldown_until) > Date.now()) return ["cool", "cooling down (" + (p.cooldown_reason || "?") + ")"];
  if (p.load && p.load.push_back) return ["push", "push-back"];
  if (p.load && p.load.queue_depth > 0) return ["busy", "queue " + p.load.queue_depth];
  if (!p.load) return ["cool", "no load heard"];
  if (p.trust !== undefined && p.trust < 0.5) return ["busy", "distrusted (" + p.trust.toFixed(2) + ")"];
  return ["ok", "ok"];
}

// servedCounts sums the traffic share over the last n samples.
function servedCounts(n) {
  const out = new Map();
  for (const s of state.samples.slice(-n)) {
    for (const [id, c] of Object.entries(s.served || {})) out.set(id, (out.get(id) || 0) + c);
  }
  return out;
}

// ---- mesh picture ------------------------------------------------------------

function drawMesh() {
  const root = $("mesh");
  root.replaceChildren();
  const st = state.status;
  if (!st) return;
  const W = 520, H = 360, cx = W / 2, cy = H / 2, R = 130;
  const peers = st.peers || [];
  const share = servedCounts(SHARE_WINDOW);
  let total = 0;
  for (const c of share.values()) total += c;
  // Peers on an ellipse around this peer; one peer sits to the right, two
  // left and right, more spread from the top.
  const n = peers.length;
  const pos = peers.map((p, i) => {
    const a = n <= 2 ? Math.PI * i : -Math.PI / 2 + (2 * Math.PI * i) / n;
    return [cx + R * 1.4 * Math.cos(a), cy - 10 + R * 0.95 * Math.sin(a)];
  });
  const links = svg("g");
  const nodes = svg("g");
  peers.forEach((p, i) => {
    const [x, y] = pos[i];
    const w = total > 0 ? 2 + 10 * ((share.get(p.peer) || 0) / total) : 2;
    const cls = "link" + (p.rtt_ms === undefined ? " nortt" : "") + (state.pulses.get(p.peer) > Date.now() ? " pulse" : "");
    links.append(svg("line", { x1: cx, y1: cy - 10, x2: x, y2: y, class: cls, "stroke-width": w.toFixed(1), "data-peer": p.peer }));
    const mx = (cx + x) / 2, my = (cy - 10 + y) / 2;
    links.append(svg("text", { x: mx, y: my - 6, class: "rtt" }, p.rtt_ms === undefined ? "RTT ?" : fmtMs(p.rtt_ms) + (p.relayed ? " (relay)" : "")));
    const [kind] = peerState(p);
    nodes.append(peerNode(x, y, p.peer, kind, p.load, p.digest_blocks + " blocks", p.peer));
  });
  const l = st.local || {};
  const selfLoad = { active: l.active, slots: l.slots, queue_depth: l.queue_depth };
  nodes.append(peerNode(cx, cy - 10, state.self, "self", selfLoad, "this peer", state.self));
  root.append(links, nodes);
}

function peerNode(x, y, id, kind, load, sub, dataPeer) {
  const g = svg("g", { class: "node " + kind, transform: `translate(${x.toFixed(1)},${y.toFixed(1)})`, "data-peer": dataPeer });
  g.append(svg("circle", { r: 30, class: "body" }));
  g.append(svg("text", { y: -4, class: "name" }, short(id)));
  const slots = load && load.slots ? load.slots : 0;
  const used = load ? (load.active || 0) + (load.queue_depth || 0) : 0;
  g.append(svg("rect", { x: -18, y: 6, width: 36, height: 6, rx: 3, class: "loadbar-bg" }));
  if (slots > 0) {
    g.append(svg("rect", { x: -18, y: 6, width: (36 * Math.min(used / slots, 1)).toFixed(1), height: 6, rx: 3, class: "loadbar" }));
  }
  const q = load && load.queue_depth ? ` · q${load.queue_depth}` : "";
  g.append(svg("text", { y: 46, class: "sub" }, `${load && load.active || 0}/${slots} slots${q}`));
  g.append(svg("text", { y: 60, class: "sub" }, sub));
  const title = svg("title", {}, id);
  g.append(title);
  return g;
}

// ---- peers table and local cache --------------------------------------------

function drawPeers() {
  const st = state.status;
  const body = $("peers").tBodies[0];
  body.replaceChildren();
  if (!st) return;
  const share = servedCounts(state.samples.length);
  const l = st.local || {};
  body.append(peerRow(state.self, "self", "–", l.active || 0, l.slots || 0, l.queue_depth || 0, ["ok", "this peer"], "exact", share));
  for (const p of st.peers || []) {
    const load = p.load || {};
    const cache = p.digest_blocks + (p.digest_bloom ? " (bloom)" : "") + (p.needs_snapshot ? " · resyncing" : "");
    body.append(peerRow(p.peer, "", fmtMs(p.rtt_ms), load.active || 0, load.slots || 0, load.queue_depth || 0, peerState(p), cache, share));
  }
  $("model").textContent = st.model || "–";
  $("self").textContent = state.self;
  $("self").title = state.self;
  $("peer-count").textContent = (st.peers || []).length;

  const loc = $("local");
  loc.replaceChildren();
  const parts = [["slots", `${l.active || 0}/${l.slots || 0} busy`], ["queue", l.queue_depth || 0],
    ["prefill", (l.prefill_tok_per_sec || 0).toFixed(0) + " tok/s"], ["decode", (l.decode_tok_per_sec || 0).toFixed(0) + " tok/s"]];
  parts.forEach(([k, v], i) => {
    if (i) loc.append(" · ");
    loc.append(k + " ", el("b", "", String(v)));
  });
  const hot = $("hot");
  hot.replaceChildren();
  for (const h of state.hot || []) {
    const li = el("li");
    const more = (h.sequences > 1 ? ` · ${h.sequences} prompts` : "") + (h.slots > 1 ? ` · ${h.slots} slots` : "");
    li.append(el("span", "label", h.label), el("span", "n", `up to ${h.tokens} tokens` + more));
    hot.append(li);
  }
  if (!(state.hot || []).length) hot.append(el("li", "empty", "no cached prefixes reported"));
}

function peerRow(id, cls, rtt, active, slots, queue, [kind, label], cache, share) {
  const tr = el("tr", cls);
  tr.dataset.peer = id;
  const name = el("td", "peer", short(id) + (cls === "self" ? " (this peer)" : ""));
  name.title = id;
  const load = el("td");
  const bar = el("span", "bar");
  const fill = el("i");
  fill.style.width = slots ? Math.min(100, (100 * (active + queue)) / slots).toFixed(0) + "%" : "0%";
  bar.append(fill);
  load.append(bar, `${active}/${slots}` + (queue ? ` +${queue} queued` : ""));
  const stateTd = el("td");
  stateTd.append(el("span", "state " + kind, label));
  tr.append(name, el("td", "", rtt), load, stateTd, el("td", "", String(cache)), el("td", "", String(share.get(id) || 0)));
  return tr;
}

// ---- decision feed ----------------------------------------------------------

function addDecisions(list, fresh) {
  for (const d of list) {
    state.decisions.push(d);
    state.seen++;
    if (fresh && d.served_by) state.pulses.set(d.served_by, Date.now() + 1500);
  }
  if (state.decisions.length > MAX_DECISIONS) state.decisions.splice(0, state.decisions.length - MAX_DECISIONS);
  const ol = $("decisions");
  for (const d of list) {
    const li = el("li", "decision kind-" + d.kind + (fresh ? " new" : ""));
    li.dataset.kind = d.kind;
    if (d.served_by) li.dataset.servedBy = d.served_by;
    const t = el("time", "", clock(d.time));
    t.dateTime = d.time;
    const text = el("div");
    text.append(el("div", "summary", d.summary));
    text.append(el("div", "meta", `${d.prompt_tokens} prompt tokens · ${d.realized_cached} cached · took ${fmtMs(d.duration_ms)}`));
    li.append(t, el("span", "kind", d.kind), text);
    ol.prepend(li);
  }
  while (ol.children.length > MAX_DECISIONS) ol.lastChild.remove();
  $("no-decisions").hidden = state.decisions.length > 0;
  $("req-total").textContent = state.seen;
}

// ---- charts ---------------------------------------------------------------------

// canvasCtx sizes a canvas for the device's pixel ratio.
function canvasCtx(id) {
  const c = $(id);
  const r = window.devicePixelRatio || 1;
  const w = c.clientWidth || 300, h = c.clientHeight || 130;
  if (c.width !== Math.round(w * r) || c.height !== Math.round(h * r)) {
    c.width = Math.round(w * r);
    c.height = Math.round(h * r);
  }
  const ctx = c.getContext("2d");
  ctx.setTransform(r, 0, 0, r, 0, 0);
  ctx.clearRect(0, 0, w, h);
  return [ctx, w, h];
}

const PAD = { l: 34, r: 6, t: 8, b: 16 };

// frame draws the axes' labels and returns a mapper from (index, value).
function frame(ctx, w, h, n, maxV, unit) {
  ctx.strokeStyle = "#263240";
  ctx.fillStyle = "#8494a6";
  ctx.font = "10px system-ui, sans-serif";
  ctx.lineWidth = 1;
  for (const f of [0, 0.5, 1]) {
    const y = PAD.t + (h - PAD.t - PAD.b) * (1 - f);
    ctx.beginPath();
    ctx.moveTo(PAD.l, y);
    ctx.lineTo(w - PAD.r, y);
    ctx.stroke();
    const v = maxV * f;
    ctx.fillText((v >= 100 ? v.toFixed(0) : v.toFixed(v >= 10 ? 0 : 1)) + unit, 2, y + 3);
  }
  const secs = Math.round((n * state.interval) / 1000);
  ctx.fillText(`last ${secs} s`, PAD.l, h - 3);
  const iw = (w - PAD.l - PAD.r) / Math.max(n, 1);
  return {
    x: (i) => PAD.l + i * iw,
    y: (v) => PAD.t + (h - PAD.t - PAD.b) * (1 - Math.min(v / maxV, 1)),
    iw,
  };
}

// span is how many points the charts' x axes cover: the history the page
// holds, within [CHART_MIN, CHART_POINTS].
function span() { return Math.max(CHART_MIN, Math.min(CHART_POINTS, state.samples.length)); }

function drawRequests() {
  const [ctx, w, h] = canvasCtx("chart-req");
  const N = span();
  const s = state.samples.slice(-N);
  const maxV = Math.max(1, ...s.map((p) => p.requests));
  const m = frame(ctx, w, h, N, maxV, "");
  s.forEach((p, i) => {
    const local = p.requests - p.forwarded - p.fallbacks - p.failed;
    let base = 0;
    for (const [v, color] of [[local, "#4da3ff"], [p.forwarded, "#3ecf8e"], [p.fallbacks, "#f5b941"], [p.failed, "#ff5d5d"]]) {
      if (v <= 0) continue;
      ctx.fillStyle = color;
      const y0 = m.y(base), y1 = m.y(base + v);
      ctx.fillRect(m.x(i + N - s.length), y1, Math.max(m.iw - 1, 1), y0 - y1);
      base += v;
    }
  });
}

// drawLine plots values (null: no point) as a line with dots.
function drawLine(id, values, unit, color, fixedMax) {
  const [ctx, w, h] = canvasCtx(id);
  const N = span();
  const v = values.slice(-N);
  const maxV = fixedMax || Math.max(1, ...v.filter((x) => x !== null)) * 1.15;
  const m = frame(ctx, w, h, N, maxV, unit);
  const off = N - v.length;
  ctx.strokeStyle = color;
  ctx.fillStyle = color;
  ctx.lineWidth = 2;
  ctx.beginPath();
  let pen = false;
  v.forEach((x, i) => {
    if (x === null) { pen = false; return; }
    const px = m.x(i + off) + m.iw / 2, py = m.y(x);
    if (pen) ctx.lineTo(px, py); else ctx.moveTo(px, py);
    pen = true;
  });
  ctx.stroke();
  v.forEach((x, i) => {
    if (x !== null) ctx.fillRect(m.x(i + off) + m.iw / 2 - 1.5, m.y(x) - 1.5, 3, 3);
  });
}

function drawHitRate() {
  const s = state.samples;
  const vals = s.map((_, i) => {
    let p = 0, c = 0;
    for (const x of s.slice(Math.max(0, i - HIT_WINDOW + 1), i + 1)) { p += x.prompt_tokens; c += x.cached_tokens; }
    return p > 0 ? (100 * c) / p : null;
  });
  drawLine("chart-hit", vals, "%", "#5fd4e8", 100);
}

function drawShare() {
  const [ctx, w, h] = canvasCtx("chart-share");
  const N = span();
  const s = state.samples.slice(-(N + SHARE_WINDOW));
  const ids = new Set();
  for (const p of s) for (const id of Object.keys(p.served || {})) ids.add(id);
  const order = [...ids].sort((a, b) => (a === state.self ? -1 : b === state.self ? 1 : a < b ? -1 : 1));
  const n = Math.min(N, s.length);
  const m = frame(ctx, w, h, N, 100, "%");
  const off = N - n;
  for (let i = 0; i < n; i++) {
    const end = s.length - n + i;
    const win = s.slice(Math.max(0, end - SHARE_WINDOW + 1), end + 1);
    const counts = new Map();
    let total = 0;
    for (const p of win) for (const [id, c] of Object.entries(p.served || {})) { counts.set(id, (counts.get(id) || 0) + c); total += c; }
    if (!total) continue;
    let base = 0;
    for (const id of order) {
      const v = (100 * (counts.get(id) || 0)) / total;
      if (v <= 0) continue;
      ctx.fillStyle = peerColor(id);
      const y0 = m.y(base), y1 = m.y(base + v);
      ctx.fillRect(m.x(i + off), y1, Math.max(m.iw, 1), y0 - y1);
      base += v;
    }
  }
  const key = $("share-key");
  key.replaceChildren();
  for (const id of order) {
    const i = el("i");
    i.style.background = peerColor(id);
    key.append(i, id === state.self ? "this peer" : short(id));
  }
}

function drawCharts() {
  drawRequests();
  drawLine("chart-ttft", state.samples.map((s) => (s.ttft_ms === undefined ? null : s.ttft_ms)), "", "#f5b941");
  drawHitRate();
  drawShare();
}

// ---- events -------------------------------------------------------------------

function apply(ev, snapshot) {
  state.self = ev.self;
  state.status = ev.status;
  state.hot = ev.hot_prefixes || [];
  state.interval = ev.interval_ms || 1000;
  if (snapshot) {
    state.decisions = [];
    state.samples = [];
    state.seen = 0;
    $("decisions").replaceChildren();
  }
  state.samples.push(...(ev.samples || []));
  if (state.samples.length > MAX_SAMPLES) state.samples.splice(0, state.samples.length - MAX_SAMPLES);
  addDecisions(ev.decisions || [], !snapshot);
  render();
  document.body.dataset.seq = ev.seq; // the last event drawn (tests wait on it)
}

function render() {
  drawMesh();
  drawPeers();
  drawCharts();
}

function connect() {
  const conn = $("conn");
  const es = new EventSource("/ui/events");
  es.addEventListener("snapshot", (e) => {
    conn.dataset.state = "live";
    conn.textContent = "live";
    apply(JSON.parse(e.data), true);
  });
  es.addEventListener("tick", (e) => apply(JSON.parse(e.data), false));
  es.onerror = () => {
    conn.dataset.state = "lost";
    conn.textContent = "reconnecting…";
  };
}

window.addEventListener("resize", () => state.status && drawCharts());
connect();
