// agentic-ray dashboard: polls the run's status and redraws a page when the run has written more.
// Every name shown (stages, skills, nodes, layers, causes, codes) comes from the data.
"use strict";

const PAGE = document.body.dataset.page;
const PLOT_CONFIG = { displaylogo: false, responsive: true };
let lastVersion = null;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function fmt(v) {
  if (v === null || v === undefined) return "n/a";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(3);
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (Array.isArray(v)) return v.map(fmt).join(", ");
  if (typeof v === "object") return Object.entries(v).map(([k, x]) => `${k}=${fmt(x)}`).join(", ");
  return String(v);
}

async function getJSON(url) {
  const r = await fetch(url, { cache: "no-store" });
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return r.json();
}

// A fixed height per figure: with responsive resizing, Plotly otherwise shrinks a div whose height comes only
// from its content to the CSS min-height when the window is resized.
function plot(div, fig) {
  div.style.height = `${fig.layout.height}px`;
  return Plotly.react(div, fig.data, fig.layout, PLOT_CONFIG);
}

function drawFigures(container, figures) {
  for (const [id, fig] of Object.entries(figures)) {
    let div = document.getElementById(`fig-${id}`);
    if (!div) {
      div = el("div", { id: `fig-${id}`, class: "figure" });
      container.append(div);
    }
    plot(div, fig);
  }
}

function showStatus(st) {
  const box = document.getElementById("status");
  box.textContent = "";
  const live = st.status === "running" || st.status === "starting";
  box.append(
    el("span", { class: live ? "live" : "", text: live ? "● live" : st.status }),
    ` · stage ${st.stage || "-"} · iteration ${st.iteration ?? "-"} · ${st.env_steps ?? 0} env steps · ` +
      `${st.metrics_rows} metric rows · ${st.traces} traces`
  );
  document.getElementById("run-name").textContent = st.name;
}

async function drawPage() {
  const panel = await getJSON(`/api/page/${PAGE}`);
  document.getElementById("panel-head").innerHTML = panel.head;
  document.getElementById("panel-html").innerHTML = panel.html;
  drawFigures(document.getElementById("figures"), panel.figures);
  document.body.dataset.rendered = String(Object.keys(panel.figures).length);
}

// ------------------------------------------------------------------------------------------ trace viewer
let currentTrace = null;

function probRows(pairs) {
  const box = el("div");
  for (const [name, p] of pairs || []) {
    box.append(el("div", { class: "prob" },
      el("span", { class: "name", text: String(name) }),
      el("span", { class: "bar", style: `width:${Math.max(2, Math.round(140 * p))}px` }),
      el("span", { text: p.toFixed(3) })));
  }
  return box;
}

function kv(key, value) {
  const d = el("div");
  d.append(el("div", { class: "k", text: key }));
  d.append(value instanceof Node ? value : el("div", { text: fmt(value) }));
  return d;
}

function stepCard(s) {
  const failed = s.result_code !== "OK";
  const card = el("div", { class: `step${failed ? " failed" : ""}${s.injected ? " injected" : ""}`, "data-step": s.t });
  const args = Object.entries(s.args || {}).map(([k, v]) => `${k}=${fmt(v)}`).join(", ");
  const title = el("h4", { text: `step ${s.t}: ${s.skill}(${args}) → ${s.result_code}` });
  if (s.injected) title.append(el("span", { class: "badge injected", text: "injected fault" }));
  else if (failed) title.append(el("span", { class: "badge fail", text: "policy error" }));
  card.append(title);
  const grid = el("div", { class: "grid" });
  grid.append(kv("gateway", `${fmt(s.latency_ms)} ms · attempts ${fmt(s.attempts)} · fallback ${s.fallback_used || "-"}` +
    ` · step trace ${s.step_trace_id}`));
  if (s.message) grid.append(kv("tool result", s.message));
  if ((s.goals_satisfied || []).length) grid.append(kv("goals satisfied", s.goals_satisfied));
  if ((s.warnings || []).length) grid.append(kv("warnings", s.warnings));
  if (s.top_skills) grid.append(kv("top-k skills", probRows(s.top_skills)));
  if (s.top_prototypes) grid.append(kv("top prototypes", probRows(s.top_prototypes)));
  for (const [arg, pairs] of Object.entries(s.pointer || {})) grid.append(kv(`pointer · ${arg}`, probRows(pairs)));
  for (const [arg, pairs] of Object.entries(s.members || {})) grid.append(kv(`set members · ${arg}`, probRows(pairs)));
  for (const [arg, pairs] of Object.entries(s.enum || {})) grid.append(kv(`enum · ${arg}`, probRows(pairs)));
  for (const [arg, n] of Object.entries(s.numeric || {})) {
    const box = el("div", { text: `mean ${n.mean.toFixed(3)}  σ ${n.sigma.toFixed(3)}  → ${fmt((s.args || {})[arg])}` });
    if ((n.copy || []).length) box.append(el("div", { class: "muted", text: "copied from:" }), probRows(n.copy));
    grid.append(kv(`numeric · ${arg}`, box));
  }
  const masked = Object.entries(s.mask_reasons || {});
  if (masked.length) {
    const ul = el("ul", { class: "reasons" });
    for (const [skill, reasons] of masked) ul.append(el("li", { text: `${skill}: ${reasons.join("; ")}` }));
    const box = el("details", {}, el("summary", { text: masked.map(([skill]) => skill).join(", ") }), ul);
    if (failed) box.open = true;
    grid.append(kv(`masked skills (${masked.length})`, box));
  }
  if (s.reflection) {
    const r = s.reflection;
    const box = el("div");
    box.append(el("div", { text: `predicted cause: ${r.root_cause}` +
      (r.rule_based_cause ? ` (rule-based: ${r.rule_based_cause})` : "") }));
    if (r.hypothesis) box.append(el("div", { class: "muted", text: `hypothesis: ${r.hypothesis}; minimal experiment: ${r.minimal_experiment}` }));
    if (r.probs) box.append(probRows(Object.entries(r.probs).sort((a, b) => b[1] - a[1]).slice(0, 3)));
    grid.append(kv("reflection head", box));
  }
  if (s.memory) grid.append(kv("memory queries", s.memory));
  card.append(grid);
  return card;
}

// When the last lookup started, its steps were shown, and its heatmaps drawn (performance.now(), ms).
window.traceTiming = {};

async function openTrace(id) {
  window.traceTiming = { start: performance.now() };
  const view = document.getElementById("trace-view");
  const err = document.getElementById("trace-error");
  err.textContent = "";
  let t;
  try {
    t = await getJSON(`/api/trace/${encodeURIComponent(id)}`);
  } catch (e) {
    err.textContent = `no trace ${id} in this run`;
    return;
  }
  currentTrace = t.trace_id;
  history.replaceState(null, "", `/traces?id=${encodeURIComponent(id)}`);
  for (const a of document.querySelectorAll(".trace-item")) a.classList.toggle("active", a.dataset.id === t.trace_id);
  view.textContent = "";
  delete view.dataset.traceId;
  delete document.body.dataset.rendered;
  const head = el("section");
  head.append(el("h3", { text: `trace ${t.trace_id}` }));
  const rows = [["family", t.task_family], ["stage", `${t.stage} · iteration ${t.iteration} · ${fmt(t.env_steps)} env steps`],
    ["episode", t.episode_id], ["outcome", t.completed ? "completed" : "not completed"], ["kept as", t.kept_as || []]];
  const tbl = el("table");
  for (const [k, v] of rows) tbl.append(el("tr", {}, el("th", { text: k }), el("td", { text: fmt(v) })));
  head.append(tbl);
  const layers = Object.entries(t.reward_layers || {});
  if (layers.length) {
    const lt = el("table");
    lt.append(el("tr", {}, el("th", { text: "reward layer" }), el("th", { text: "episode total (raw)" })));
    for (const [k, v] of layers) lt.append(el("tr", {}, el("td", { text: k }), el("td", { text: v.toFixed(3) })));
    head.append(el("div", { class: "k", text: "reward layers of the episode" }), lt);
  }
  const memory = (t.steps || []).some((s) => s.memory);
  if (!memory) head.append(el("p", { class: "muted", text: "memory queries: none recorded in this episode" }));
  view.append(head);
  const figBox = el("div", { id: "trace-figures" });
  view.append(figBox);
  const steps = el("div", { id: "trace-steps" });
  for (const s of t.steps || []) steps.append(stepCard(s));
  view.append(steps);
  view.dataset.traceId = t.trace_id; // found and shown; the heatmaps follow
  window.traceTiming.shown = performance.now();
  const figs = await getJSON(`/api/trace/${encodeURIComponent(id)}/figures`);
  for (const [name, fig] of Object.entries(figs)) {
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))); // paint between heatmaps
    if (currentTrace !== t.trace_id) return; // another trace was opened meanwhile
    const div = el("div", { class: "figure", "data-figure": name });
    figBox.append(div);
    await plot(div, fig);
  }
  window.traceTiming.rendered = performance.now();
  document.body.dataset.rendered = String(Object.keys(figs).length);
}

async function drawTraceList() {
  const list = await getJSON("/api/traces");
  const failed = list.filter((t) => t.failed);
  const box = document.getElementById("failed-traces");
  box.textContent = "";
  box.append(el("div", { class: "k", text: `failed episodes (${failed.length} of ${list.length} traced)` }));
  for (const t of failed.slice().reverse()) {
    const a = el("a", { class: "trace-item", href: `/traces?id=${encodeURIComponent(t.trace_id)}`, "data-id": t.trace_id });
    a.append(el("div", { class: "id", text: t.trace_id }),
      el("div", { class: "muted", text: `${t.task_family} · ${t.stage} ${t.iteration} · ${t.failed_steps} failed, ${t.injected_steps} injected` }));
    a.addEventListener("click", (ev) => { ev.preventDefault(); openTrace(t.trace_id); });
    box.append(a);
  }
  const sel = document.getElementById("all-traces");
  sel.textContent = "";
  sel.append(el("option", { value: "", text: `all traced episodes (${list.length})` }));
  for (const t of list.slice().reverse()) {
    sel.append(el("option", { value: t.trace_id, text: `${t.trace_id} · ${t.task_family} · ${t.stage} ${t.iteration} · ${t.completed ? "ok" : "failed"}` }));
  }
  document.body.dataset.traces = String(list.length);
}

function setupTraces() {
  document.getElementById("trace-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = document.getElementById("trace-search").value.trim();
    if (id) openTrace(id);
  });
  document.getElementById("all-traces").addEventListener("change", (ev) => { if (ev.target.value) openTrace(ev.target.value); });
  const id = new URLSearchParams(location.search).get("id");
  if (id) openTrace(id);
}

// ------------------------------------------------------------------------------------------ polling
async function tick() {
  try {
    const st = await getJSON("/api/status");
    showStatus(st);
    const version = `${st.metrics_rows}/${st.traces}/${st.expert}/${st.status}`;
    if (version !== lastVersion) {
      lastVersion = version;
      if (PAGE === "traces") await drawTraceList(); else await drawPage();
    }
  } catch (e) {
    document.getElementById("status").textContent = `dashboard server unreachable (${e.message})`;
  }
}

if (PAGE === "traces") setupTraces();
tick();
setInterval(tick, 3000);
