"use strict";
// The page talks to the service only: POST /plan plans, POST /emit/{kind} renders.

const $ = (id) => document.getElementById(id);
let current = null; // {request, plan, planText, rows}
let attempt = 0; // the latest Plan click; an older answer arriving late is dropped
let sort = { key: null, dir: 1 };
let view = null; // the map's viewBox: {svg, base: [x, y, w, h], box: [x, y, w, h]}

function setState(state, text) {
  document.body.dataset.state = state;
  $("status").textContent = text || "";
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

// Whatever was shown belongs to an earlier request: take it all away.
function clearPlan() {
  current = null;
  view = null;
  $("result").hidden = true;
  for (const id of ["map", "stats", "diagnostics", "count"]) $(id).replaceChildren();
  $("placements").tBodies[0].replaceChildren();
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

function row(name, value) {
  const tr = document.createElement("tr");
  for (const text of [name, value]) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  }
  return tr;
}

function showStats(plan) {
  const launch = plan.launch;
  $("stats").replaceChildren(
    row("status", plan.status),
    row("arena", `${plan.arena_bytes} B`),
    row("lower bound", `${plan.lower_bound} B`),
    row("naive sum", `${plan.naive_bytes} B`),
    row("capacity", plan.capacity === null ? "none" : `${plan.capacity} B`),
    row("gap", `${(plan.solver.gap * 100).toFixed(2)} %`),
    row("solver", plan.solver.name),
    row("buffers", String(plan.placements.length)),
    row("barriers", `existing ${plan.barriers.existing.length}, inserted ${plan.barriers.inserted.length}, required ${plan.barriers.required.length}`),
    row("blocks per SM", launch.blocks_per_sm === null ? "no target" : `${launch.blocks_per_sm} (naive ${launch.naive_blocks_per_sm})`),
    row("opt-in needed", launch.requires_opt_in ? "yes" : "no"),
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

// One row per placement, its lifetime taken from the request.
function placementRows(request, plan) {
  const lifetimes = new Map((request.buffers || []).map((b) => [String(b.id), [b.start, b.end]]));
  return plan.placements.map((p, order) => {
    const [start, end] = lifetimes.get(p.id) || [NaN, NaN];
    return { order, id: p.id, offset: p.offset, size: p.size, memory: p.memory, start, end };
  });
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
  const body = $("placements").tBodies[0];
  body.replaceChildren(...rows.map((r) => {
    const tr = document.createElement("tr");
    tr.dataset.id = r.id;
    if (r.memory !== "shared") tr.className = r.memory;
    const live = `[${r.start}, ${r.end})`;
    for (const [text, num] of [[r.id, false], [r.offset, true], [r.size, true], [r.memory, false], [live, true]]) {
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

function rectOf(id) {
  return view && view.svg.querySelector(`rect.buffer[data-id="${CSS.escape(id)}"]`);
}

function highlight(id) {
  for (const el of document.querySelectorAll(".hl")) el.classList.remove("hl");
  if (id === null) return null;
  const rect = rectOf(id);
  if (rect) rect.classList.add("hl");
  const tr = [...$("placements").tBodies[0].rows].find((r) => r.dataset.id === id);
  if (tr) tr.classList.add("hl");
  return tr;
}

$("placements").tBodies[0].addEventListener("mouseover", (event) => {
  const tr = event.target.closest("tr");
  if (tr) highlight(tr.dataset.id);
});
$("placements").tBodies[0].addEventListener("mouseleave", () => highlight(null));
$("placements").tBodies[0].addEventListener("click", (event) => {
  const tr = event.target.closest("tr");
  if (tr) showBuffer(tr.dataset.id);
});

// Zoom the map onto one buffer, centred, close enough to carry its label.
function showBuffer(id) {
  const rect = rectOf(id);
  if (!rect) return;
  highlight(id);
  const [, , bw, bh] = view.base;
  const x = +rect.getAttribute("x"), y = +rect.getAttribute("y");
  const w = +rect.getAttribute("width"), h = +rect.getAttribute("height");
  measure.font = "11px sans-serif";
  const wanted = Math.max((measure.measureText(id).width + 12) / w, 20 / h);
  const zoom = Math.min(Math.max(wanted, 1), MAX_ZOOM);
  const vw = bw / zoom, vh = bh / zoom;
  setBox([x + w / 2 - vw / 2, y + h / 2 - vh / 2, vw, vh]);
}

// --- map: zoom and pan on the viewBox -------------------------------------------------------

const MAX_ZOOM = 512; // room for the name of a one-point buffer in a 5000-point kernel
const measure = document.createElement("canvas").getContext("2d");

function showMap(svgText) {
  // The SVG comes from the service, which escapes every id it writes.
  $("map").innerHTML = svgText;
  const svg = $("map").querySelector("svg");
  const base = svg.getAttribute("viewBox").split(/[\s,]+/).map(Number);
  view = { svg, base, box: base.slice() };
  setBox(base);
}

function setBox([x, y, w, h]) {
  const [bx, by, bw, bh] = view.base;
  w = Math.min(Math.max(w, bw / MAX_ZOOM), bw);
  h = (w * bh) / bw;
  x = Math.min(Math.max(x, bx), bx + bw - w);
  y = Math.min(Math.max(y, by), by + bh - h);
  view.box = [x, y, w, h];
  view.svg.setAttribute("viewBox", view.box.map((v) => +v.toFixed(3)).join(" "));
  const zoom = bw / w;
  $("zoom-level").textContent = `${Math.round(zoom * 100)} %`;
  view.svg.dataset.zoom = zoom.toFixed(4);
  relabel(zoom);
}

// Zoom by `factor` keeping the user-space point (px, py) where it is on screen.
function zoomAt(factor, px, py) {
  const [x, y, w, h] = view.box;
  const nw = Math.min(Math.max(w / factor, view.base[2] / MAX_ZOOM), view.base[2]);
  const k = nw / w;
  setBox([px - (px - x) * k, py - (py - y) * k, nw, (h * nw) / w]);
}

function userPoint(event) {
  const pt = view.svg.createSVGPoint();
  pt.x = event.clientX;
  pt.y = event.clientY;
  return pt.matrixTransform(view.svg.getScreenCTM().inverse());
}

function zoomCentre(factor) {
  if (!view) return;
  const [x, y, w, h] = view.box;
  zoomAt(factor, x + w / 2, y + h / 2);
}

// Text keeps its size on screen while zooming (anchors spread apart, so nothing that stood
// clear at full view comes to overlap); a buffer gains its label once it is wide and tall
// enough on screen to hold it, so zooming in on a crowded map names its buffers.
function relabel(zoom) {
  for (const t of view.svg.querySelectorAll("text.zoomed")) t.remove();
  for (const t of view.svg.querySelectorAll("text")) {
    if (!t.dataset.size) t.dataset.size = parseFloat(getComputedStyle(t).fontSize);
    t.style.fontSize = `${t.dataset.size / zoom}px`;
    if (t.classList.contains("label")) t.style.strokeWidth = `${2.5 / zoom}px`;
  }
  const labels = view.svg.querySelector("g.labels");
  if (!labels || zoom <= 1) return;
  const had = new Set([...labels.querySelectorAll("text.label")].map((t) => t.getAttribute("data-for")));
  measure.font = "11px sans-serif";
  const [x, y, w, h] = view.box;
  for (const r of view.svg.querySelectorAll("rect.buffer")) {
    const id = r.getAttribute("data-id");
    if (had.has(id)) continue;
    const rx = +r.getAttribute("x"), ry = +r.getAttribute("y");
    const rw = +r.getAttribute("width"), rh = +r.getAttribute("height");
    if (rx > x + w || rx + rw < x || ry > y + h || ry + rh < y) continue; // off screen
    if (rw * zoom < measure.measureText(id).width + 6 || rh * zoom < 15) continue;
    const t = document.createElementNS("http://www.w3.org/2000/svg", "text");
    t.setAttribute("class", "label zoomed");
    t.setAttribute("data-for", id);
    t.setAttribute("x", String(rx + rw / 2));
    t.setAttribute("y", String(ry + rh / 2));
    t.setAttribute("dy", "0.36em");
    t.setAttribute("text-anchor", "middle");
    t.style.fontSize = `${11 / zoom}px`;
    t.style.strokeWidth = `${2.5 / zoom}px`;
    t.textContent = id;
    labels.append(t);
  }
}

$("zoom-in").addEventListener("click", () => zoomCentre(2));
$("zoom-out").addEventListener("click", () => zoomCentre(0.5));
$("zoom-reset").addEventListener("click", () => view && setBox(view.base));
$("map").addEventListener("wheel", (event) => {
  if (!view) return;
  event.preventDefault();
  const p = userPoint(event);
  zoomAt(Math.exp(-event.deltaY * 0.002), p.x, p.y);
}, { passive: false });

let drag = null; // {x, y, box, moved} while the pointer is down on the map
$("map").addEventListener("pointerdown", (event) => {
  if (!view || event.button !== 0) return;
  drag = { x: event.clientX, y: event.clientY, box: view.box.slice(), moved: false };
  $("map").setPointerCapture(event.pointerId);
});
$("map").addEventListener("pointermove", (event) => {
  if (!drag) return;
  const scale = drag.box[2] / view.svg.getBoundingClientRect().width; // user units per px
  const dx = event.clientX - drag.x, dy = event.clientY - drag.y;
  if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
  if (!drag.moved) return;
  $("map").classList.add("dragging");
  setBox([drag.box[0] - dx * scale, drag.box[1] - dy * scale, drag.box[2], drag.box[3]]);
});
$("map").addEventListener("pointerup", (event) => {
  if (!drag) return;
  const moved = drag.moved;
  drag = null;
  $("map").classList.remove("dragging");
  if (moved) return;
  // A click, not a drag: find the buffer under the pointer in the table.
  const hit = document.elementFromPoint(event.clientX, event.clientY);
  const rect = hit && hit.closest("rect.buffer");
  const tr = highlight(rect ? rect.getAttribute("data-id") : null);
  if (tr) tr.scrollIntoView({ block: "nearest" });
});

// --- planning -----------------------------------------------------------------------------

async function planIt() {
  const mine = ++attempt;
  showErrors([]);
  const text = $("request").value;
  if (!text.trim()) {
    clearPlan();
    showNotice("The request is empty: paste or upload a request, or load the example.");
    setState("empty", "");
    return;
  }
  let request;
  try {
    request = JSON.parse(text);
  } catch (e) {
    clearPlan();
    showErrors([{ loc: [], msg: `malformed JSON: ${e.message}` }]);
    setState("error", "");
    return;
  }
  if (request && typeof request === "object" && Array.isArray(request.buffers) && !request.buffers.length) {
    clearPlan();
    showNotice("The request has no buffers: there is nothing to plan.");
    setState("empty", "");
    return;
  }
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
    const shown = { request, plan, planText, rows: placementRows(request, plan) };
    const svg = await emit("svg", shown);
    if (mine !== attempt) return;
    clearPlan();
    current = shown;
    $("result").hidden = false;
    showMap(svg);
    renderTable();
    $("count").textContent = `(${plan.placements.length})`;
    showStats(plan);
    setState("planned", `${plan.status}: arena ${plan.arena_bytes} B`);
  } catch (detail) {
    if (mine !== attempt) return;
    clearPlan();
    showErrors(Array.isArray(detail) ? detail : [{ loc: [], msg: String(detail) }]);
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
$("example").addEventListener("click", async () => {
  $("request").value = await (await fetch("/static/example.json")).text();
});
$("file").addEventListener("change", async (event) => {
  const file = event.target.files[0];
  if (file) $("request").value = await file.text();
});
for (const kind of ["plan", "cuda", "mlir", "svg"]) {
  $(`dl-${kind}`).addEventListener("click", () => download(kind));
}
