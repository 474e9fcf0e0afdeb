"use strict";
// The page talks to the service only: POST /plan plans, POST /emit/{kind} renders.

const $ = (id) => document.getElementById(id);
let current = null; // {request, plan, planText}

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

async function failure(response) {
  let detail = [{ loc: [], msg: `${response.status} ${response.statusText}` }];
  try {
    const body = await response.json();
    if (Array.isArray(body.detail)) detail = body.detail;
  } catch (_) { /* not JSON: keep the status line */ }
  return detail;
}

async function emit(kind) {
  const response = await fetch(`/emit/${kind}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ request: current.request, plan: current.plan }),
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

function showPlan(plan) {
  const launch = plan.launch;
  const stats = $("stats");
  stats.replaceChildren(
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

async function planIt() {
  showErrors([]);
  const text = $("request").value;
  let request;
  try {
    request = JSON.parse(text);
  } catch (e) {
    showErrors([{ loc: [], msg: `malformed JSON: ${e.message}` }]);
    setState("error", "");
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
    current = { request, plan: JSON.parse(planText), planText };
    const svg = await emit("svg");
    // The SVG comes from the service, which escapes every id it writes.
    $("map").innerHTML = svg;
    showPlan(current.plan);
    $("result").hidden = false;
    setState("planned", `${current.plan.status}: arena ${current.plan.arena_bytes} B`);
  } catch (detail) {
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
  const base = current.plan.name.replace(/[^A-Za-z0-9_.-]/g, "_") || "plan";
  try {
    if (kind === "plan") return save(`${base}.plan.json`, current.planText, "application/json");
    const suffix = { cuda: "cu", mlir: "mlir", svg: "svg" }[kind];
    save(`${base}.${suffix}`, await emit(kind), "text/plain");
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
