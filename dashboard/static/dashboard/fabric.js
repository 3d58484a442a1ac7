// The fabric page: the topology by tier, links coloured by live utilisation or by state, a job overlay, and a
// link panel with its history (docs/dashboard.md, topics `fabric` and `queue`).
//
// Drawing is a canvas of our own, not an ECharts graph: with 2,000 nodes and 6,000 links an ECharts graph
// series took ~380 ms to draw and 110-190 ms for every update (each setOption rebuilds the whole graph from
// the arrays), where this canvas repaints in a few ms. Links sit in colour bins (one Path2D each); a delta
// moves only the changed links between bins and rebuilds only those bins' paths, then one animation frame
// repaints the canvas. The DOM is touched only for the summary hooks, the job list (when the running jobs
// change) and the open link panel. ECharts draws the link panel's history chart.
//
// Positions come with the snapshot (x/y per switch and node, from fabric/topology/layout.py, in its units);
// a plain tiered layout stands in when they are absent.
//
// Deep links (the job and report pages link this way): ?job=<id> preselects that job once the queue lists it,
// ?link=<id> opens its panel and ?switch=<id> selects and centres that switch once the fabric snapshot has them.
//
// Test hooks: #fabric-summary's data- attributes and window.__fabric (state(), selectJob(id), setMode(mode),
// openLink(id), linkPoint(id) -> client x/y of a link's middle, fit()).

import { baseOption, makeChart, timeAxis, tipHtml, valueAxis } from "./charts.js";
import { connect } from "./live.js";
import { colourOf, el, labelOf, setData, setText } from "./dom.js";
import { NO_DATA, UTIL_BINS, legendEntry as entry, lineSample, linkBin, sample, utilisationLegend, viridis } from "./linkscale.js";

const root = document.getElementById("fabric-page");
const canvasBox = document.getElementById("fabric-chart");
const summary = document.getElementById("fabric-summary");
const jobSelect = document.getElementById("job-select");
const modeToggle = document.getElementById("mode-toggle");
const legendBox = document.getElementById("fabric-legend");
const panel = document.getElementById("link-panel");
const panelTitle = document.getElementById("link-panel-title");
const panelFacts = document.getElementById("link-panel-facts");
const panelRange = document.getElementById("link-panel-minutes");
const panelNote = document.getElementById("link-panel-note");
const historyBox = document.getElementById("link-history-chart");
const tip = document.getElementById("fabric-tip");
const statusBox = document.getElementById("fabric-status");

// The layout's units (fabric/topology/layout.py defaults): switches at least 48 apart, nodes 12, tiers 120. The
// page scales x and y separately to fill the canvas, and sizes shapes in pixels from those scales, within bounds.
const SWITCH_GAP = 48;
const NODE_GAP = 12;
const MAX_STRETCH = 24; // how much more one axis may be stretched than the other when fitting
const DIM = 0.14; // what is not the selected job's
const HISTORY_REFRESH_MS = 30_000;
const LARGE = 2_000; // links

// Viridis (linkscale.js): on the dark canvas idle links are dark, busy bright.
const UTIL_COLOURS = Array.from({ length: UTIL_BINS }, (_, i) => viridis((i + 0.5) / UTIL_BINS));

const S = {
  switches: new Map(), // "3" -> {id, name, tier, role, hottest, x, y}
  nodes: new Map(), // "7" or "leaf:3" -> {id, hostname, role, state, leaf, gpus, members, storage, hosts, x, y}
  links: [], // {i, id, a, b, capacity_gbps, state, util, errors, ax, ay, bx, by, bin}
  linkById: new Map(),
  nodeLinks: new Map(), // node key -> [link index]
  hostToNode: new Map(), // hostname -> node key (a group's when aggregated and the group lists its hosts)
  aggregated: false,
  jobs: new Map(), // running jobs by id (string)
  jobSig: "",
  job: "",
  hlLinks: new Set(),
  hlNodes: new Set(),
  mode: "util",
  bins: new Map(),
  binOrder: [],
  selected: null, // index of the link in the panel
  selectedId: null,
  seq: { snapshot: null, delta: null, queue: null },
  deltas: 0,
  renderMs: 0,
  renders: 0,
  bounds: null,
  labelWidth: null,
  dpr: 1,
  view: { kx: 1, ky: 1, tx: 0, ty: 0, fitted: false },
  selectedSwitch: null, // from ?switch=: outlined, and centred until the view is fitted again
  centred: false,
};

// What the page's address asks for, each applied once, as soon as the data has it.
const params = new URLSearchParams(window.location.search);
const wanted = { job: params.get("job") || "", link: params.get("link") || "", switch: params.get("switch") || "" };

//
// Bins: one per colour (and dash), so a repaint strokes a couple of dozen paths, not thousands of lines
//

function defineBins() {
  S.bins = new Map();
  const add = (key, style) => S.bins.set(key, { key, members: new Set(), path: null, dash: null, ...style });
  const down = colourOf("link_state", "down");
  if (S.mode === "util") {
    // Thousands of links: hairlines (one device pixel), which software rasterisers draw ~10x faster than wider
    // lines; busy links stand out by brightness, down ones by dashes.
    add("nodata", { colour: NO_DATA, width: 1, dash: [3, 3], alpha: 0.6 });
    for (let i = 0; i < UTIL_BINS; i++) add(`u${i}`, { colour: UTIL_COLOURS[i], width: 1, alpha: 1 });
    add("down", { colour: down, width: 1, dash: [2, 3], alpha: 1 });
  } else {
    add("up", { colour: colourOf("link_state", "up"), width: 1, alpha: 0.35 });
    add("degraded", { colour: colourOf("link_state", "degraded"), width: 2, alpha: 1 });
    add("errors", { colour: colourOf("alert_severity", "warning"), width: 2.2, dash: [6, 3], alpha: 1 });
    add("down", { colour: down, width: 2.2, alpha: 1 });
  }
  S.binOrder = [...S.bins.keys()]; // hot links and problems drawn last, on top
}

function binKey(l) {
  if (S.mode === "util") return linkBin(l);
  if (l.state === "down") return "down";
  if (l.errors) return "errors";
  return l.state === "degraded" ? "degraded" : "up";
}

function rebin(l) {
  const key = binKey(l);
  if (key === l.bin) return;
  const old = S.bins.get(l.bin);
  if (old) {
    old.members.delete(l.i);
    old.path = null;
  }
  const bin = S.bins.get(key);
  bin.members.add(l.i);
  bin.path = null;
  l.bin = key;
}

function rebinAll() {
  defineBins();
  for (const l of S.links) {
    l.bin = null;
    rebin(l);
  }
}

function binPath(bin) {
  if (!bin.path) {
    const p = new Path2D();
    for (const i of bin.members) {
      const l = S.links[i];
      p.moveTo(l.ax, l.ay);
      p.lineTo(l.bx, l.by);
    }
    bin.path = p;
  }
  return bin.path;
}

//
// Positions: the snapshot's x/y; without them, switches in rows by tier and nodes in grids under their leaf
//

function fallbackLayout() {
  const switches = [...S.switches.values()];
  const tiers = [...new Set(switches.map((s) => s.tier ?? 0))].sort((a, b) => b - a);
  const rows = tiers.map((t) => switches.filter((s) => (s.tier ?? 0) === t));
  const under = new Map();
  for (const n of S.nodes.values()) {
    const key = S.switches.has(String(n.leaf)) ? String(n.leaf) : "";
    if (!under.has(key)) under.set(key, []);
    under.get(key).push(n);
  }
  const blockWidth = (list) => Math.max(Math.min(list.length, 8) * 12, 48);
  const leaves = rows.length ? rows[rows.length - 1] : [];
  const blocks = leaves.map((s) => [s, blockWidth(under.get(String(s.id)) || [])]);
  const strays = under.get("") || [];
  if (strays.length) blocks.push([null, blockWidth(strays)]);
  const bottom = blocks.reduce((w, [, b]) => w + b, 0);
  const width = Math.max(bottom, ...rows.map((r) => r.length * 48));
  rows.forEach((row, r) =>
    row.forEach((s, i) => {
      s.x = ((i + 0.5) * width) / row.length;
      s.y = r * 120;
    }),
  );
  const grid = (list, centre, top) =>
    list.forEach((n, i) => {
      n.x = centre + ((i % 8) - (Math.min(list.length, 8) - 1) / 2) * 12;
      n.y = top + Math.floor(i / 8) * 12;
    });
  let start = (width - bottom) / 2;
  for (const [s, w] of blocks) {
    const centre = start + w / 2;
    if (s) s.x = centre;
    grid(s ? under.get(String(s.id)) || [] : strays, centre, (Math.max(rows.length, 1) - 0.5) * 120);
    start += w;
  }
  for (const row of rows.slice(0, -1)) for (const s of row) grid(under.get(String(s.id)) || [], s.x, s.y + 40);
}

function endpoint(ref) {
  if (!Array.isArray(ref)) return null;
  return (ref[0] === "switch" ? S.switches : S.nodes).get(String(ref[1])) || null;
}

//
// Messages (from live.js: a snapshot is the topic's whole state, a delta only what changed)
//

function applySnapshot(data, seq) {
  S.switches = new Map((data.switches || []).map((s) => [String(s.id), { ...s }]));
  S.labelWidth = null; // widest switch name, measured at the next draw
  S.nodes = new Map((data.nodes || []).map((n) => [String(n.id), { ...n }]));
  S.aggregated = Boolean(data.aggregated);
  S.hostToNode = new Map();
  for (const [key, n] of S.nodes) {
    if (n.hostname && n.role !== "group") S.hostToNode.set(n.hostname, key);
    for (const host of n.hosts || []) S.hostToNode.set(host, key);
  }
  const placed = [...S.switches.values(), ...S.nodes.values()];
  if (!placed.every((p) => Number.isFinite(p.x) && Number.isFinite(p.y))) fallbackLayout();
  S.links = [];
  S.linkById = new Map();
  S.nodeLinks = new Map();
  for (const raw of data.links || []) {
    const a = endpoint(raw.a);
    const b = endpoint(raw.b);
    if (!a || !b) continue;
    const l = { ...raw, i: S.links.length, ax: a.x, ay: a.y, bx: b.x, by: b.y, bin: null };
    S.links.push(l);
    S.linkById.set(String(raw.id), l);
    for (const ref of [raw.a, raw.b]) {
      if (ref[0] !== "node") continue;
      const key = String(ref[1]);
      if (!S.nodeLinks.has(key)) S.nodeLinks.set(key, []);
      S.nodeLinks.get(key).push(l.i);
    }
  }
  const previous = S.bounds;
  S.bounds = bounds(placed);
  rebinAll();
  if (S.selectedId !== null) {
    const still = S.linkById.get(String(S.selectedId));
    if (still) {
      S.selected = still.i;
      renderPanelFacts();
    } else closePanel();
  }
  if (!S.view.fitted || !sameBounds(previous, S.bounds)) fit();
  S.seq.snapshot = seq ?? null;
  computeHighlight();
  if (wanted.link && openLink(wanted.link)) wanted.link = "";
  if (wanted.switch && S.switches.has(wanted.switch)) {
    S.selectedSwitch = wanted.switch;
    S.centred = true;
    wanted.switch = "";
    fit();
  }
  invalidate();
}

// False when the delta names something the snapshot did not have: the topology changed, ask for a fresh one.
function applyDelta(data, seq) {
  let known = true;
  for (const [id, change] of Object.entries(data.links || {})) {
    const l = S.linkById.get(id);
    if (!l) {
      known = false;
      continue;
    }
    Object.assign(l, change);
    rebin(l);
    if (S.selected === l.i) renderPanelFacts();
  }
  for (const [id, change] of Object.entries(data.switches || {})) {
    const s = S.switches.get(id);
    if (s) Object.assign(s, change);
    else known = false;
  }
  for (const [id, change] of Object.entries(data.nodes || {})) {
    const n = S.nodes.get(id);
    if (n) Object.assign(n, change);
    else known = false;
  }
  S.seq.delta = seq ?? null;
  S.deltas += 1;
  invalidate();
  return known;
}

function applyQueue(state, seq) {
  // The running jobs are few (hundreds at most): take the store's list whole, redraw the job list only on change.
  S.jobs = new Map((state.running || []).map((j) => [String(j.id), j]));
  S.seq.queue = seq ?? null;
  const sig = [...S.jobs.values()].map((j) => `${j.id}:${j.name}:${j.tenant}:${j.gpus}:${j.shape}`).join("|");
  if (sig !== S.jobSig) {
    S.jobSig = sig;
    renderJobOptions();
  }
  if (S.job && !S.jobs.has(S.job)) selectJob("");
  else {
    computeHighlight();
    invalidate();
  }
  if (wanted.job && S.jobs.has(wanted.job)) {
    selectJob(wanted.job);
    wanted.job = "";
  }
}

//
// Job overlay
//

function renderJobOptions() {
  const current = S.job;
  const jobs = [...S.jobs.values()].sort((a, b) => String(a.name).localeCompare(String(b.name)) || a.id - b.id);
  const options = [new Option(jobs.length ? "All traffic (no job)" : "No running jobs", "")];
  for (const j of jobs) {
    const shape = j.shape || `${j.gpus} GPU${j.gpus === 1 ? "" : "s"}`; // in words: "16 GPUs: 2 nodes x 8"
    options.push(new Option(`${j.name} · ${j.tenant} · ${shape}`, String(j.id)));
  }
  jobSelect.replaceChildren(...options);
  jobSelect.value = S.jobs.has(current) ? current : "";
}

function computeHighlight() {
  S.hlLinks = new Set();
  S.hlNodes = new Set();
  const job = S.job && S.jobs.get(S.job);
  if (!job) return;
  for (const id of job.links || []) {
    const l = S.linkById.get(String(id));
    if (l) S.hlLinks.add(l.i);
  }
  for (const host of job.nodes || []) {
    const key = S.hostToNode.get(host);
    if (key !== undefined) S.hlNodes.add(key);
  }
  if (S.aggregated) {
    // Host links are folded into one per group: the job's traffic uses its groups' folded links.
    for (const key of S.hlNodes) for (const i of S.nodeLinks.get(key) || []) S.hlLinks.add(i);
  }
}

function selectJob(id) {
  S.job = id && S.jobs.has(String(id)) ? String(id) : "";
  if (jobSelect.value !== S.job) jobSelect.value = S.job;
  computeHighlight();
  invalidate();
}

function setMode(mode) {
  S.mode = mode === "state" ? "state" : "util";
  modeToggle.setAttribute("aria-pressed", String(S.mode === "state"));
  setText(modeToggle, S.mode === "state" ? "Colour by utilisation" : "Colour by errors / down");
  rebinAll();
  renderLegend();
  invalidate();
}

//
// Legend: the utilisation scale with its unit, or the link states with the served colours
//

function nodeSample(fill, outline, diamond) {
  return sample(14, (g) => {
    g.fillStyle = fill;
    g.strokeStyle = outline;
    g.lineWidth = 2;
    g.beginPath();
    if (diamond) {
      g.moveTo(7, 1);
      g.lineTo(13, 6);
      g.lineTo(7, 11);
      g.lineTo(1, 6);
      g.closePath();
    } else g.arc(7, 6, 4.5, 0, Math.PI * 2);
    g.fill();
    if (diamond) g.stroke();
  });
}

function renderLegend() {
  const parts = [];
  if (S.mode === "util") {
    const [scale, ...states] = utilisationLegend();
    parts.push(scale, el("span", { class: "legend-note", text: "Switches: their hottest port, same scale" }), ...states);
  } else {
    for (const state of ["up", "degraded", "down"]) {
      parts.push(entry(lineSample(colourOf("link_state", state), []), labelOf("link_state", state)));
    }
    parts.push(entry(lineSample(colourOf("alert_severity", "warning"), [6, 3]), "Error counters growing"));
  }
  const nodes = el("span", { class: "legend-nodes" });
  for (const state of ["up", "drain", "down"]) {
    const colour = colourOf("node_state", state);
    nodes.append(entry(nodeSample(colour, colour, false), `Node ${labelOf("node_state", state).toLowerCase()}`));
  }
  const storage = colourOf("node_role", "storage");
  nodes.append(entry(nodeSample(colourOf("node_state", "up"), storage, true), labelOf("node_role", "storage")));
  parts.push(nodes);
  legendBox.replaceChildren(...parts);
}

//
// Canvas
//

const canvas = el("canvas", {
  class: "fabric-canvas",
  role: "img",
  "aria-label": "Fabric topology: switches by tier, nodes under their leaf, links coloured by utilisation or state",
});
canvasBox.append(canvas);
const ctx = canvas.getContext("2d");
let frame = 0;

function bounds(items) {
  if (!items.length) return null;
  let x0 = Infinity;
  let y0 = Infinity;
  let x1 = -Infinity;
  let y1 = -Infinity;
  for (const p of items) {
    x0 = Math.min(x0, p.x);
    y0 = Math.min(y0, p.y);
    x1 = Math.max(x1, p.x);
    y1 = Math.max(y1, p.y);
  }
  return { x0, y0, x1, y1 };
}

function sameBounds(a, b) {
  return Boolean(a && b && a.x0 === b.x0 && a.y0 === b.y0 && a.x1 === b.x1 && a.y1 === b.y1);
}

function size() {
  // Above LARGE links the backing store stays at one pixel per CSS pixel: a software rasteriser then paints a
  // frame of 6,000 links in ~15 ms instead of 50-130 ms at devicePixelRatio 2.
  const dpr = Math.min(window.devicePixelRatio || 1, S.links.length > LARGE ? 1 : 3);
  S.dpr = dpr;
  const w = canvasBox.clientWidth;
  const h = canvasBox.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  return { w, h, dpr };
}

function fit() {
  const { w, h } = size();
  const b = S.bounds;
  if (!b || !w || !h) return;
  const bw = Math.max(b.x1 - b.x0, SWITCH_GAP);
  const bh = Math.max(b.y1 - b.y0, SWITCH_GAP);
  let kx = Math.max((w - 80) / bw, 0.01);
  let ky = Math.max((h - 56) / bh, 0.01);
  kx = Math.min(kx, ky * MAX_STRETCH);
  ky = Math.min(ky, kx * MAX_STRETCH);
  S.view = { kx, ky, tx: w / 2 - ((b.x0 + b.x1) / 2) * kx, ty: h / 2 - ((b.y0 + b.y1) / 2) * ky, fitted: true };
  const focus = S.centred && S.switches.get(S.selectedSwitch);
  if (focus) {
    const k = clamp(120 / (SWITCH_GAP * kx), 1, 8); // close enough to read the names around it
    S.view = { kx: kx * k, ky: ky * k, tx: w / 2 - focus.x * kx * k, ty: h / 2 - focus.y * ky * k, fitted: true };
  }
  invalidate();
}

function fitAll() {
  S.centred = false;
  fit();
}

function invalidate() {
  if (!frame) frame = window.requestAnimationFrame(draw);
  updateSummary();
}

function clamp(v, lo, hi) {
  return Math.min(Math.max(v, lo), hi);
}

// Shape sizes in CSS pixels for the current zoom.
function sizes() {
  const { kx, ky } = S.view;
  return {
    sw: clamp(SWITCH_GAP * 0.75 * kx, 4, 72),
    sh: clamp(14 * ky, 5, 14),
    r: clamp(NODE_GAP * 0.38 * Math.min(kx, ky), 1.2, 6),
    gw: clamp(SWITCH_GAP * 0.7 * kx, 6, 72),
    gh: clamp(16 * ky, 8, 18),
  };
}

function nodeShape(n) {
  if (n.role === "group" || (n.members || 1) > 1) return "group";
  return n.role === "storage" ? "storage" : "node";
}

function addShape(p, n, shape, z) {
  const x = n.x * S.view.kx + S.view.tx;
  const y = n.y * S.view.ky + S.view.ty;
  if (shape === "group") {
    p.rect(x - z.gw / 2, y - z.gh / 2, z.gw, z.gh);
  } else if (shape === "storage") {
    const r = Math.max(z.r * 1.6, 3);
    p.moveTo(x, y - r);
    p.lineTo(x + r, y);
    p.lineTo(x, y + r);
    p.lineTo(x - r, y);
    p.closePath();
  } else {
    p.moveTo(x + z.r, y);
    p.arc(x, y, z.r, 0, Math.PI * 2);
  }
}

function strokeStyle(bin, widthFactor) {
  const width = bin.width * widthFactor;
  ctx.strokeStyle = bin.colour;
  ctx.lineWidth = width <= 1 ? 1 / S.dpr : width; // a hairline stays one device pixel
  ctx.setLineDash(bin.dash || []);
}

function screenSegment(p, l) {
  const { kx, ky, tx, ty } = S.view;
  p.moveTo(l.ax * kx + tx, l.ay * ky + ty);
  p.lineTo(l.bx * kx + tx, l.by * ky + ty);
}

function draw() {
  frame = 0;
  const t0 = performance.now();
  const { w, h, dpr } = size();
  ctx.setTransform(1, 0, 0, 1, 0, 0);
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  if (!w || !h) return;
  const { kx, ky, tx, ty } = S.view;
  const z = sizes();
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0); // CSS pixels from here on
  const highlighting = Boolean(S.job);
  const dim = highlighting ? DIM : 1;

  // Links: one stroke per bin; the cached world-space path is mapped to the screen natively (addPath).
  const toScreen = new DOMMatrix([kx, 0, 0, ky, tx, ty]);
  for (const key of S.binOrder) {
    const bin = S.bins.get(key);
    if (!bin.members.size) continue;
    const p = new Path2D();
    p.addPath(binPath(bin), toScreen);
    strokeStyle(bin, 1);
    ctx.globalAlpha = bin.alpha * dim;
    ctx.stroke(p);
  }
  // The selected job's links on top, full strength and wider.
  if (highlighting && S.hlLinks.size) {
    ctx.globalAlpha = 1;
    const byBin = new Map();
    for (const i of S.hlLinks) {
      const l = S.links[i];
      if (!byBin.has(l.bin)) byBin.set(l.bin, new Path2D());
      screenSegment(byBin.get(l.bin), l);
    }
    for (const [key, p] of byBin) {
      strokeStyle(S.bins.get(key), 2.2);
      ctx.stroke(p);
    }
  }
  // The link in the panel: a white casing under its own colour.
  if (S.selected !== null && S.links[S.selected]) {
    const l = S.links[S.selected];
    const p = new Path2D();
    screenSegment(p, l);
    ctx.globalAlpha = 1;
    ctx.setLineDash([]);
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = 6;
    ctx.stroke(p);
    strokeStyle(S.bins.get(l.bin), 2.5);
    ctx.stroke(p);
  }
  ctx.setLineDash([]);

  // Nodes: fill = node state; storage nodes are diamonds outlined in the storage colour; groups are boxes.
  const paths = new Map();
  for (const n of S.nodes.values()) {
    const shape = nodeShape(n);
    const key = `${n.state || "up"}|${shape}`;
    if (!paths.has(key)) paths.set(key, { state: n.state || "up", shape, path: new Path2D() });
    addShape(paths.get(key).path, n, shape, z);
  }
  const storage = colourOf("node_role", "storage");
  ctx.lineWidth = 1.5;
  ctx.globalAlpha = highlighting ? DIM * 2 : 1;
  for (const np of paths.values()) {
    const colour = colourOf("node_state", np.state);
    ctx.fillStyle = np.shape === "group" ? "#2b3242" : colour;
    ctx.fill(np.path);
    if (np.shape !== "node") {
      ctx.strokeStyle = np.shape === "storage" ? storage : colour;
      ctx.stroke(np.path);
    }
  }
  if (highlighting && S.hlNodes.size) {
    ctx.globalAlpha = 1;
    const p = new Path2D();
    for (const key of S.hlNodes) {
      const n = S.nodes.get(key);
      if (n) addShape(p, n, nodeShape(n), z);
    }
    ctx.fillStyle = "#ffffff";
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = 2;
    ctx.fill(p);
    ctx.stroke(p);
  }

  // Switches: fill = their hottest port on the utilisation scale.
  ctx.globalAlpha = 1;
  ctx.lineWidth = 1;
  ctx.strokeStyle = "#d8dce4";
  for (const s of S.switches.values()) {
    const x = s.x * kx + tx - z.sw / 2;
    const y = s.y * ky + ty - z.sh / 2;
    ctx.fillStyle = S.mode === "util" ? viridis(s.hottest ?? 0) : "#3a4254";
    ctx.fillRect(x, y, z.sw, z.sh);
    ctx.strokeRect(x, y, z.sw, z.sh);
  }
  const chosen = S.selectedSwitch && S.switches.get(S.selectedSwitch);
  if (chosen) {
    ctx.lineWidth = 3;
    ctx.strokeStyle = "#ffffff";
    ctx.strokeRect(chosen.x * kx + tx - z.sw / 2 - 4, chosen.y * ky + ty - z.sh / 2 - 4, z.sw + 8, z.sh + 8);
  }

  // Labels, only when they fit.
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  ctx.fillStyle = "#e6e9ef";
  if (S.labelWidth === null) {
    S.labelWidth = Math.max(0, ...[...S.switches.values()].map((s) => ctx.measureText(s.name || String(s.id)).width));
  }
  if (SWITCH_GAP * kx >= S.labelWidth + 6) {
    ctx.textBaseline = "top";
    for (const s of S.switches.values()) ctx.fillText(s.name || String(s.id), s.x * kx + tx, s.y * ky + ty + z.sh / 2 + 2);
  }
  if (z.gw >= 24) {
    ctx.textBaseline = "middle";
    for (const n of S.nodes.values()) {
      if (nodeShape(n) !== "group") continue;
      ctx.fillStyle = S.hlNodes.has(String(n.id)) ? "#1d2330" : "#e6e9ef";
      ctx.fillText(`${n.members}${n.storage ? ` ◆${n.storage}` : ""}`, n.x * kx + tx, n.y * ky + ty);
    }
  }
  S.renderMs = performance.now() - t0;
  S.renders += 1;
  updateSummary();
}

//
// Pointer: wheel zooms, drag pans, hover tells, a click on a link opens its panel; double click fits
//

function canvasPoint(ev) {
  const r = canvas.getBoundingClientRect();
  return { x: ev.clientX - r.left, y: ev.clientY - r.top };
}

function segmentDistance(px, py, ax, ay, bx, by) {
  const dx = bx - ax;
  const dy = by - ay;
  const len = dx * dx + dy * dy;
  const t = len ? Math.min(1, Math.max(0, ((px - ax) * dx + (py - ay) * dy) / len)) : 0;
  return Math.hypot(px - (ax + t * dx), py - (ay + t * dy));
}

// What is under a canvas point (CSS pixels): a switch, else the nearest node, else the nearest link within 5 px.
function hit({ x, y }) {
  const { kx, ky, tx, ty } = S.view;
  const z = sizes();
  for (const s of S.switches.values()) {
    if (Math.abs(x - (s.x * kx + tx)) <= z.sw / 2 + 2 && Math.abs(y - (s.y * ky + ty)) <= z.sh / 2 + 2) {
      return { kind: "switch", item: s };
    }
  }
  let best = null;
  let bestD = Infinity;
  for (const n of S.nodes.values()) {
    const dx = Math.abs(x - (n.x * kx + tx));
    const dy = Math.abs(y - (n.y * ky + ty));
    const group = nodeShape(n) === "group";
    const inside = group ? dx <= z.gw / 2 && dy <= z.gh / 2 : Math.hypot(dx, dy) <= Math.max(z.r * 1.6, 4);
    if (inside && Math.hypot(dx, dy) < bestD) {
      best = { kind: "node", item: n };
      bestD = Math.hypot(dx, dy);
    }
  }
  if (best) return best;
  bestD = 5;
  for (const l of S.links) {
    const d = segmentDistance(x, y, l.ax * kx + tx, l.ay * ky + ty, l.bx * kx + tx, l.by * ky + ty);
    if (d <= bestD) {
      best = { kind: "link", item: l };
      bestD = d;
    }
  }
  return best;
}

function pct(v) {
  return v === null || v === undefined ? "no reading" : `${(v * 100).toFixed(1)} %`;
}

function endName(ref) {
  const e = endpoint(ref);
  if (!e) return String(ref && ref[1]);
  return ref[0] === "switch" ? e.name || String(e.id) : e.hostname || String(e.id);
}

function linkName(l) {
  return `${endName(l.a)} ↔ ${endName(l.b)}`;
}

function describe(h) {
  if (h.kind === "switch") {
    const s = h.item;
    return `${s.name} (${s.role || `tier ${s.tier}`}) · hottest port ${pct(s.hottest)}`;
  }
  if (h.kind === "node") {
    const n = h.item;
    if (nodeShape(n) === "group") return `${n.hostname} · ${n.gpus} GPUs${n.storage ? ` · ${n.storage} storage` : ""}`;
    const gpus = n.gpus ? ` · ${n.gpus} GPUs` : "";
    return `${n.hostname} · ${labelOf("node_role", n.role)} · ${labelOf("node_state", n.state)}${gpus}`;
  }
  const l = h.item;
  const errors = l.errors ? " · errors growing" : "";
  return `${linkName(l)} · ${pct(l.util)} of ${l.capacity_gbps} Gb/s · ${labelOf("link_state", l.state)}${errors}`;
}

let drag = null;
let hoverFrame = 0;
let lastMove = null;

canvas.addEventListener(
  "wheel",
  (ev) => {
    ev.preventDefault();
    const m = canvasPoint(ev);
    const k = Math.exp(-ev.deltaY * 0.0015);
    const v = S.view;
    v.tx = m.x - (m.x - v.tx) * k;
    v.ty = m.y - (m.y - v.ty) * k;
    v.kx *= k;
    v.ky *= k;
    invalidate();
  },
  { passive: false },
);
canvas.addEventListener("pointerdown", (ev) => {
  drag = { x: ev.clientX, y: ev.clientY, tx: S.view.tx, ty: S.view.ty, moved: false };
});
window.addEventListener("pointerup", (ev) => {
  if (drag && !drag.moved && ev.target === canvas) {
    const h = hit(canvasPoint(ev));
    if (h && h.kind === "link") openLink(h.item.id);
  }
  drag = null;
});
canvas.addEventListener("pointermove", (ev) => {
  if (drag) {
    const dx = ev.clientX - drag.x;
    const dy = ev.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (drag.moved) {
      S.view.tx = drag.tx + dx;
      S.view.ty = drag.ty + dy;
      invalidate();
    }
    return;
  }
  lastMove = ev;
  if (!hoverFrame) hoverFrame = window.requestAnimationFrame(hover);
});
canvas.addEventListener("pointerleave", () => {
  tip.hidden = true;
});
canvas.addEventListener("dblclick", fitAll);
document.getElementById("fabric-fit").addEventListener("click", fitAll);
new ResizeObserver(() => (S.view.fitted ? fit() : invalidate())).observe(canvasBox);

function hover() {
  hoverFrame = 0;
  if (!lastMove) return;
  const h = hit(canvasPoint(lastMove));
  canvas.classList.toggle("over-link", Boolean(h && h.kind === "link"));
  if (!h) {
    tip.hidden = true;
    return;
  }
  setText(tip, describe(h));
  const r = canvasBox.getBoundingClientRect();
  tip.style.left = `${lastMove.clientX - r.left + 12}px`;
  tip.style.top = `${lastMove.clientY - r.top + 12}px`;
  tip.hidden = false;
}

//
// Link panel: facts from the live state, history from the server
//

let historyChart = null;
let historyTimer = 0;
let historyRequest = 0;

function openLink(id) {
  const l = S.linkById.get(String(id));
  if (!l) return false;
  S.selected = l.i;
  S.selectedId = l.id;
  panel.hidden = false;
  setText(panelTitle, linkName(l));
  renderPanelFacts();
  loadHistory();
  window.clearInterval(historyTimer);
  historyTimer = window.setInterval(loadHistory, HISTORY_REFRESH_MS);
  invalidate();
  return true;
}

function closePanel() {
  panel.hidden = true;
  S.selected = null;
  S.selectedId = null;
  window.clearInterval(historyTimer);
  invalidate();
}

function renderPanelFacts() {
  const l = S.links[S.selected];
  if (!l) return;
  const rows = [
    ["Utilisation", `${pct(l.util)} of link capacity`],
    ["Capacity", `${l.capacity_gbps} Gb/s`],
    ["State", labelOf("link_state", l.state)],
    ["Errors", l.errors ? "counters growing" : "none"],
  ];
  panelFacts.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
}

function loadHistory() {
  const l = S.links[S.selected];
  if (!l) return;
  const request = ++historyRequest;
  if (!/^\d+$/.test(String(l.id))) {
    setText(panelNote, "This line stands for a group's host links (aggregated view): it has no single history.");
    if (historyChart) historyChart.clear();
    return;
  }
  const url = `${root.dataset.historyUrl.replace(/\/0\/history\/$/, `/${l.id}/history/`)}?minutes=${panelRange.value}`;
  setText(panelNote, "Loading history…");
  fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then((data) => request === historyRequest && drawHistory(data))
    .catch((err) => request === historyRequest && setText(panelNote, `History unavailable (${err.message}).`));
}

function drawHistory(data) {
  if (data.link && data.link.label) setText(panelTitle, data.link.label);
  const points = (data.ports || []).reduce((n, p) => n + p.points.length, 0);
  setText(panelNote, points ? "" : "No samples in this span yet.");
  panel.dataset.points = points;
  if (!window.echarts) {
    setText(panelNote, "The chart library did not load.");
    return;
  }
  if (!historyChart) historyChart = makeChart(historyBox);
  const lineColours = [viridis(0.1), viridis(0.65)];
  const series = [];
  const errors = new Map(); // time -> error counter increments of both ports
  (data.ports || []).forEach((port, k) => {
    const name = `end ${port.end}`;
    const colour = lineColours[k % 2];
    const column = (i) => port.points.map((p) => [p[0], p[i]]);
    series.push({ name: `${name} utilisation`, type: "line", showSymbol: false, color: colour, data: column(1) });
    if (port.points.some((p) => p[2] !== p[1])) {
      // Rolled-up points: the busiest sample of each, dashed.
      series.push({
        name: `${name} peak`,
        type: "line",
        showSymbol: false,
        color: colour,
        lineStyle: { type: "dashed", width: 1 },
        data: column(2),
      });
    }
    for (const p of port.points) if (p[3]) errors.set(p[0], (errors.get(p[0]) || 0) + p[3]);
  });
  series.push({
    name: "errors (both ends)",
    type: "bar",
    yAxisIndex: 1,
    color: colourOf("alert_severity", "warning"),
    barMaxWidth: 6,
    data: [...errors.entries()].sort(([a], [b]) => (a < b ? -1 : 1)),
  });
  const base = baseOption();
  historyChart.setOption(
    {
      ...base,
      grid: { left: 44, right: 40, top: 64, bottom: 24 },
      legend: { top: 0, textStyle: { fontSize: 10 } },
      tooltip: {
        ...base.tooltip,
        trigger: "axis",
        formatter: (items) =>
          tipHtml(
            items.length ? new Date(items[0].value[0]).toLocaleString("en-GB") : "",
            items.map((it) => [it.seriesName, it.value[1] == null ? "–" : String(it.value[1]), it.color]),
          ),
      },
      xAxis: timeAxis(),
      yAxis: [
        valueAxis(data.units ? data.units.util : "% of link capacity", { min: 0, max: 100 }),
        valueAxis("errors", { minInterval: 1, splitLine: { show: false } }),
      ],
      series,
    },
    { notMerge: true },
  );
}

document.getElementById("link-panel-close").addEventListener("click", closePanel);
panelRange.addEventListener("change", loadHistory);
jobSelect.addEventListener("change", () => selectJob(jobSelect.value));
modeToggle.addEventListener("click", () => setMode(S.mode === "util" ? "state" : "util"));

//
// Hooks for tests: the hidden summary and window.__fabric
//

function state() {
  return {
    links: S.links.length,
    nodes: S.nodes.size,
    switches: S.switches.size,
    aggregated: S.aggregated,
    mode: S.mode,
    job: S.job,
    jobs: S.jobs.size,
    highlightedLinks: S.hlLinks.size,
    highlightedNodes: S.hlNodes.size,
    selectedLink: S.selectedId,
    selectedSwitch: S.selectedSwitch,
    snapshotSeq: S.seq.snapshot,
    lastDeltaSeq: S.seq.delta,
    queueSeq: S.seq.queue,
    deltas: S.deltas,
    renders: S.renders,
    renderMs: Math.round(S.renderMs * 100) / 100,
  };
}

function updateSummary() {
  const st = state();
  for (const [key, value] of Object.entries(st)) setData(summary, key, value);
  setText(
    statusBox,
    st.snapshotSeq === null && !st.links
      ? "Waiting for the fabric…"
      : `${st.switches} switches · ${st.nodes} ${S.aggregated ? "node groups" : "nodes"} · ${st.links} links`,
  );
}

function linkPoint(id) {
  const l = S.linkById.get(String(id));
  if (!l) return null;
  const r = canvas.getBoundingClientRect();
  return {
    x: r.left + ((l.ax + l.bx) / 2) * S.view.kx + S.view.tx,
    y: r.top + ((l.ay + l.by) / 2) * S.view.ky + S.view.ty,
  };
}

window.__fabric = { state, selectJob, setMode, openLink, closePanel, linkPoint, fit: fitAll };

//
// Live data
//

defineBins();
renderLegend();
updateSummary();
const fabric = connect(root.dataset.wsFabric);
fabric.subscribe("fabric", (event) => {
  if (event.kind === "snapshot") applySnapshot(event.state, event.seq);
  else if (!applyDelta(event.data, event.seq)) fabric.resync();
});
connect(root.dataset.wsQueue).subscribe("queue", (event) => applyQueue(event.state, event.seq));
