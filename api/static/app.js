"use strict";
// The page talks to the service only: GET /examples, /targets and /openapi.json fill the
// controls, POST /plan plans, POST /emit/{kind} writes the downloads. The memory map is drawn
// here, from the request and its plan.

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
let current = null; // {request, plan, planText, rows, model}
let attempt = 0; // the latest Plan click; an older answer arriving late is dropped
let sort = { key: null, dir: 1 };
let view = null; // program points across the map: {x0, x1}
let drawn = null; // the map as drawn: {svg, geo, byId: Map(id -> [element]), crosshair}
let cursor = null; // the program point under the crosshair, or null
const rowsById = new Map(); // id -> <tr> of the placements table

function setState(state, text) {
  document.body.dataset.state = state;
  $("status").textContent = text || "";
}

// --- bytes and errors ---------------------------------------------------------------------

// "64 KiB", "1.5 KiB", "512 B": the map's ticks and notes.
function kib(bytes) {
  if (Math.abs(bytes) < 1024) return `${bytes} B`;
  const k = bytes / 1024;
  return `${Number.isInteger(k) ? k : +k.toFixed(2)} KiB`;
}

// "65536 B (64 KiB)": the statistics, exact first.
function bytesText(bytes) {
  return Math.abs(bytes) < 1024 ? `${bytes} B` : `${bytes} B (${kib(bytes)})`;
}

function showErrors(detail) {
  const list = $("errors");
  list.replaceChildren();
  for (const err of detail) {
    const li = document.createElement("li");
    const loc = (err.loc || []).filter((p) => p !== "body").join(".");
    li.textContent = (loc ? loc + ": " : "") + (err.msg || "invalid");
    list.append(li);
  }
}

function showNotice(text) {
  $("errors").replaceChildren(Object.assign(document.createElement("li"), { className: "notice", textContent: text }));
}

// The service's words for a syntax error: "malformed JSON: <what> at line L column C".
function syntaxError(text, error) {
  const message = String(error.message).replace(/\s*\(line \d+ column \d+\)/, "");
  const at = /at position (\d+)/.exec(message);
  const what = message.replace(/\s*in JSON at position \d+/, "").replace(/^JSON\.parse: /, "");
  if (!at) return { msg: `malformed JSON: ${what}`, position: null };
  const position = +at[1];
  const before = text.slice(0, position).split("\n");
  return {
    msg: `malformed JSON: ${what} at line ${before.length} column ${before[before.length - 1].length + 1}`,
    position,
  };
}

// Put the caret where a "line L column C" message points.
function caretTo(msg) {
  const m = /line (\d+) column (\d+)/.exec(msg || "");
  if (!m) return;
  const lines = $("request").value.split("\n");
  let position = 0;
  for (let k = 0; k < +m[1] - 1 && k < lines.length; k++) position += lines[k].length + 1;
  position += +m[2] - 1;
  $("request").setSelectionRange(position, position);
}

// Whatever was shown belongs to an earlier request: take it all away.
function clearPlan() {
  current = null;
  view = null;
  drawn = null;
  cursor = null;
  $("result").hidden = true;
  for (const id of ["map", "stats", "diagnostics", "count", "legend", "peak-list", "point-list", "readout"]) $(id).replaceChildren();
  $("placements").tBodies[0].replaceChildren();
  rowsById.clear();
}

async function failure(response) {
  let detail = [{ loc: [], msg: `${response.status} ${response.statusText}` }];
  try {
    const body = await response.json();
    if (Array.isArray(body.detail)) detail = body.detail;
  } catch (_) { /* not JSON: keep the status line */ }
  return detail;
}

async function emit(kind, shown) {
  const response = await fetch(`/emit/${kind}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ request: shown.request, plan: shown.plan }),
  });
  if (!response.ok) throw await failure(response);
  return response.text();
}

// --- what the map shows, computed once per plan ----------------------------------------------

// Buffers with their live ranges and their barrier-extended ("held") ends; the live and held
// bytes as step curves; the peak of held bytes and where it is reached.
function buildModel(request, plan) {
  const declared = new Map();
  for (const b of request.buffers || []) declared.set(String(b.id), b);
  const options = request.options || {};
  const sync = options.sync || "insert";
  const barriers = [...new Set([...plan.barriers.existing, ...plan.barriers.inserted, ...plan.barriers.required])].sort((a, b) => a - b);
  let horizon = 1;
  const buffers = plan.placements.map((p, k) => {
    const b = declared.get(p.id) || {};
    const ranges = (b.ranges || [[b.start, b.end]]).map(([s, e]) => [s, e]);
    for (const [, e] of ranges) horizon = Math.max(horizon, e);
    return { k, id: p.id, offset: p.offset, size: p.size, memory: p.memory, ranges, accesses: b.accesses || [] };
  });
  for (const p of barriers) horizon = Math.max(horizon, p);
  for (const loop of request.loops || []) horizon = Math.max(horizon, loop.end);
  const firstStart = new Map(buffers.map((b) => [b.id, Math.min(...b.ranges.map((r) => r[0]))]));
  const aliasLater = new Map((plan.aliases || []).map(([a, b]) => [a, b]));
  // Held: occupied until the first barrier after the last access (docs/design.md,
  // Barrier-extended lifetimes); with no barrier after it, to the end, unless the caller
  // synchronizes (sync "none"); a thread-local alias lets its partner in at its start.
  for (const b of buffers) {
    b.held = b.ranges.map(([s, e], i) => {
      const inside = b.accesses.filter((a) => a.at >= s && a.at < e).map((a) => a.at);
      const last = inside.length ? Math.max(...inside) : e - 1;
      const next = barriers.find((p) => p > last);
      let until = next === undefined ? (sync === "none" ? e : horizon) : Math.max(e, next);
      if (i + 1 < b.ranges.length) until = Math.min(until, b.ranges[i + 1][0]);
      if (aliasLater.has(b.id) && firstStart.has(aliasLater.get(b.id))) until = Math.min(until, firstStart.get(aliasLater.get(b.id)));
      return Math.max(until, e);
    });
  }
  const shared = buffers.filter((b) => b.memory === "shared");
  const live = curve(shared, false, horizon);
  const held = curve(shared, true, horizon);
  const peak = Math.max(0, ...held.map((s) => s[1]));
  const peakSpans = [];
  for (let i = 0; i < held.length; i++) {
    const end = i + 1 < held.length ? held[i + 1][0] : horizon;
    if (held[i][1] !== peak || peak === 0 || end <= held[i][0]) continue;
    const last = peakSpans[peakSpans.length - 1];
    if (last && last[1] === held[i][0]) last[1] = end; // one span across a step of no change
    else peakSpans.push([held[i][0], end]);
  }
  const arenaTop = Math.max(0, ...shared.map((b) => b.offset + b.size));
  const kinds = { existing: new Set(plan.barriers.existing), inserted: new Set(plan.barriers.inserted), required: new Set(plan.barriers.required) };
  return { buffers, shared, horizon, barriers, ...kinds, live, held, peak, peakSpans, arenaTop, sync };
}

// [[point, bytes from it on], ...] at every point where the bytes change.
function curve(buffers, held, horizon) {
  const delta = new Map();
  const add = (p, v) => delta.set(p, (delta.get(p) || 0) + v);
  for (const b of buffers) {
    b.ranges.forEach(([s, e], i) => {
      add(s, b.size);
      add(Math.min(held ? b.held[i] : e, horizon), -b.size);
    });
  }
  const out = [];
  let total = 0;
  for (const p of [...delta.keys()].sort((a, b) => a - b)) {
    total += delta.get(p);
    out.push([p, total]);
  }
  return out;
}

function valueAt(steps, point) {
  let value = 0;
  for (const [p, v] of steps) {
    if (p > point) break;
    value = v;
  }
  return value;
}

// The buffers holding bytes at `point`, largest first; `held` marks those past their end.
function buffersAt(model, point) {
  const out = [];
  for (const b of model.shared) {
    b.ranges.forEach(([s, e], i) => {
      if (s <= point && point < b.held[i]) out.push({ b, held: point >= e, until: b.held[i] });
    });
  }
  out.sort((x, y) => y.b.size - x.b.size || x.b.k - y.b.k);
  return out;
}

// --- statistics and diagnostics --------------------------------------------------------------

function row(name, value) {
  const tr = document.createElement("tr");
  for (const text of [name, value]) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  }
  return tr;
}

const fits = (plan) => plan.status === "optimal" || plan.status === "feasible";

function showStats(plan) {
  const launch = plan.launch;
  // A plan over capacity cannot launch: its opt-in and occupancy figures describe nothing.
  const launchable = fits(plan);
  $("stats").replaceChildren(
    row("status", plan.status),
    row("arena", bytesText(plan.arena_bytes)),
    row("lower bound", bytesText(plan.lower_bound)),
    row("naive sum", bytesText(plan.naive_bytes)),
    row("capacity", plan.capacity === null ? "none" : bytesText(plan.capacity)),
    row("gap", `${(plan.solver.gap * 100).toFixed(2)} %`),
    row("solver", plan.solver.name),
    row("buffers", String(plan.placements.length)),
    row("barriers", `existing ${plan.barriers.existing.length}, inserted ${plan.barriers.inserted.length}, required ${plan.barriers.required.length}`),
    row("blocks per SM", !launchable ? "none: the plan does not fit" : launch.blocks_per_sm === null ? "no target" : `${launch.blocks_per_sm} (naive ${launch.naive_blocks_per_sm})`),
    row("opt-in needed", !launchable ? "no launch: the plan does not fit" : launch.requires_opt_in ? "yes" : "no"),
    row("spilled", plan.spilled.length ? `${plan.spilled.length} buffer${plan.spilled.length === 1 ? "" : "s"}, ${plan.global_bytes} B global workspace` : "none"),
  );
  const notes = $("diagnostics");
  notes.replaceChildren();
  for (const d of plan.diagnostics) {
    const li = document.createElement("li");
    li.className = d.level;
    li.textContent = `${d.level} ${d.code}: ${d.message}`;
    notes.append(li);
  }
  if (plan.certificate) {
    const c = plan.certificate;
    const li = document.createElement("li");
    li.className = "error";
    li.textContent = `certificate (${c.reason}): ${c.live_bytes} B live${c.point === null ? "" : " at point " + c.point} over the capacity of ${c.capacity} B: ${c.buffers.join(", ")}`;
    notes.append(li);
  }
  if (!plan.diagnostics.length && !plan.certificate) notes.append(Object.assign(document.createElement("li"), { textContent: "none" }));
}

// --- placements table -------------------------------------------------------------------

function placementRows(model) {
  return model.buffers.map((b) => ({
    order: b.k, id: b.id, offset: b.offset, size: b.size, memory: b.memory,
    start: b.ranges[0][0], end: b.ranges[0][1],
    live: b.ranges.map(([s, e]) => `[${s}, ${e})`).join(", "),
  }));
}

const byId = new Intl.Collator(undefined, { numeric: true });
const COMPARE = {
  id: (a, b) => byId.compare(a.id, b.id),
  offset: (a, b) => a.offset - b.offset,
  size: (a, b) => a.size - b.size,
  memory: (a, b) => a.memory.localeCompare(b.memory),
  live: (a, b) => a.start - b.start || a.end - b.end,
};

function renderTable() {
  const rows = current.rows.slice();
  if (sort.key) rows.sort((a, b) => sort.dir * COMPARE[sort.key](a, b) || a.order - b.order);
  rowsById.clear();
  const body = $("placements").tBodies[0];
  body.replaceChildren(...rows.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.id = r.id;
    rowsById.set(r.id, tr);
    idOf.set(tr, r.id);
    if (r.memory !== "shared") tr.className = r.memory;
    for (const [text, num] of [[r.id, false], [r.offset, true], [r.size, true], [r.memory, false], [r.live, true]]) {
      const td = document.createElement("td");
      td.textContent = String(text);
      if (num) td.className = "num";
      tr.append(td);
    }
    return tr;
  }));
  for (const th of $("placements").tHead.rows[0].cells) {
    const on = th.dataset.key === sort.key;
    th.setAttribute("aria-sort", on ? (sort.dir > 0 ? "ascending" : "descending") : "none");
  }
}

$("placements").tHead.addEventListener("click", (event) => {
  const th = event.target.closest("th");
  if (!th || !current) return;
  sort = { key: th.dataset.key, dir: sort.key === th.dataset.key ? -sort.dir : 1 };
  renderTable();
});

// Ids are free text: elements are found through maps, never through a selector built from one.
function highlight(id) {
  for (const el of document.querySelectorAll(".hl")) el.classList.remove("hl");
  if (id === null || id === undefined) return null;
  for (const el of (drawn && drawn.byId.get(id)) || []) el.classList.add("hl");
  const tr = rowsById.get(id) || null;
  if (tr) tr.classList.add("hl");
  return tr;
}

const idOf = new WeakMap(); // element of the map or a list -> buffer id
// Element of the map -> its tooltip, shown as the map's title while the pointer is on it (a
// <title> in each of thousands of elements would cost seconds of layout).
const tips = new WeakMap();

function hovered(event) {
  const el = event.target.closest("tr, li");
  return el ? idOf.get(el) : undefined;
}

for (const list of [$("placements").tBodies[0], $("peak-list"), $("point-list")]) {
  list.addEventListener("mouseover", (event) => {
    const id = hovered(event);
    if (id !== undefined) highlight(id);
  });
  list.addEventListener("mouseleave", () => highlight(null));
  list.addEventListener("click", (event) => {
    const id = hovered(event);
    if (id !== undefined) showBuffer(id);
  });
}

// Centre the map on one buffer's widest range, wide enough on screen to carry its name.
function showBuffer(id) {
  const b = current && current.model.buffers.find((x) => x.id === id);
  if (!b) return;
  const [s, e] = b.ranges.reduce((w, r) => (r[1] - r[0] > w[1] - w[0] ? r : w));
  const g = drawn.geo;
  measure.font = "11px sans-serif";
  const wanted = (measure.measureText(id).width + 24) / g.pw; // of the plot's width
  const span = Math.max((e - s) / Math.max(wanted, 0.25), MIN_SPAN);
  const mid = (s + e) / 2;
  setView(mid - span / 2, mid + span / 2);
  highlight(id);
  setCursor(s);
}

// --- the map ---------------------------------------------------------------------------------

const MIN_SPAN = 2; // program points across the map at the closest zoom
const MARGIN = { left: 72, right: 132, top: 40, bottom: 46 }; // px around the plot
const PLOT_HEIGHT = 420; // px
const LANE = { top: 8, bottom: 26 }; // px: the barrier lane above the plot
const DENSE = 40; // more required barriers in view than this: the lane only, no lines
const NOTE_LINE = 12; // px per line of a margin note
const measure = document.createElement("canvas").getContext("2d");

function el(name, attrs, text) {
  const e = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

const r2 = (v) => Math.round(v * 100) / 100;

// A power of two bytes that cuts `top` into at most 8 steps.
function byteStep(top) {
  let step = 1;
  while (top / step > 8) step *= 2;
  return step;
}

// A 1, 2 or 5 times a power of ten step (at least 1) for about `count` ticks over `span`.
function pointStep(span, count) {
  const raw = Math.max(span / Math.max(count, 1), 1);
  const power = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 5, 10]) if (m * power >= raw) return m * power;
  return 10 * power;
}

function barrierKind(model, p) {
  if (model.inserted.has(p)) return "inserted";
  if (model.existing.has(p)) return model.required.has(p) ? "required" : "unused";
  return "caller";
}

const BARRIER_TEXT = {
  required: "existing barrier the plan relies on",
  unused: "existing barrier the plan does not need",
  inserted: "barrier inserted by the plan",
  caller: "barrier the caller must add",
};

// Show points [x0, x1), kept inside the kernel and no closer than MIN_SPAN; `soon` redraws at
// the next frame, once however many wheel or drag events come before it.
let redraw = false;
function setView(x0, x1, soon) {
  const horizon = current.model.horizon;
  const span = Math.min(Math.max(x1 - x0, Math.min(MIN_SPAN, horizon)), horizon);
  x0 = Math.min(Math.max(x0, 0), horizon - span);
  view = { x0, x1: x0 + span };
  $("zoom-level").textContent = `${Math.round((horizon / span) * 100)} %`;
  if (!soon) return render();
  if (redraw) return;
  redraw = true;
  requestAnimationFrame(() => {
    redraw = false;
    if (current) render();
  });
}

// The whole map, drawn again on every change of view: axes, ticks and labels stay on screen.
function render() {
  const { plan, model } = current;
  const box = $("map");
  const width = Math.max(box.clientWidth, 560);
  const height = MARGIN.top + PLOT_HEIGHT + MARGIN.bottom;
  const pl = MARGIN.left, pt = MARGIN.top, pw = width - MARGIN.left - MARGIN.right, ph = PLOT_HEIGHT;
  const cert = plan.certificate;
  const fitsPlan = fits(plan);
  const top = Math.max(1, plan.arena_bytes, plan.lower_bound, model.peak, model.arenaTop, cert ? cert.live_bytes : 0);
  const step = byteStep(top * 1.04);
  const ymax = Math.ceil((top * 1.04) / step) * step;
  const { x0, x1 } = view;
  const px = (p) => pl + ((p - x0) * pw) / (x1 - x0);
  const cx = (p) => Math.min(Math.max(px(p), pl), pl + pw); // clamped to the plot
  const py = (v) => pt + ph - (v * ph) / ymax;
  const geo = { pl, pt, pw, ph, px, py, ymax, x0, x1 };
  const byIdMap = new Map();
  const keep = (id, e) => {
    idOf.set(e, id);
    if (!byIdMap.has(id)) byIdMap.set(id, []);
    byIdMap.get(id).push(e);
  };
  const kinds = new Set(); // what the legend names
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "memory-map", "font-family": "sans-serif", "font-size": 11, "data-x0": r2(x0), "data-x1": r2(x1), "data-ymax": ymax });
  const defs = el("defs");
  const clip = el("clipPath", { id: "plot-clip" });
  clip.append(el("rect", { x: pl, y: pt, width: pw, height: ph }));
  const hatch = el("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
  hatch.append(el("rect", { width: 6, height: 6, fill: "#fff", "fill-opacity": 0.55 }), el("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: "#555", "stroke-width": 1.2, "stroke-opacity": 0.45 }));
  const over = el("pattern", { id: "over", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(-45)" });
  over.append(el("rect", { width: 8, height: 8, fill: "#e74c3c", "fill-opacity": 0.18 }), el("line", { x1: 0, y1: 0, x2: 0, y2: 8, stroke: "#c0392b", "stroke-width": 2, "stroke-opacity": 0.5 }));
  defs.append(clip, hatch, over);
  svg.append(defs, el("rect", { class: "plot", x: pl, y: pt, width: pw, height: ph, fill: "#fafafa", stroke: "#444" }));
  const plot = el("g", { "clip-path": "url(#plot-clip)" });

  // Address ticks in KiB, grid lines across.
  const yticks = el("g", { class: "yticks" });
  for (let v = 0; v <= ymax; v += step) {
    plot.append(el("line", { class: "grid", x1: pl, x2: pl + pw, y1: r2(py(v)), y2: r2(py(v)) }));
    yticks.append(el("text", { class: "tick", x: pl - 6, y: r2(py(v)), dy: "0.36em", "text-anchor": "end" }, kib(v)));
  }
  // Program-point ticks for the points in view.
  const xticks = el("g", { class: "xticks" });
  const xstep = pointStep(x1 - x0, pw / 70);
  for (let p = Math.ceil(x0 / xstep) * xstep; p <= x1 + 1e-9; p += xstep) {
    const x = r2(px(p));
    plot.append(el("line", { class: "grid", x1: x, x2: x, y1: pt, y2: pt + ph }));
    xticks.append(el("line", { class: "axis", x1: x, x2: x, y1: pt + ph, y2: pt + ph + 4 }));
    xticks.append(el("text", { class: "tick", x, y: pt + ph + 16, "text-anchor": "middle" }, String(p)));
  }

  // Loop bodies under everything else.
  for (const loop of current.request.loops || []) {
    if (loop.end <= x0 || loop.start >= x1) continue;
    const band = el("rect", { class: "loop", x: r2(cx(loop.start)), y: pt, width: r2(Math.max(cx(loop.end) - cx(loop.start), 0.5)), height: ph });
    band.append(el("title", {}, `loop body [${loop.start}, ${loop.end})${loop.trips ? ", " + loop.trips + " trips" : ""}`));
    plot.append(band);
    kinds.add("loop");
  }
  // The peak: the points where the held bytes reach their maximum.
  for (const [s, e] of model.peakSpans) {
    if (e <= x0 || s >= x1) continue;
    const x = r2(cx(s)), w = r2(Math.max(cx(e) - cx(s), 2));
    plot.append(el("rect", { class: "peak", "data-start": s, "data-end": e, x, y: pt, width: w, height: ph }), el("rect", { class: "peak-mark", x, y: pt, width: w, height: 5 }));
    kinds.add("peak");
  }
  // The certificate's point: where the named buffers cannot fit together.
  if (cert && cert.point !== null && cert.point + 1 > x0 && cert.point < x1) {
    const band = el("rect", { class: "certificate-point", "data-point": cert.point, x: r2(cx(cert.point)), y: pt, width: r2(Math.max(cx(cert.point + 1) - cx(cert.point), 3)), height: ph });
    band.append(el("title", {}, `certificate: ${cert.live_bytes} B live at point ${cert.point} over ${cert.capacity} B`));
    plot.append(band);
    kinds.add("certificate");
  }

  // Buffers: one rectangle per live range, its barrier-extended tail hatched beside it.
  const buffers = el("g", { class: "buffers" });
  const labels = [];
  measure.font = "11px sans-serif";
  const certified = new Set(cert ? cert.buffers : []);
  for (const b of model.shared) {
    const fill = `hsl(${((b.k * 137.508) % 360).toFixed(1)},60%,72%)`;
    const y0 = py(b.offset + b.size), y1 = py(b.offset);
    const h = Math.max(y1 - y0, 0.5);
    let widest = null;
    b.ranges.forEach(([s, e], i) => {
      const heldTo = b.held[i];
      if (heldTo > e && heldTo > x0 && e < x1) {
        const tail = el("rect", { class: "held", "data-id": b.id, x: r2(cx(e)), y: r2(y0), width: r2(Math.max(cx(heldTo) - cx(e), 0.5)), height: r2(h), fill });
        tips.set(tail, `${b.id}: held until the barrier at ${heldTo} (ends at ${e})`);
        const cover = el("rect", { class: "held-hatch", x: r2(cx(e)), y: r2(y0), width: r2(Math.max(cx(heldTo) - cx(e), 0.5)), height: r2(h), fill: "url(#hatch)" });
        buffers.append(tail, cover);
        keep(b.id, tail);
        idOf.set(cover, b.id);
        kinds.add("held");
      }
      if (e <= x0 || s >= x1) return;
      const rx0 = cx(s), rx1 = cx(e);
      const rect = el("rect", { class: "buffer" + (certified.has(b.id) ? " certificate" : ""), "data-id": b.id, "data-start": s, "data-end": e, x: r2(rx0), y: r2(y0), width: r2(Math.max(rx1 - rx0, 0.5)), height: r2(h), fill });
      tips.set(rect, `${b.id}: offset ${b.offset}, ${b.size} B (${kib(b.size)}), live [${s}, ${e})`);
      buffers.append(rect);
      keep(b.id, rect);
      if (!widest || rx1 - rx0 > widest[1] - widest[0]) widest = [rx0, rx1];
    });
    // The name goes inside its own rectangle (rectangles of a valid plan never overlap).
    if (widest && widest[1] - widest[0] >= measure.measureText(b.id).width + 6 && h >= 15) {
      labels.push(el("text", { class: "label", x: r2((widest[0] + widest[1]) / 2), y: r2(y0 + h / 2), dy: "0.36em", "text-anchor": "middle", "data-for": b.id }, b.id));
    }
  }
  kinds.add("buffer");
  plot.append(buffers);

  // Thread-local alias pairs: the earlier buffer's end linked to the later one's start.
  const byName = new Map(model.buffers.map((b) => [b.id, b]));
  for (const [a, later] of plan.aliases || []) {
    const ba = byName.get(a), bb = byName.get(later);
    if (!ba || !bb) continue;
    const ea = Math.max(...ba.ranges.map((r) => r[1])), sb = Math.min(...bb.ranges.map((r) => r[0]));
    const ya = py(ba.offset + ba.size / 2), yb = py(bb.offset + bb.size / 2);
    const xa = px(ea), xb = px(sb), bend = Math.max(Math.abs(xb - xa) / 2, 14);
    // Forwards, a low arc; across a loop's back edge (the later buffer starts first), a
    // high arc back over both.
    const lift = xb >= xa ? 18 : Math.min(60, (ya - pt) / 2 + 18);
    const d = xb >= xa
      ? `M${r2(xa - 16)},${r2(ya)} C${r2(xa + bend - 16)},${r2(ya - lift)} ${r2(xb - bend + 16)},${r2(yb - lift)} ${r2(xb + 16)},${r2(yb)}`
      : `M${r2(xa - 4)},${r2(ya)} C${r2(xa + 30)},${r2(ya - lift)} ${r2(xb - 30)},${r2(yb - lift)} ${r2(xb + 4)},${r2(yb)}`;
    const link = el("path", { class: "alias", "data-from": a, "data-to": later, d });
    link.append(el("title", {}, `${later} reuses ${a}'s bytes with no barrier: each shared byte stays with one thread`));
    const [ax, bx] = xb >= xa ? [xa - 16, xb + 16] : [xa - 4, xb + 4];
    plot.append(link, el("circle", { class: "alias-end", cx: r2(ax), cy: r2(ya), r: 3 }), el("circle", { class: "alias-end", cx: r2(bx), cy: r2(yb), r: 3 }));
    kinds.add("alias");
  }

  // Over capacity: the bytes no launch can have.
  if (plan.capacity !== null && plan.capacity < ymax && !fitsPlan) {
    plot.append(el("rect", { class: "over-capacity", x: pl, y: pt, width: pw, height: r2(py(plan.capacity) - pt), fill: "url(#over)" }));
    kinds.add("over-capacity");
  }

  // Live bytes, and held bytes where they differ.
  const path = (steps) => {
    const d = [`M${r2(px(0))},${r2(py(0))}`];
    for (const [p, v] of steps) d.push(`H${r2(px(p))}V${r2(py(v))}`);
    d.push(`H${r2(px(model.horizon))}`);
    return d.join("");
  };
  plot.append(el("path", { class: "live", d: path(model.live) }));
  kinds.add("live");
  if (JSON.stringify(model.live) !== JSON.stringify(model.held)) {
    plot.append(el("path", { class: "held-curve", d: path(model.held) }));
    kinds.add("held-curve");
  }

  // Barriers: marks in a lane above the plot, lines across it only where few are in view.
  const lane = el("g", { class: "lane" });
  const visible = model.barriers.filter((p) => p >= x0 && p <= x1);
  const required = visible.filter((p) => barrierKind(model, p) !== "unused");
  for (const p of visible) {
    const kind = barrierKind(model, p);
    const x = r2(px(p));
    const mark = el("line", { class: `barrier ${kind}`, "data-point": p, x1: x, x2: x, y1: kind === "unused" ? LANE.top + 8 : LANE.top, y2: LANE.bottom });
    tips.set(mark, `${BARRIER_TEXT[kind]}, at point ${p}`);
    lane.append(mark);
    kinds.add(`barrier-${kind}`);
    if (kind !== "unused" && required.length <= DENSE) {
      plot.append(el("line", { class: `barrier-line ${kind}`, "data-point": p, x1: x, x2: x, y1: pt, y2: pt + ph }));
    }
  }
  lane.append(el("text", { class: "tick", x: pl - 6, y: (LANE.top + LANE.bottom) / 2, dy: "0.36em", "text-anchor": "end" }, "barriers"));

  // Horizontal lines: the capacity, the lower bound.
  const hline = (value, cls) => plot.append(el("line", { class: cls, "data-bytes": value, x1: pl, x2: pl + pw, y1: r2(py(value)), y2: r2(py(value)) }));
  const notes = [];
  if (plan.capacity !== null && plan.capacity <= ymax) {
    hline(plan.capacity, "capacity");
    notes.push([plan.capacity, "capacity"]);
    kinds.add("capacity");
  }
  hline(plan.lower_bound, "lower-bound");
  kinds.add("lower-bound");
  notes.push([plan.lower_bound, "lower bound"], [model.arenaTop, "arena"]);
  if (model.peak > 0) notes.push([model.peak, "peak"]);

  svg.append(plot, yticks, xticks, lane);
  const labelGroup = el("g", { class: "labels", "clip-path": "url(#plot-clip)" });
  labelGroup.append(...labels);
  svg.append(labelGroup);
  svg.append(marginNotes(geo, notes, plan.capacity !== null && plan.capacity > ymax ? plan.capacity : null));
  svg.append(
    el("text", { class: "tick axis-title", x: r2(pl + pw / 2), y: pt + ph + 36, "text-anchor": "middle" }, "program point"),
    el("text", { class: "tick axis-title", transform: `translate(14 ${r2(pt + ph / 2)}) rotate(-90)`, "text-anchor": "middle" }, "shared memory"),
  );
  // The crosshair lies in a second SVG over the map: moving it redraws three marks, not the map.
  const overlay = el("svg", { width, height, class: "memory-map overlay", "aria-hidden": "true" });
  const crosshair = el("g", { class: "crosshair", visibility: "hidden" });
  crosshair.append(el("rect", { class: "cursor-band", y: pt, height: ph }), el("line", { class: "cursor-x", y1: pt, y2: pt + ph }), el("line", { class: "cursor-y", x1: pl, x2: pl + pw }));
  overlay.append(crosshair);
  box.replaceChildren(svg, overlay);
  drawn = { svg, geo, byId: byIdMap, crosshair };
  showLegend(kinds);
  if (cursor !== null) setCursor(cursor);
  const hl = document.querySelector("#placements tr.hl");
  if (hl) highlight(idOf.get(hl));
}

// Labels for the horizontal lines in the right margin, one name a line and the bytes below:
// equal values share a label, close ones are pushed apart, and a capacity above the axis
// gets a note at the top.
function marginNotes(geo, lines, above) {
  const merged = new Map();
  for (const [value, name] of lines) merged.set(value, [...(merged.get(value) || []), name]);
  const notes = [...merged.entries()].map(([value, names]) => ({ value, names, y: geo.py(value) }));
  notes.sort((a, b) => a.y - b.y);
  if (above !== null) notes.unshift({ value: above, names: ["capacity, above"], y: geo.pt, off: true });
  const g = el("g", { class: "notes" });
  let bottom = geo.pt - 6;
  const x = geo.pl + geo.pw;
  const placed = notes.map((n) => {
    const lines = n.names.length + 1;
    const topY = Math.max(n.y - NOTE_LINE / 2, bottom);
    bottom = topY + lines * NOTE_LINE + 2;
    return { ...n, topY, lines };
  });
  // Past the plot's foot: lift them all, keeping their order and spacing.
  const floor = geo.pt + geo.ph + 8;
  if (placed.length && bottom > floor) {
    let lift = bottom - floor;
    for (let i = placed.length - 1; i >= 0; i--) {
      placed[i].topY -= lift;
      if (i > 0) {
        const gap = placed[i].topY - (placed[i - 1].topY + placed[i - 1].lines * NOTE_LINE + 2);
        lift = Math.max(0, -gap);
      }
    }
  }
  for (const n of placed) {
    g.append(el("line", { class: "leader", x1: x, y1: r2(n.y), x2: x + 6, y2: r2(n.topY + NOTE_LINE / 2), stroke: "#888" }));
    const text = el("text", { class: "note", x: x + 9, y: r2(n.topY), "font-size": 10, "data-bytes": n.value });
    n.names.forEach((name, i) => text.append(el("tspan", { x: x + 9, dy: i === 0 ? "0.85em" : `${NOTE_LINE}px` }, name)));
    text.append(el("tspan", { x: x + 9, dy: `${NOTE_LINE}px`, class: "note-bytes" }, kib(n.value)));
    g.append(text);
  }
  return g;
}

const LEGEND = [ // kind, swatch class, text
  ["buffer", "sw-buffer", "buffer, live"],
  ["held", "sw-held", "held until the next barrier"],
  ["barrier-required", "sw-barrier required", "existing barrier relied on"],
  ["barrier-unused", "sw-barrier unused", "existing barrier not needed"],
  ["barrier-inserted", "sw-barrier inserted", "inserted barrier"],
  ["barrier-caller", "sw-barrier caller", "barrier the caller adds"],
  ["alias", "sw-alias", "thread-local alias"],
  ["live", "sw-live", "live bytes"],
  ["held-curve", "sw-held-curve", "held bytes"],
  ["peak", "sw-peak", "peak"],
  ["capacity", "sw-capacity", "capacity"],
  ["lower-bound", "sw-lower-bound", "lower bound"],
  ["over-capacity", "sw-over", "over capacity"],
  ["certificate", "sw-certificate", "certificate"],
  ["loop", "sw-loop", "loop body"],
];

function showLegend(kinds) {
  $("legend").replaceChildren(...LEGEND.filter(([kind]) => kinds.has(kind)).map(([kind, cls, text]) => {
    const li = document.createElement("li");
    li.dataset.kind = kind;
    li.append(Object.assign(document.createElement("span"), { className: `swatch ${cls}` }), text);
    return li;
  }));
}

// --- crosshair, peak and the point under it ---------------------------------------------------

function bufferList(list, entries, total) {
  list.replaceChildren(...entries.map(({ b, held, until }) => {
    const li = document.createElement("li");
    idOf.set(li, b.id);
    li.dataset.held = held ? "true" : "false";
    const swatch = Object.assign(document.createElement("span"), { className: "swatch" });
    swatch.style.background = `hsl(${((b.k * 137.508) % 360).toFixed(1)},60%,72%)`;
    const name = Object.assign(document.createElement("code"), { textContent: b.id });
    const size = Object.assign(document.createElement("span"), { className: "size", textContent: kib(b.size) });
    const share = Object.assign(document.createElement("span"), { className: "share", textContent: !total ? "" : b.size * 100 < total ? "<1 %" : `${Math.round((100 * b.size) / total)} %` });
    li.append(swatch, name, size, share);
    if (held) li.append(Object.assign(document.createElement("span"), { className: "why", textContent: `held to ${until}` }));
    return li;
  }));
}

function spansText(spans) {
  const shown = spans.slice(0, 4).map(([s, e]) => (e - s === 1 ? `${s}` : `[${s}, ${e})`));
  return shown.join(", ") + (spans.length > 4 ? ` and ${spans.length - 4} more` : "");
}

function showPeak(model) {
  if (!model.peak) {
    $("peak-summary").textContent = "Nothing is live in shared memory.";
    $("peak-list").replaceChildren();
    return;
  }
  const at = model.peakSpans[0][0];
  const entries = buffersAt(model, at);
  const summary = `${kib(model.peak)} (${model.peak} B) held at point${model.peakSpans.length > 1 || model.peakSpans[0][1] - at > 1 ? "s" : ""} ${spansText(model.peakSpans)}; ${entries.length} buffer${entries.length === 1 ? "" : "s"} at point ${at}, largest first:`;
  $("peak-summary").textContent = summary;
  $("peak-summary").dataset.point = String(at);
  bufferList($("peak-list"), entries, model.peak);
}

function setCursor(point) {
  cursor = point;
  const { model } = current;
  const entries = buffersAt(model, point);
  const live = valueAt(model.live, point), held = valueAt(model.held, point);
  $("point-no").textContent = String(point);
  $("point-summary").textContent = `${kib(live)} live${held !== live ? `, ${kib(held)} held` : ""}; ${entries.length} buffer${entries.length === 1 ? "" : "s"}`;
  bufferList($("point-list"), entries, held);
  const text = `point ${point}: ${live} B live (${kib(live)})${held !== live ? `, ${held} B held` : ""}, ${entries.length} buffer${entries.length === 1 ? "" : "s"}`;
  $("readout").textContent = text;
  $("readout").dataset.point = String(point);
  $("readout").dataset.live = String(live);
  $("readout").dataset.held = String(held);
  if (!drawn) return;
  const { geo, crosshair } = drawn;
  const inView = point + 1 > geo.x0 && point < geo.x1;
  crosshair.setAttribute("visibility", inView ? "visible" : "hidden");
  if (!inView) return;
  const [band, vx, hy] = crosshair.children;
  const a = Math.max(geo.px(point), geo.pl), b = Math.min(geo.px(point + 1), geo.pl + geo.pw);
  band.setAttribute("x", r2(a));
  band.setAttribute("width", r2(Math.max(b - a, 0)));
  const mid = r2((a + b) / 2);
  vx.setAttribute("x1", mid);
  vx.setAttribute("x2", mid);
  hy.setAttribute("y1", r2(geo.py(held)));
  hy.setAttribute("y2", r2(geo.py(held)));
}

// The program point under a pointer event, or null off the plot.
function pointUnder(event) {
  const g = drawn.geo;
  const r = drawn.svg.getBoundingClientRect();
  const x = event.clientX - r.left, y = event.clientY - r.top;
  if (x < g.pl || x > g.pl + g.pw || y < g.pt || y > g.pt + g.ph) return null;
  const p = Math.floor(g.x0 + ((x - g.pl) * (g.x1 - g.x0)) / g.pw);
  return Math.min(Math.max(p, 0), current.model.horizon - 1);
}

// --- zoom and pan along program points -------------------------------------------------------

function zoomAt(factor, point, soon) {
  const { x0, x1 } = view;
  const span = (x1 - x0) / factor;
  const k = span / (x1 - x0);
  setView(point - (point - x0) * k, point - (point - x0) * k + span, soon);
}

$("zoom-in").addEventListener("click", () => view && zoomAt(2, (view.x0 + view.x1) / 2));
$("zoom-out").addEventListener("click", () => view && zoomAt(0.5, (view.x0 + view.x1) / 2));
$("zoom-reset").addEventListener("click", () => view && setView(0, current.model.horizon));
$("map").addEventListener("wheel", (event) => {
  if (!drawn) return;
  event.preventDefault();
  const g = drawn.geo;
  const x = event.clientX - drawn.svg.getBoundingClientRect().left;
  const point = view.x0 + ((Math.min(Math.max(x, g.pl), g.pl + g.pw) - g.pl) * (view.x1 - view.x0)) / g.pw;
  zoomAt(Math.exp(-event.deltaY * 0.002), point, true);
}, { passive: false });

let drag = null; // {x, view, moved} while the pointer is down on the map
$("map").addEventListener("pointerdown", (event) => {
  if (!drawn || event.button !== 0) return;
  drag = { x: event.clientX, view: { ...view }, moved: false };
  $("map").setPointerCapture(event.pointerId);
});
$("map").addEventListener("pointermove", (event) => {
  if (!drawn) return;
  if (!drag) {
    const p = pointUnder(event);
    if (p !== null) setCursor(p);
    $("map").title = tips.get(event.target) || "";
    return;
  }
  const dx = event.clientX - drag.x;
  if (Math.abs(dx) > 3) drag.moved = true;
  if (!drag.moved) return;
  $("map").classList.add("dragging");
  const shift = (dx * (drag.view.x1 - drag.view.x0)) / drawn.geo.pw;
  setView(drag.view.x0 - shift, drag.view.x1 - shift, true);
});
$("map").addEventListener("pointerleave", () => drawn && drawn.crosshair.setAttribute("visibility", "hidden"));
$("map").addEventListener("pointerup", (event) => {
  if (!drag) return;
  const moved = drag.moved;
  drag = null;
  $("map").classList.remove("dragging");
  if (moved) return;
  // A click, not a drag: find the buffer under the pointer in the table.
  const hit = document.elementFromPoint(event.clientX, event.clientY);
  const tr = highlight(hit && idOf.has(hit) ? idOf.get(hit) : null);
  if (tr) tr.scrollIntoView({ block: "nearest" });
});
window.addEventListener("resize", () => current && render());
// From the keyboard: the arrows move the crosshair a point (a tenth of the view with Shift),
// + and - zoom about it, 0 shows every point.
$("map").addEventListener("keydown", (event) => {
  if (!drawn) return;
  const span = view.x1 - view.x0;
  const here = cursor === null ? Math.floor(view.x0 + span / 2) : cursor;
  const step = event.shiftKey ? Math.max(1, Math.round(span / 10)) : 1;
  if (event.key === "ArrowRight" || event.key === "ArrowLeft") {
    const p = Math.min(Math.max(here + (event.key === "ArrowRight" ? step : -step), 0), current.model.horizon - 1);
    if (p < view.x0 || p + 1 > view.x1) setView(p + 0.5 - span / 2, p + 0.5 + span / 2);
    setCursor(p);
  } else if (event.key === "+" || event.key === "=") zoomAt(2, here + 0.5);
  else if (event.key === "-") zoomAt(0.5, here + 0.5);
  else if (event.key === "0") setView(0, current.model.horizon);
  else return;
  event.preventDefault();
});

// --- controls: examples, target, capacity, sync, solver -------------------------------------

// The request in the text box, or null (with the syntax error shown) when it does not parse.
function parsedRequest() {
  const text = $("request").value;
  try {
    const data = JSON.parse(text);
    return data && typeof data === "object" && !Array.isArray(data) ? data : null;
  } catch (e) {
    const { msg, position } = syntaxError(text, e);
    showErrors([{ loc: [], msg }]);
    if (position !== null) $("request").setSelectionRange(position, position);
    return null;
  }
}

// The controls show what the request in the text box says.
function syncControls() {
  let data = null;
  try { data = JSON.parse($("request").value); } catch (_) { return; }
  if (!data || typeof data !== "object") return;
  const options = (data.options && typeof data.options === "object") ? data.options : {};
  $("target").value = typeof data.target === "string" ? data.target : "";
  $("capacity").value = Number.isInteger(data.capacity) ? String(data.capacity) : "";
  $("sync").value = typeof options.sync === "string" ? options.sync : "insert";
  $("solver").value = typeof options.solver === "string" ? options.solver : "auto";
}

// A control changed: write it into the request (a default or an empty field drops the key).
function applyControl(field) {
  const data = parsedRequest();
  if (data === null) {
    syncControls();
    return;
  }
  showErrors([]);
  const value = $(field).value;
  if (field === "target" || field === "capacity") {
    if (value === "") delete data[field];
    else data[field] = field === "capacity" ? Math.max(0, Math.round(+value)) : value;
  } else {
    const options = { ...(data.options || {}) };
    options[field] = value;
    data.options = options;
  }
  $("request").value = JSON.stringify(data, null, 2);
}

for (const field of ["target", "capacity", "sync", "solver"]) {
  $(field).addEventListener("change", () => applyControl(field));
}
$("request").addEventListener("input", syncControls);

function fillSelect(select, values, labels) {
  const keep = [...select.options].filter((o) => o.value === "");
  select.replaceChildren(...keep, ...values.map((v, i) => Object.assign(document.createElement("option"), { value: v, textContent: labels ? labels[i] : v })));
}

async function loadChoices() {
  fillSelect($("sync"), ["insert", "existing", "none"]);
  fillSelect($("solver"), ["auto", "greedy", "exact"]);
  const settle = (p) => p.then((r) => (r.ok ? r.json() : null)).catch(() => null);
  const [examples, targets, spec] = await Promise.all([
    settle(fetch("/examples")), settle(fetch("/targets")), settle(fetch("/openapi.json")),
  ]);
  if (Array.isArray(examples)) {
    fillSelect($("examples"), examples.map((e) => e.name), examples.map((e) => `${e.name} (${e.buffers} buffers${e.target ? ", " + e.target : ""})`));
  }
  if (Array.isArray(targets)) {
    fillSelect($("target"), targets.map((t) => t.name), targets.map((t) => `${t.name} (${t.devices}, ${kib(t.max_smem_per_block)})`));
  }
  const options = spec && spec.components && spec.components.schemas.Options;
  if (options) {
    const { sync, solver } = options.properties;
    if (sync && sync.enum) fillSelect($("sync"), sync.enum);
    if (solver && solver.enum) fillSelect($("solver"), solver.enum);
  }
  $("sync").value = "insert";
  $("solver").value = "auto";
  syncControls();
  document.body.dataset.ready = "true";
}

$("examples").addEventListener("change", async () => {
  const name = $("examples").value;
  if (!name) return;
  const response = await fetch(`/examples/${encodeURIComponent(name)}`);
  if (!response.ok) {
    showErrors(await failure(response));
    return;
  }
  $("request").value = await response.text();
  syncControls();
  await planIt();
});

// --- planning -----------------------------------------------------------------------------

async function planIt() {
  const mine = ++attempt;
  showErrors([]);
  const text = $("request").value;
  if (!text.trim()) {
    clearPlan();
    showNotice("The request is empty: paste or upload a request, or load an example.");
    setState("empty", "");
    return;
  }
  let request = null;
  try {
    request = JSON.parse(text);
  } catch (_) { /* the service names the line and column */ }
  if (request && typeof request === "object" && Array.isArray(request.buffers) && !request.buffers.length) {
    clearPlan();
    showNotice("The request has no buffers: there is nothing to plan.");
    setState("empty", "");
    return;
  }
  syncControls();
  setState("planning", "Planning…");
  try {
    const response = await fetch("/plan", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: text,
    });
    if (!response.ok) throw await failure(response);
    const planText = await response.text();
    const plan = JSON.parse(planText);
    if (mine !== attempt) return;
    clearPlan();
    const model = buildModel(request, plan);
    current = { request, plan, planText, model, rows: placementRows(model) };
    $("result").hidden = false;
    renderTable();
    setView(0, model.horizon);
    $("count").textContent = `(${plan.placements.length})`;
    showStats(plan);
    showPeak(model);
    const spilled = plan.spilled.length;
    $("spill-note").hidden = !spilled;
    $("spill-note").textContent = spilled ? `${spilled} buffer${spilled === 1 ? "" : "s"} spilled to a ${plan.global_bytes} B global workspace: listed in the table, not drawn.` : "";
    setState("planned", `${plan.status}: arena ${plan.arena_bytes} B`);
  } catch (detail) {
    if (mine !== attempt) return;
    clearPlan();
    const errors = Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail) }];
    showErrors(errors);
    if (errors.length) caretTo(errors[0].msg);
    setState("error", "");
  }
}

function save(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = Object.assign(document.createElement("a"), { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function download(kind) {
  if (!current) return;
  const shown = current;
  const base = shown.plan.name.replace(/[^A-Za-z0-9_.-]/g, "_") || "plan";
  try {
    if (kind === "plan") return save(`${base}.plan.json`, shown.planText, "application/json");
    const suffix = { cuda: "cu", mlir: "mlir", svg: "svg" }[kind];
    save(`${base}.${suffix}`, await emit(kind, shown), "text/plain");
  } catch (detail) {
    showErrors(Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail) }]);
  }
}

$("plan").addEventListener("click", planIt);
$("file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (!file) return;
  $("request").value = await file.text();
  syncControls();
});
for (const kind of ["plan", "cuda", "mlir", "svg"]) {
  $(`dl-${kind}`).addEventListener("click", () => download(kind));
}
loadChoices();
