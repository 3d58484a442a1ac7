// The fabric page: the topology by tier, links coloured by live utilisation or by state, a job overlay, a search for
// jobs, nodes and switches, the hottest places listed, and a link panel with its history (docs/dashboard.md, topics
// `fabric` and `queue`).
//
// What an operator must see at a glance is where the fabric is hot and which jobs are on it:
// - Parallel links are drawn as one bundle per pair of ends (a leaf's 4 cables to one spine are one line): width =
//   capacity (square root of the bundle's capacity over one link's, 1 to 6 px), colour = load on linkscale.js's
//   square-root viridis (its hottest link; the panel and the tooltip say the mean), idle bundles dim and thin, the
//   hottest drawn last, on top.
// - A change of load shows: a bundle holding a link whose load moved by CHANGE_MIN (5 points of capacity) since it was
//   last marked gets a white outline that fades over CHANGE_MS (30 s); a switch whose hottest port moved, or a node
//   whose hottest host link moved, gets a ring.
// - The hottest switches are named on the canvas with their load (outlined when congested, from 80 %), and listed,
//   with the hottest bundles, beside it (a click centres or opens them).
// - Whatever is under the pointer is named: name, load, capacity, state and the running jobs on it.
// - Blocks of nodes are labelled with their first and last hostname; hostnames show once zoomed in enough.
// - A search box finds a job (by name, tenant or shape), a node or a switch as you type: a job is highlighted, a node
//   or switch outlined and centred.
//
// Drawing is a canvas of our own, not an ECharts graph: with 2,000 nodes and 6,000 links an ECharts graph series took
// ~380 ms to draw and 110-190 ms for every update (each setOption rebuilds the whole graph from the arrays), where
// this canvas repaints in a few ms. Bundles sit in style bins (colour x width; one Path2D each); a delta moves only
// the changed bundles between bins and rebuilds only those bins' paths, then one animation frame repaints. ECharts
// draws the link panel's history chart.
//
// Positions come with the snapshot (x/y per switch and node, from fabric/topology/layout.py, in its units); a plain
// tiered layout stands in when they are absent.
//
// Deep links (the job and report pages link this way): ?job=<id> preselects that job once the queue lists it,
// ?link=<id> opens its panel and ?switch=<id> selects and centres that switch once the fabric snapshot has them.
//
// Test hooks: #fabric-summary's data- attributes and window.__fabric (state(), selectJob(id), setMode(mode),
// openLink(id), linkPoint(id) -> client x/y of a link's middle, pointOf(kind, key) -> client x/y of a switch, node or
// bundle, search(text) -> the matches, fit()).

import { baseOption, makeChart, timeAxis, tipHtml, valueAxis } from "./charts.js";
import { connect } from "./live.js";
import { colourOf, el, labelOf, setData, setText } from "./dom.js";
import {
  IDLE,
  IDLE_BELOW,
  NO_DATA,
  binColour,
  legendEntry as entry,
  lineSample,
  linkBin,
  loadColour,
  sample,
  utilisationLegend,
  viridis,
} from "./linkscale.js";

const root = document.getElementById("fabric-page");
const canvasBox = document.getElementById("fabric-chart");
const summary = document.getElementById("fabric-summary");
const searchInput = document.getElementById("fabric-search");
const searchList = document.getElementById("fabric-search-list");
const jobChip = document.getElementById("job-chip");
const jobChipName = document.getElementById("job-chip-name");
const searchHelp = document.getElementById("fabric-search-help");
const modeToggle = document.getElementById("mode-toggle");
const legendBox = document.getElementById("fabric-legend");
const hotBox = document.getElementById("fabric-hot");
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
const LARGE = 2_000; // bundles
const CHANGE_MIN = 0.05; // a change of load of 5 points of capacity is marked
const CHANGE_MS = 30_000; // for this long, fading
const CONGESTED = 0.8; // a switch port this busy is congested: its switch is outlined
const HOT_LABELS = 6; // switches named on the canvas whatever the zoom (the hottest)
const HOT_LIST = 8; // bundles and switches listed beside the canvas
const SEARCH_MAX = 12;
const HOT_EVERY_MS = 1_000; // the hot list is redrawn at most this often

const S = {
  switches: new Map(), // "3" -> {id, name, tier, role, hottest, x, y}
  nodes: new Map(), // "7" or "leaf:3" -> {id, hostname, role, state, leaf, gpus, members, storage, hosts, x, y}
  links: [], // the snapshot's links: {i, id, a, b, capacity_gbps, state, util, errors, bundle}
  linkById: new Map(),
  bundles: [], // {i, key, a, b, members: [link index], capacity, util, mean, state, errors, ax, ay, bx, by, width, bin}
  bundleByKey: new Map(),
  endBundles: new Map(), // "switch:3" / "node:7" -> [bundle index]
  unitCapacity: 1, // one link's capacity (the commonest): a bundle's width is sqrt(capacity / this)
  hostToNode: new Map(), // hostname -> node key (a group's when aggregated and the group lists its hosts)
  blocks: new Map(), // "b<leaf>" -> nodes under one leaf: {text, short, x0, x1, y0, y1, x, y (their hub)}
  aggregated: false,
  jobs: new Map(), // running jobs by id (string)
  jobsByLink: new Map(), // link id (string) -> [job]
  jobsByHost: new Map(), // hostname -> [job]
  jobSig: "",
  job: "",
  hlBundles: new Set(),
  hlNodes: new Set(),
  mode: "util",
  idleAlpha: 0.5,
  bins: new Map(),
  binOrder: [],
  changes: new Map(), // bundle index -> {at, up}
  switchChanges: new Map(), // switch key -> {at, up}
  nodeChanges: new Map(), // node key -> {at, up}
  hotRuns: [], // the hottest runs of switches: {keys, name, hottest, level, x0, x1, y}, hottest first
  hotSwitches: [], // the first switch of each
  selected: null, // index of the link in the panel
  selectedId: null,
  seq: { snapshot: null, delta: null, queue: null },
  deltas: 0,
  renderMs: 0,
  renders: 0,
  labels: 0, // names drawn in the last frame
  bounds: null,
  labelWidth: null,
  dpr: 1,
  view: { kx: 1, ky: 1, tx: 0, ty: 0, fitted: false },
  selectedSwitch: null, // from ?switch= or the search: outlined, and centred until the view is fitted again
  selectedNode: null, // from the search
  centred: false,
  matches: [],
  active: -1, // the highlighted search match
};

// What the page's address asks for, each applied once, as soon as the data has it.
const params = new URLSearchParams(window.location.search);
const wanted = { job: params.get("job") || "", link: params.get("link") || "", switch: params.get("switch") || "" };

//
// Bundles: the links between the same two ends, drawn as one
//

function endKey(ref) {
  return `${ref[0]}:${ref[1]}`;
}

function bundleKey(link) {
  const a = endKey(link.a);
  const b = endKey(link.b);
  return a < b ? `${a}|${b}` : `${b}|${a}`;
}

// A bundle's load, capacity and state from its links: util = its hottest link (null while none has a reading),
// mean = traffic over capacity, state = down when every link is, degraded when some is down or degraded.
function summarise(b) {
  let capacity = 0;
  let traffic = 0;
  let read = 0;
  let hottest = null;
  let down = 0;
  let degraded = 0;
  let errors = false;
  for (const i of b.members) {
    const l = S.links[i];
    const cap = Number(l.capacity_gbps) || 0;
    capacity += cap;
    if (l.util !== null && l.util !== undefined) {
      hottest = hottest === null ? l.util : Math.max(hottest, l.util);
      traffic += l.util * cap;
      read += cap;
    }
    if (l.state === "down") down += 1;
    else if (l.state === "degraded") degraded += 1;
    errors = errors || Boolean(l.errors);
  }
  b.capacity = capacity;
  b.util = hottest;
  b.mean = read ? traffic / read : hottest;
  b.state = down === b.members.length ? "down" : down || degraded ? "degraded" : "up";
  b.errors = errors;
  b.count = b.members.reduce((n, i) => n + (S.links[i].members || 1), 0); // a folded host link stands for several
}

// A node's load: its hottest host link (null while none has a reading); a group's, its folded host links'.
function nodeLoad(key) {
  let load = null;
  for (const i of S.endBundles.get(`node:${key}`) || []) {
    const u = S.bundles[i].util;
    if (u !== null && u !== undefined) load = load === null ? u : Math.max(load, u);
  }
  return load;
}

function bundleWidth(b) {
  return Math.min(6, Math.max(1, Math.round(Math.sqrt(b.capacity / S.unitCapacity) * 2) / 2));
}

function commonCapacity(links) {
  const counts = new Map();
  for (const l of links) if (!(l.members > 1)) counts.set(l.capacity_gbps, (counts.get(l.capacity_gbps) || 0) + 1);
  let best = 0;
  let n = -1;
  for (const [cap, k] of counts) if (k > n && cap > 0) [best, n] = [cap, k];
  return best || 1;
}

//
// Bins: one per style (colour class x width), so a repaint strokes a few dozen paths, not thousands of lines
//

const COLOUR_RANK = { idle: 0, nodata: 1, up: 0, degraded: 2, errors: 3, down: 99 };

function binRank(colour) {
  if (colour in COLOUR_RANK) return COLOUR_RANK[colour];
  return 2 + Number(colour.slice(1)); // "u<k>": hotter on top
}

function colourClass(b) {
  if (S.mode === "util") return linkBin(b);
  if (b.state === "down") return "down";
  if (b.errors) return "errors";
  return b.state === "degraded" ? "degraded" : "up";
}

function binStyle(colour, width) {
  const down = colourOf("link_state", "down");
  if (S.mode === "util") {
    if (colour === "idle") return { colour: IDLE, width: Math.min(width, 1), alpha: S.idleAlpha, dash: null };
    if (colour === "nodata") return { colour: NO_DATA, width: 1, alpha: 0.6, dash: [3, 3] };
    if (colour === "down") return { colour: down, width: Math.max(width, 1.5), alpha: 1, dash: [2, 3] };
    return { colour: binColour(colour), width, alpha: 1, dash: null };
  }
  if (colour === "up") return { colour: colourOf("link_state", "up"), width, alpha: 0.35, dash: null };
  if (colour === "degraded") {
    return { colour: colourOf("link_state", "degraded"), width: width + 1, alpha: 1, dash: null };
  }
  if (colour === "errors") {
    return { colour: colourOf("alert_severity", "warning"), width: width + 1.2, alpha: 1, dash: [6, 3] };
  }
  return { colour: down, width: width + 1.2, alpha: 1, dash: null };
}

function binOf(b) {
  const colour = colourClass(b);
  const key = `${colour}|${b.width}`;
  let bin = S.bins.get(key);
  if (!bin) {
    bin = { key, colour, rank: binRank(colour), members: new Set(), path: null, ...binStyle(colour, b.width) };
    bin.width0 = b.width;
    S.bins.set(key, bin);
    S.binOrder = [...S.bins.keys()].sort((x, y) => {
      const p = S.bins.get(x);
      const q = S.bins.get(y);
      return p.rank - q.rank || p.width0 - q.width0;
    });
  }
  return bin;
}

function rebin(b) {
  if (b.kind === "branch") return; // not drawn: the node's fill shows its host links' load
  const bin = binOf(b);
  if (bin.key === b.bin) return;
  const old = S.bins.get(b.bin);
  if (old) {
    old.members.delete(b.i);
    old.path = null;
  }
  bin.members.add(b.i);
  bin.path = null;
  b.bin = bin.key;
}

function rebinAll() {
  // Idle bundles recede the more there are: 0.5 up to 800 of them, down to 0.08 (a wall of 10,000 idle lines at 0.5
  // hid the few that carry traffic).
  const idle = S.bundles.reduce((n, b) => n + (b.kind !== "branch" && (b.util ?? 0) < IDLE_BELOW ? 1 : 0), 0);
  S.idleAlpha = clamp(400 / Math.max(idle, 1), 0.08, 0.5);
  S.bins = new Map();
  S.binOrder = [];
  for (const b of S.bundles) {
    b.bin = null;
    rebin(b);
  }
}

function binPath(bin) {
  if (!bin.path) {
    const p = new Path2D();
    for (const i of bin.members) {
      const b = S.bundles[i];
      p.moveTo(b.ax, b.ay);
      p.lineTo(b.bx, b.by);
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
  if (ref[0] === "block") return S.blocks.get(String(ref[1])) || null;
  return (ref[0] === "switch" ? S.switches : S.nodes).get(String(ref[1])) || null;
}

// Natural order of names ("gpu2" before "gpu10").
const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

// "gpu0001–gpu0042": the first and last name of a sorted list (one name alone).
function nameRange(names) {
  if (!names.length) return "";
  return names.length === 1 ? names[0] : `${names[0]}–${names[names.length - 1]}`;
}

// Nodes by the leaf they hang under (not when aggregated): their label, and the hub where their host links meet. A
// host link is drawn in two parts: its switch to the hub of the node's block (a trunk, shared by every host link
// between that switch and that block), then the hub to the node (a branch, shared by the node's host links to that
// block's leaves, e.g. its 8 rails). So 42 servers x 8 rails are 8 trunks and 42 branches, not 336 crossing lines.
function buildBlocks() {
  S.blocks = new Map();
  if (S.aggregated) return;
  let leafRow = -Infinity; // the lowest row of switches
  for (const sw of S.switches.values()) leafRow = Math.max(leafRow, sw.y);
  const byLeaf = new Map();
  for (const [key, n] of S.nodes) {
    const leaf = String(n.leaf ?? "");
    if (!byLeaf.has(leaf)) byLeaf.set(leaf, []);
    byLeaf.get(leaf).push(key);
  }
  for (const [leaf, keys] of byLeaf) {
    const list = keys.map((k) => S.nodes.get(k));
    const names = list.map((n) => n.hostname || String(n.id)).sort(collator.compare);
    let x0 = Infinity;
    let x1 = -Infinity;
    let y0 = Infinity;
    let y1 = -Infinity;
    for (const n of list) {
      x0 = Math.min(x0, n.x);
      x1 = Math.max(x1, n.x);
      y0 = Math.min(y0, n.y);
      y1 = Math.max(y1, n.y);
    }
    const gap = Number.isFinite(leafRow) && leafRow < y0 ? y0 - leafRow : 60;
    const short = nameRange(names);
    const block = { key: `b${leaf}`, text: `${short} (${names.length})`, short, x0, x1, y0, y1 };
    block.x = (x0 + x1) / 2;
    block.y = y0 - Math.min(10, gap * 0.25); // the hub: a bar just above the block, where its trunks end
    S.blocks.set(block.key, block);
    for (const k of keys) S.nodes.get(k).block = block.key;
  }
}

// Where a link is drawn: [bundle key, end a, end b] for each part ("pair": one straight line; a host link off the
// aggregated view: its trunk and its branch).
function parts(raw) {
  const host = raw.a[0] === "node" ? raw.a : raw.b[0] === "node" ? raw.b : null;
  const other = host === raw.a ? raw.b : raw.a;
  const n = host && S.nodes.get(String(host[1]));
  if (!n || !n.block || other[0] !== "switch") return [[bundleKey(raw), raw.a, raw.b]];
  const hub = ["block", n.block];
  return [
    [`trunk|${endKey(other)}|${n.block}`, other, hub],
    [`branch|${n.block}|${endKey(host)}`, hub, host],
  ];
}

//
// Messages (from live.js: a snapshot is the topic's whole state, a delta only what changed)
//

function applySnapshot(data, seq) {
  const started = performance.now();
  const before = S.bundleByKey; // marks and baselines carry over a resync
  const beforeBundles = S.bundles;
  const beforeSwitches = S.switches;
  const beforeNodes = S.nodes;
  const beforeLinks = S.linkById;
  S.switches = new Map((data.switches || []).map((s) => [String(s.id), { ...s }]));
  for (const [key, s] of S.switches) {
    const old = beforeSwitches.get(key);
    s.baseline = old ? old.baseline : (s.hottest ?? 0);
  }
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
  buildBlocks();
  S.links = [];
  S.linkById = new Map();
  S.bundles = [];
  S.bundleByKey = new Map();
  S.endBundles = new Map();
  const changes = new Map();
  for (const raw of data.links || []) {
    const a = endpoint(raw.a);
    const b = endpoint(raw.b);
    if (!a || !b) continue;
    const was = beforeLinks.get(String(raw.id));
    const l = { ...raw, i: S.links.length, bundle: -1, trunk: -1, baseline: was ? was.baseline : (raw.util ?? 0) };
    S.links.push(l);
    S.linkById.set(String(raw.id), l);
    for (const [key, ra, rb] of parts(raw)) {
      let bundle = S.bundleByKey.get(key);
      if (!bundle) {
        const [pa, pb] = [endpoint(ra), endpoint(rb)];
        const kind = key.startsWith("trunk|") ? "trunk" : key.startsWith("branch|") ? "branch" : "pair";
        bundle = { i: S.bundles.length, key, kind, a: ra, b: rb, members: [], ax: pa.x, ay: pa.y, bx: pb.x, by: pb.y,
                   bin: null };  // prettier-ignore
        S.bundles.push(bundle);
        S.bundleByKey.set(key, bundle);
        for (const ref of [ra, rb]) {
          const end = endKey(ref);
          if (!S.endBundles.has(end)) S.endBundles.set(end, []);
          S.endBundles.get(end).push(bundle.i);
        }
      }
      bundle.members.push(l.i);
      if (bundle.kind === "trunk") l.trunk = bundle.i;
      else l.bundle = bundle.i;
    }
  }
  S.unitCapacity = commonCapacity(S.links);
  for (const bundle of S.bundles) {
    summarise(bundle);
    bundle.width = bundleWidth(bundle);
    const old = before.get(bundle.key);
    bundle.baseline = old ? old.baseline : (bundle.util ?? 0);
    const mark = old && S.changes.get(old.i);
    if (mark && beforeBundles[old.i] === old) changes.set(bundle.i, mark);
  }
  S.changes = changes;
  for (const [key, n] of S.nodes) {
    n.load = nodeLoad(key);
    const old = beforeNodes.get(key);
    n.baseline = old ? old.baseline : (n.load ?? 0);
  }
  const previous = S.bounds;
  S.bounds = bounds(placed);
  rebinAll();
  rankHot();
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
    focusSwitch(wanted.switch);
    wanted.switch = "";
  }
  renderHot(true);
  renderLegend(); // what a node's fill means depends on the aggregation
  S.snapshotMs = performance.now() - started;
  S.snapshotAt = performance.now();
  invalidate();
}

// False when the delta names something the snapshot did not have: the topology changed, ask for a fresh one.
function applyDelta(data, seq) {
  let known = true;
  const now = performance.now();
  const touched = new Set();
  for (const [id, change] of Object.entries(data.links || {})) {
    const l = S.linkById.get(id);
    if (!l) {
      known = false;
      continue;
    }
    Object.assign(l, change);
    touched.add(l.bundle);
    if (l.trunk >= 0) touched.add(l.trunk);
    if (S.selected === l.i) renderPanelFacts();
    // A link whose own load moved marks the lines it is drawn in, whatever that does to their hottest link.
    const util = l.util ?? 0;
    if (Math.abs(util - (l.baseline ?? 0)) >= CHANGE_MIN) {
      for (const i of [l.bundle, l.trunk]) {
        if (i >= 0 && S.bundles[i].kind !== "branch") S.changes.set(i, { at: now, up: util > l.baseline });
      }
      l.baseline = util;
    }
  }
  for (const i of touched) {
    const b = S.bundles[i];
    summarise(b);
    rebin(b);
    for (const ref of [b.a, b.b]) {
      const key = String(ref[1]);
      const n = ref[0] === "node" && S.nodes.get(key);
      if (!n) continue;
      n.load = nodeLoad(key);
      if (Math.abs((n.load ?? 0) - n.baseline) >= CHANGE_MIN) {
        S.nodeChanges.set(key, { at: now, up: (n.load ?? 0) > n.baseline });
        n.baseline = n.load ?? 0;
      }
    }
    const util = b.util ?? 0;
    if (b.kind !== "branch" && Math.abs(util - b.baseline) >= CHANGE_MIN) {
      S.changes.set(i, { at: now, up: util > b.baseline });
      b.baseline = util;
    }
  }
  for (const [id, change] of Object.entries(data.switches || {})) {
    const s = S.switches.get(id);
    if (!s) {
      known = false;
      continue;
    }
    Object.assign(s, change);
    const hottest = s.hottest ?? 0;
    if (Math.abs(hottest - s.baseline) >= CHANGE_MIN) {
      S.switchChanges.set(id, { at: now, up: hottest > s.baseline });
      s.baseline = hottest;
    }
  }
  for (const [id, change] of Object.entries(data.nodes || {})) {
    const n = S.nodes.get(id);
    if (n) Object.assign(n, change);
    else known = false;
  }
  S.seq.delta = seq ?? null;
  S.deltas += 1;
  rankHot();
  renderHot(false);
  invalidate();
  return known;
}

function applyQueue(state, seq) {
  // The running jobs are few (hundreds at most): take the store's list whole, index them by link and by host.
  S.jobs = new Map((state.running || []).map((j) => [String(j.id), j]));
  S.jobsByLink = new Map();
  S.jobsByHost = new Map();
  for (const j of S.jobs.values()) {
    for (const id of j.links || []) {
      const key = String(id);
      if (!S.jobsByLink.has(key)) S.jobsByLink.set(key, []);
      S.jobsByLink.get(key).push(j);
    }
    for (const host of j.nodes || []) {
      if (!S.jobsByHost.has(host)) S.jobsByHost.set(host, []);
      S.jobsByHost.get(host).push(j);
    }
  }
  S.seq.queue = seq ?? null;
  const sig = [...S.jobs.values()].map((j) => `${j.id}:${j.name}:${j.tenant}:${j.gpus}:${j.shape}`).join("|");
  if (sig !== S.jobSig) {
    S.jobSig = sig;
    if (document.activeElement === searchInput) runSearch();
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

function computeHighlight() {
  S.hlBundles = new Set();
  S.hlNodes = new Set();
  const links = new Set(); // the job's links drawn: its own, and on the aggregated view its groups' folded ones
  S.hlLinks = 0;
  const job = S.job && S.jobs.get(S.job);
  if (!job) return;
  for (const id of job.links || []) {
    const l = S.linkById.get(String(id));
    if (!l) continue;
    links.add(l.i);
    S.hlBundles.add(l.bundle);
    if (l.trunk >= 0) S.hlBundles.add(l.trunk);
  }
  for (const host of job.nodes || []) {
    const key = S.hostToNode.get(host);
    if (key !== undefined) S.hlNodes.add(key);
  }
  if (S.aggregated) {
    // Host links are folded into one per group: the job's traffic uses its groups' folded links.
    for (const key of S.hlNodes) {
      for (const i of S.endBundles.get(`node:${key}`) || []) {
        S.hlBundles.add(i);
        for (const m of S.bundles[i].members) links.add(m);
      }
    }
  }
  S.hlLinks = links.size;
}

function jobLabel(j) {
  const shape = j.shape || `${j.gpus} GPU${j.gpus === 1 ? "" : "s"}`; // in words: "16 GPUs: 2 nodes x 8"
  return `${j.name} · ${j.tenant} · ${shape}`;
}

function selectJob(id) {
  S.job = id && S.jobs.has(String(id)) ? String(id) : "";
  const job = S.job && S.jobs.get(S.job);
  jobChip.hidden = !job;
  searchHelp.hidden = Boolean(job); // the chip says it
  setText(jobChipName, job ? jobLabel(job) : "");
  if (job && document.activeElement !== searchInput) searchInput.value = job.name;
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
// The hottest places: switches named on the canvas, switches and bundles listed beside it
//

// The hottest switches, as runs: neighbours on one row with the same load (to the whole %) are one run, since the
// leaves of a rail group carry the same traffic ("leaf009–leaf016 34 %" once, not eight labels on top of each other).
function rankHot() {
  const rows = new Map();
  for (const [key, sw] of S.switches) {
    const row = Math.round(sw.y);
    if (!rows.has(row)) rows.set(row, []);
    rows.get(row).push(key);
  }
  const runs = [];
  for (const keys of rows.values()) {
    keys.sort((a, b) => S.switches.get(a).x - S.switches.get(b).x);
    let run = null;
    for (const key of keys) {
      const sw = S.switches.get(key);
      const level = Math.round((sw.hottest ?? 0) * 100);
      if ((sw.hottest ?? 0) < IDLE_BELOW) {
        run = null;
        continue;
      }
      if (run && run.level === level) run.keys.push(key);
      else {
        run = { level, hottest: sw.hottest, keys: [key] };
        runs.push(run);
      }
      run.hottest = Math.max(run.hottest, sw.hottest);
    }
  }
  for (const run of runs) {
    const names = run.keys.map((k) => S.switches.get(k).name || k);
    run.name = nameRange(names);
    run.x0 = S.switches.get(run.keys[0]).x;
    run.x1 = S.switches.get(run.keys[run.keys.length - 1]).x;
    run.y = S.switches.get(run.keys[0]).y;
  }
  runs.sort((a, b) => b.hottest - a.hottest || b.keys.length - a.keys.length || collator.compare(a.name, b.name));
  S.hotRuns = runs.slice(0, HOT_LABELS);
  S.hotSwitches = S.hotRuns.map((r) => r.keys[0]);
}

let hotAt = 0;
let hotTimer = 0;

function renderHot(now) {
  if (!now && performance.now() - hotAt < HOT_EVERY_MS) {
    if (!hotTimer) hotTimer = window.setTimeout(() => renderHot(true), HOT_EVERY_MS);
    return;
  }
  window.clearTimeout(hotTimer);
  hotTimer = 0;
  hotAt = performance.now();
  const items = [];
  for (const run of S.hotRuns.slice(0, Math.ceil(HOT_LIST / 2))) {
    const note = run.keys.length > 1 ? `${run.keys.length} switches, hottest port` : "hottest port";
    items.push(hotItem("switch", run.keys[0], run.name, run.hottest, note));
  }
  const groups = hotBundles(HOT_LIST - items.length);
  for (const g of groups) {
    const bundles = g.bundles.length > 1 ? ` in ${g.bundles.length} bundles` : "";
    const note = `${g.links} link${g.links === 1 ? "" : "s"}${bundles}, the hottest`;
    items.push(hotItem("bundle", g.bundles[0].key, g.name, g.util, note));
  }
  if (!items.length) items.push(el("li", { class: "muted", text: "Nothing carries traffic yet." }));
  hotBox.replaceChildren(...items);
  setData(summary, "hotSwitch", S.hotRuns.length ? S.hotRuns[0].name : "");
  setData(summary, "hotBundle", groups.length ? groups[0].name : "");
}

// The hottest bundles, those with the same load (to the whole %) sharing an end taken together: a rail group's 8
// trunks to one block, a spine's bundles to the leaves of one unit. [{name, util, links, bundles}], hottest first.
function hotBundles(limit) {
  const hot = S.bundles
    .filter((b) => b.bin && (b.util ?? 0) >= IDLE_BELOW && b.state !== "down")
    .sort((a, b) => b.util - a.util || a.key.localeCompare(b.key))
    .slice(0, 200);
  const used = new Set();
  const out = [];
  for (const b of hot) {
    if (out.length >= limit) break;
    if (used.has(b.i)) continue;
    const level = Math.round(b.util * 100);
    const peers = hot.filter((o) => !used.has(o.i) && o !== b && Math.round(o.util * 100) === level);
    let best = { end: null, members: [b] };
    for (const end of [b.a, b.b]) {
      const key = endKey(end);
      const members = [b, ...peers.filter((o) => endKey(o.a) === key || endKey(o.b) === key)];
      if (members.length > best.members.length) best = { end, members };
    }
    for (const m of best.members) used.add(m.i);
    let name = bundleName(b);
    if (best.end) {
      const shared = endKey(best.end);
      const others = best.members.map((m) => endName(endKey(m.a) === shared ? m.b : m.a)).sort(collator.compare);
      const range = nameRange([...new Set(others)]);
      name = best.end[0] === "block" ? `${range} ↔ ${endName(best.end)}` : `${endName(best.end)} ↔ ${range}`;
    }
    const links = best.members.reduce((n, m) => n + m.count, 0);
    out.push({ name, util: b.util, links, bundles: best.members });
  }
  return out;
}

function hotItem(kind, key, name, util, note) {
  const title = note ? `${name}, ${note}` : name;
  const swatch = el("span", { class: "hot-swatch", "aria-hidden": "true" });
  swatch.style.background = loadColour(util); // CSSOM: allowed by the Content-Security-Policy
  return el(
    "li",
    {},
    el(
      "button",
      { type: "button", class: "hot-item", "data-kind": kind, "data-key": key, title },
      swatch,
      el("span", { class: "hot-name", text: name }),
      el("b", { text: pct(util, 0) }),
    ),
  );
}

hotBox.addEventListener("click", (ev) => {
  const button = ev.target.closest("button[data-kind]");
  if (!button) return;
  if (button.dataset.kind === "switch") focusSwitch(button.dataset.key);
  else {
    const b = S.bundleByKey.get(button.dataset.key);
    if (b) openLink(S.links[hottestMember(b)].id);
  }
});

function hottestMember(b) {
  let best = b.members[0];
  for (const i of b.members) if ((S.links[i].util ?? -1) > (S.links[best].util ?? -1)) best = i;
  return best;
}

//
// Search: jobs, nodes and switches by name as you type
//

function candidates() {
  const out = [];
  for (const j of S.jobs.values()) {
    out.push({ kind: "job", id: String(j.id), label: j.name, note: `${j.tenant} · ${j.shape || `${j.gpus} GPUs`}`,
               text: `${j.name} ${j.tenant} ${j.shape || ""}`.toLowerCase() }); // prettier-ignore
  }
  for (const [key, s] of S.switches) {
    const name = s.name || key;
    out.push({ kind: "switch", id: key, label: name, note: s.role || `tier ${s.tier}`, text: name.toLowerCase() });
  }
  for (const [host, key] of S.hostToNode) {
    const n = S.nodes.get(key);
    const note = n && n.role === "group" ? `in ${n.hostname}` : labelOf("node_role", n ? n.role : "compute");
    out.push({ kind: "node", id: key, host, label: host, note, text: host.toLowerCase() });
  }
  return out;
}

function search(text) {
  const q = text.trim().toLowerCase();
  if (!q) return [];
  const rank = { job: 0, switch: 1, node: 2 };
  return candidates()
    .filter((c) => c.text.includes(q))
    .sort((a, b) => {
      const pa = a.label.toLowerCase().startsWith(q) ? 0 : 1;
      const pb = b.label.toLowerCase().startsWith(q) ? 0 : 1;
      return pa - pb || rank[a.kind] - rank[b.kind] || collator.compare(a.label, b.label);
    })
    .slice(0, SEARCH_MAX);
}

const KIND_WORDS = { job: "job", switch: "switch", node: "node" };

function runSearch() {
  S.matches = search(searchInput.value);
  S.active = S.matches.length ? 0 : -1;
  renderMatches();
}

function renderMatches() {
  const open = S.matches.length > 0 && document.activeElement === searchInput;
  searchList.hidden = !open;
  searchInput.setAttribute("aria-expanded", String(open));
  searchList.replaceChildren(
    ...S.matches.map((m, i) =>
      el(
        "li",
        {
          id: `fabric-match-${i}`,
          role: "option",
          class: "search-match",
          "data-kind": m.kind,
          "data-id": m.id,
          "data-index": i,
          "data-testid": "search-match",
          "aria-selected": String(i === S.active),
        },
        el("span", { class: "match-kind", text: KIND_WORDS[m.kind] }),
        el("span", { class: "match-label", text: m.label }),
        el("span", { class: "match-note muted", text: m.note }),
      ),
    ),
  );
  if (S.active >= 0) searchInput.setAttribute("aria-activedescendant", `fabric-match-${S.active}`);
  else searchInput.removeAttribute("aria-activedescendant");
  setData(summary, "matches", S.matches.length);
}

function choose(m) {
  if (!m) return;
  if (m.kind === "job") {
    selectJob(m.id);
    searchInput.value = m.label;
  } else if (m.kind === "switch") {
    focusSwitch(m.id);
    searchInput.value = m.label;
  } else {
    focusNode(m.id);
    searchInput.value = m.host || m.label;
  }
  S.matches = [];
  renderMatches();
}

searchInput.addEventListener("input", runSearch);
searchInput.addEventListener("focus", runSearch);
searchInput.addEventListener("blur", () => window.setTimeout(renderMatches, 150)); // after a click on a match
searchInput.addEventListener("keydown", (ev) => {
  if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
    if (!S.matches.length) return;
    ev.preventDefault();
    S.active = (S.active + (ev.key === "ArrowDown" ? 1 : S.matches.length - 1)) % S.matches.length;
    renderMatches();
  } else if (ev.key === "Enter") {
    ev.preventDefault();
    choose(S.matches[S.active] || S.matches[0]);
  } else if (ev.key === "Escape") {
    S.matches = [];
    renderMatches();
  }
});
searchList.addEventListener("pointerdown", (ev) => {
  const li = ev.target.closest("li[data-index]");
  if (!li) return;
  ev.preventDefault(); // keep the focus in the box
  choose(S.matches[Number(li.dataset.index)]);
});
document.getElementById("job-clear").addEventListener("click", () => {
  selectJob("");
  searchInput.value = "";
  searchInput.focus();
});

function focusSwitch(key) {
  if (!S.switches.has(String(key))) return;
  S.selectedSwitch = String(key);
  S.selectedNode = null;
  S.centred = true;
  fit();
}

function focusNode(key) {
  if (!S.nodes.has(String(key))) return;
  S.selectedNode = String(key);
  S.selectedSwitch = null;
  S.centred = true;
  fit();
}

//
// Legend: the utilisation scale with its unit, or the link states with the served colours
//

function nodeSample(fill, outline, diamond, ring = false) {
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
    } else g.arc(7, 6, 4, 0, Math.PI * 2);
    g.fill();
    if (diamond || ring) g.stroke();
  });
}

function changeSample() {
  return sample(28, (g) => {
    g.strokeStyle = "rgba(255,255,255,0.8)";
    g.lineWidth = 6;
    g.beginPath();
    g.moveTo(3, 6);
    g.lineTo(25, 6);
    g.stroke();
    g.strokeStyle = viridis(0.7);
    g.lineWidth = 2;
    g.stroke();
  });
}

function renderLegend() {
  const parts = [];
  if (S.mode === "util") {
    const [scale, ...states] = utilisationLegend();
    parts.push(scale, ...states);
    parts.push(entry(changeSample(), "Load changed by 5+ points (last 30 s)"));
    const what = S.aggregated ? "Switches" : "Switches and nodes";
    const note = `Width: capacity. ${what}: their hottest port.`;
    parts.push(el("span", { class: "legend-note", text: note }));
  } else {
    for (const state of ["up", "degraded", "down"]) {
      parts.push(entry(lineSample(colourOf("link_state", state), []), labelOf("link_state", state)));
    }
    parts.push(entry(lineSample(colourOf("alert_severity", "warning"), [6, 3]), "Error counters growing"));
  }
  const nodes = el("span", { class: "legend-nodes" });
  const byLoad = S.mode === "util" && !S.aggregated;
  for (const state of ["up", "drain", "down"]) {
    const colour = colourOf("node_state", state);
    const fill = byLoad ? loadColour(0.2) : colour;
    if (byLoad && state === "up") continue; // a node up has no ring
    const label = `Node ${labelOf("node_state", state).toLowerCase()}${byLoad ? " (ring)" : ""}`;
    nodes.append(entry(nodeSample(fill, colour, false, byLoad), label));
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
let fadeTimer = 0;

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
  // Above LARGE bundles the backing store stays at one pixel per CSS pixel: a software rasteriser then paints a
  // frame of 6,000 links in ~15 ms instead of 50-130 ms at devicePixelRatio 2.
  const dpr = Math.min(window.devicePixelRatio || 1, S.bundles.length > LARGE ? 1 : 3);
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
  let ky = Math.max((h - 70) / bh, 0.01);
  kx = Math.min(kx, ky * MAX_STRETCH);
  ky = Math.min(ky, kx * MAX_STRETCH);
  S.view = { kx, ky, tx: w / 2 - ((b.x0 + b.x1) / 2) * kx, ty: h / 2 - 8 - ((b.y0 + b.y1) / 2) * ky, fitted: true };
  const focus = S.centred && (S.switches.get(S.selectedSwitch) || S.nodes.get(S.selectedNode));
  if (focus) {
    const near = S.selectedNode ? 90 / (NODE_GAP * kx) : 120 / (SWITCH_GAP * kx);
    const k = clamp(near, 1, 24); // close enough to read the names around it
    S.view = { kx: kx * k, ky: ky * Math.min(k, 8), tx: 0, ty: 0, fitted: true };
    S.view.tx = w / 2 - focus.x * S.view.kx;
    S.view.ty = h / 2 - focus.y * S.view.ky;
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
    r: clamp(NODE_GAP * 0.42 * Math.min(kx, ky), 2, 6),
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

function strokeBin(bin, extra = 0) {
  const width = bin.width + extra;
  ctx.strokeStyle = bin.colour;
  ctx.lineWidth = width <= 1 ? 1 / S.dpr : width; // a hairline stays one device pixel
  ctx.setLineDash(bin.dash || []);
}

function screenSegment(p, b) {
  const { kx, ky, tx, ty } = S.view;
  p.moveTo(b.ax * kx + tx, b.ay * ky + ty);
  p.lineTo(b.bx * kx + tx, b.by * ky + ty);
}

// A label with a dark backing, so it reads over the links.
function plate(text, x, y, { colour = "#e6e9ef", back = "rgba(21,26,36,0.85)", baseline = "top" } = {}) {
  const w = ctx.measureText(text).width;
  const top = baseline === "top" ? y : y - 13;
  ctx.fillStyle = back;
  ctx.fillRect(x - w / 2 - 3, top - 1, w + 6, 14);
  ctx.fillStyle = colour;
  ctx.textBaseline = "top";
  ctx.fillText(text, x, top);
  S.labels += 1;
}

function fade(mark, now) {
  return mark ? Math.max(0, 1 - (now - mark.at) / CHANGE_MS) : 0;
}

// The marks still fading, as [item, strength] (items: a Map by key); a mark that has faded, or whose item is gone,
// is dropped from `changes`.
function* fading(changes, items, now) {
  for (const [key, mark] of changes) {
    const f = fade(mark, now);
    const item = items.get(key);
    if (f <= 0 || !item) changes.delete(key);
    else yield [item, f];
  }
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
  ctx.lineCap = "butt";
  const highlighting = Boolean(S.job);
  const dim = highlighting ? DIM : 1;
  S.labels = 0;

  // Bundles: one stroke per bin, idle first, the hottest last; the cached world-space path is mapped to the
  // screen natively (addPath).
  const toScreen = new DOMMatrix([kx, 0, 0, ky, tx, ty]);
  for (const key of S.binOrder) {
    const bin = S.bins.get(key);
    if (!bin.members.size) continue;
    const p = new Path2D();
    p.addPath(binPath(bin), toScreen);
    strokeBin(bin);
    ctx.globalAlpha = bin.alpha * dim;
    ctx.stroke(p);
  }
  // A change of load: a fading white outline under the bundle, which is drawn again on top.
  const now = performance.now();
  let marked = 0;
  if (S.mode === "util") {
    for (const [i, mark] of S.changes) {
      const f = fade(mark, now);
      if (f <= 0) {
        S.changes.delete(i);
        continue;
      }
      const b = S.bundles[i];
      if (!b) continue;
      marked += 1;
      const p = new Path2D();
      screenSegment(p, b);
      const bin = S.bins.get(b.bin);
      ctx.setLineDash([]);
      ctx.globalAlpha = (highlighting && !S.hlBundles.has(i) ? DIM : 1) * (0.35 + 0.65 * f);
      ctx.strokeStyle = "#ffffff";
      ctx.lineWidth = b.width + 6; // a halo of 3 px each side
      ctx.stroke(p);
      ctx.globalAlpha = dim;
      strokeBin(bin, 0.5);
      ctx.stroke(p);
    }
  }
  // The selected job's bundles on top, full strength and wider.
  if (highlighting && S.hlBundles.size) {
    ctx.globalAlpha = 1;
    const byBin = new Map();
    for (const i of S.hlBundles) {
      const b = S.bundles[i];
      if (!b.bin) continue; // a branch: its node is highlighted instead
      if (!byBin.has(b.bin)) byBin.set(b.bin, new Path2D());
      screenSegment(byBin.get(b.bin), b);
    }
    for (const [key, p] of byBin) {
      const bin = S.bins.get(key);
      ctx.setLineDash([]);
      ctx.strokeStyle = "#1d2330";
      ctx.lineWidth = bin.width + 3;
      ctx.stroke(p);
      strokeBin(bin, 1.2);
      ctx.stroke(p);
    }
  }
  // The link in the panel (its trunk and branch, for a host link): a white casing under its own colour.
  const open = S.selected !== null && S.links[S.selected];
  for (const i of open ? [open.trunk, open.bundle] : []) {
    const chosen = S.bundles[i];
    if (!chosen || !chosen.bin) continue;
    const p = new Path2D();
    screenSegment(p, chosen);
    ctx.globalAlpha = 1;
    ctx.setLineDash([]);
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = chosen.width + 5;
    ctx.stroke(p);
    strokeBin(S.bins.get(chosen.bin), 1);
    ctx.stroke(p);
  }
  ctx.setLineDash([]);

  // Each block's hub: a bar over its nodes where its trunks end.
  if (S.blocks.size) {
    ctx.globalAlpha = highlighting ? DIM * 2 : 1;
    ctx.strokeStyle = "#8a93a6";
    ctx.lineWidth = 1.5;
    const bars = new Path2D();
    for (const block of S.blocks.values()) {
      const y = block.y * ky + ty;
      bars.moveTo(block.x0 * kx + tx - z.r - 2, y);
      bars.lineTo(block.x1 * kx + tx + z.r + 2, y);
    }
    ctx.stroke(bars);
  }

  // Nodes. Colouring by load, a node is filled with its hottest host link's load (its host links are not drawn one
  // by one: they are the trunks), ringed when drained or down; by state, filled with its state. Storage nodes are
  // diamonds outlined in the storage colour; the groups of the aggregated view are boxes.
  const paths = new Map();
  const byLoad = S.mode === "util" && !S.aggregated;
  for (const n of S.nodes.values()) {
    const shape = nodeShape(n);
    const state = n.state || "up";
    const fill = shape === "group" ? "#2b3242" : byLoad ? (n.load === null ? NO_DATA : loadColour(n.load)) : null;
    const key = `${state}|${shape}|${fill}`;
    if (!paths.has(key)) paths.set(key, { state, shape, fill, path: new Path2D() });
    addShape(paths.get(key).path, n, shape, z);
  }
  const storage = colourOf("node_role", "storage");
  ctx.globalAlpha = highlighting ? DIM * 2 : 1;
  for (const np of paths.values()) {
    const colour = colourOf("node_state", np.state === "mixed" ? "up" : np.state);
    ctx.fillStyle = np.fill || colour;
    ctx.fill(np.path);
    const ring = byLoad && np.shape !== "group" && np.state !== "up";
    if (np.shape !== "node" || ring) {
      ctx.lineWidth = ring ? 2.5 : 1.5;
      ctx.strokeStyle = ring ? colour : np.shape === "storage" ? storage : colour;
      ctx.stroke(np.path);
    }
  }
  // Colouring by state, the host links (not drawn one by one off the aggregated view) ring their node: down, errors
  // growing, degraded.
  if (S.mode === "state" && !S.aggregated) {
    const rings = new Map();
    for (const [key, n] of S.nodes) {
      const own = (S.endBundles.get(`node:${key}`) || []).map((i) => S.bundles[i]);
      const worst = own.some((b) => b.members.some((i) => S.links[i].state === "down"))
        ? "down"
        : own.some((b) => b.errors)
          ? "errors"
          : own.some((b) => b.state === "degraded")
            ? "degraded"
            : "";
      if (!worst) continue;
      if (!rings.has(worst)) rings.set(worst, new Path2D());
      const x = n.x * kx + tx;
      const y = n.y * ky + ty;
      rings.get(worst).moveTo(x + z.r + 2, y);
      rings.get(worst).arc(x, y, z.r + 2, 0, Math.PI * 2);
    }
    ctx.lineWidth = 2;
    for (const [worst, p] of rings) {
      ctx.strokeStyle = worst === "errors" ? colourOf("alert_severity", "warning") : colourOf("link_state", worst);
      ctx.stroke(p);
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
  // A node whose load changed: a fading white ring.
  if (S.mode === "util") {
    const rings = new Path2D();
    let alpha = 0;
    for (const [n, f] of fading(S.nodeChanges, S.nodes, now)) {
      marked += 1;
      alpha = Math.max(alpha, f);
      const x = n.x * kx + tx;
      const y = n.y * ky + ty;
      if (nodeShape(n) === "group") rings.rect(x - z.gw / 2 - 3, y - z.gh / 2 - 3, z.gw + 6, z.gh + 6);
      else {
        rings.moveTo(x + z.r + 3, y);
        rings.arc(x, y, z.r + 3, 0, Math.PI * 2);
      }
    }
    if (alpha) {
      ctx.globalAlpha = (highlighting ? DIM * 2 : 1) * (0.3 + 0.7 * alpha);
      ctx.strokeStyle = "#ffffff";
      ctx.lineWidth = 2;
      ctx.stroke(rings);
    }
  }
  const picked = S.selectedNode && S.nodes.get(S.selectedNode);
  if (picked) {
    ctx.globalAlpha = 1;
    ctx.strokeStyle = "#ffffff";
    ctx.lineWidth = 2.5;
    const p = new Path2D();
    const x = picked.x * kx + tx;
    const y = picked.y * ky + ty;
    if (nodeShape(picked) === "group") p.rect(x - z.gw / 2 - 4, y - z.gh / 2 - 4, z.gw + 8, z.gh + 8);
    else p.arc(x, y, z.r + 5, 0, Math.PI * 2);
    ctx.stroke(p);
  }

  // Switches: fill = their hottest port on the load scale; a ring where the hottest port changed, or is congested.
  ctx.globalAlpha = 1;
  ctx.lineWidth = 1;
  ctx.strokeStyle = "#d8dce4";
  for (const s of S.switches.values()) {
    const x = s.x * kx + tx - z.sw / 2;
    const y = s.y * ky + ty - z.sh / 2;
    ctx.fillStyle = S.mode === "util" ? loadColour(s.hottest ?? 0) : "#3a4254";
    ctx.fillRect(x, y, z.sw, z.sh);
    ctx.strokeRect(x, y, z.sw, z.sh);
  }
  const warning = colourOf("alert_severity", "warning");
  if (S.mode === "util") {
    for (const [s, f] of fading(S.switchChanges, S.switches, now)) {
      marked += 1;
      ctx.globalAlpha = 0.3 + 0.7 * f;
      ctx.strokeStyle = "#ffffff";
      ctx.lineWidth = 2;
      ctx.strokeRect(s.x * kx + tx - z.sw / 2 - 3, s.y * ky + ty - z.sh / 2 - 3, z.sw + 6, z.sh + 6);
    }
    ctx.globalAlpha = 1;
    for (const s of S.switches.values()) {
      if ((s.hottest ?? 0) < CONGESTED) continue;
      ctx.strokeStyle = warning;
      ctx.lineWidth = 2.5;
      ctx.strokeRect(s.x * kx + tx - z.sw / 2 - 5, s.y * ky + ty - z.sh / 2 - 5, z.sw + 10, z.sh + 10);
    }
  }
  const focus = S.selectedSwitch && S.switches.get(S.selectedSwitch);
  if (focus) {
    ctx.lineWidth = 3;
    ctx.strokeStyle = "#ffffff";
    ctx.strokeRect(focus.x * kx + tx - z.sw / 2 - 4, focus.y * ky + ty - z.sh / 2 - 4, z.sw + 8, z.sh + 8);
  }
  ctx.globalAlpha = 1;

  // Labels: every switch name when they fit; else the hottest switches with their load, whatever the zoom.
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  ctx.fillStyle = "#e6e9ef";
  if (S.labelWidth === null) {
    S.labelWidth = Math.max(0, ...[...S.switches.values()].map((s) => ctx.measureText(s.name || String(s.id)).width));
  }
  // The hottest runs first, each where it does not cover another's label; then every name, where names fit.
  const taken = [];
  const free = (x0, x1, y0) => !taken.some((t) => x0 < t.x1 && t.x0 < x1 && y0 < t.y1 && t.y0 < y0 + 14);
  const named = new Set();
  ctx.font = "bold 11px system-ui, sans-serif";
  for (const run of S.mode === "util" ? S.hotRuns : []) {
    const text = `${run.name} ${pct(run.hottest, 0)}`;
    const half = ctx.measureText(text).width / 2 + 3;
    const x = clamp(((run.x0 + run.x1) / 2) * kx + tx, half + 2, w - half - 2);
    const y = run.y * ky + ty + z.sh / 2 + 2;
    if (!free(x - half, x + half, y)) continue;
    taken.push({ x0: x - half, x1: x + half, y0: y, y1: y + 14 });
    plate(text, x, y, { colour: run.hottest >= CONGESTED ? warning : "#fde725" });
    for (const key of run.keys) named.add(key);
  }
  ctx.font = "11px system-ui, sans-serif";
  if (SWITCH_GAP * kx >= S.labelWidth + 6) {
    ctx.textBaseline = "top";
    ctx.fillStyle = "#e6e9ef";
    for (const [key, sw] of S.switches) {
      if (named.has(key)) continue;
      const x = sw.x * kx + tx;
      const y = sw.y * ky + ty + z.sh / 2 + 2;
      const half = ctx.measureText(sw.name || key).width / 2;
      if (!free(x - half, x + half, y)) continue;
      ctx.fillText(sw.name || String(sw.id), x, y);
      S.labels += 1;
    }
  }
  ctx.font = "11px system-ui, sans-serif";
  // Nodes: a block's first and last hostname under it; every hostname once they fit.
  const hostWidth = S.nodes.size && !S.aggregated ? ctx.measureText("gpu00000").width : Infinity;
  if (NODE_GAP * kx >= hostWidth + 4) {
    for (const n of S.nodes.values()) {
      ctx.fillStyle = "#c9ced8";
      ctx.textBaseline = "top";
      ctx.fillText(n.hostname || String(n.id), n.x * kx + tx, n.y * ky + ty + z.r + 2);
      S.labels += 1;
    }
  } else {
    for (const block of S.blocks.values()) {
      const y = block.y1 * ky + ty + z.r + 4;
      for (const text of [block.text, block.short]) {
        const half = ctx.measureText(text).width / 2 + 2;
        const x = clamp(((block.x0 + block.x1) / 2) * kx + tx, half, w - half);
        if (!free(x - half, x + half, y)) continue;
        taken.push({ x0: x - half, x1: x + half, y0: y, y1: y + 14 });
        ctx.fillStyle = "#9aa3b5";
        ctx.textBaseline = "top";
        ctx.fillText(text, x, y);
        S.labels += 1;
        break;
      }
    }
  }
  if (z.gw >= 24) {
    ctx.textBaseline = "middle";
    for (const n of S.nodes.values()) {
      if (nodeShape(n) !== "group") continue;
      ctx.fillStyle = S.hlNodes.has(String(n.id)) ? "#1d2330" : "#e6e9ef";
      ctx.fillText(`${n.members}${n.storage ? ` ◆${n.storage}` : ""}`, n.x * kx + tx, n.y * ky + ty);
    }
  }
  S.marked = marked;
  S.renderMs = performance.now() - t0;
  if (!S.firstDrawAt && S.bundles.length) S.firstDrawAt = performance.now();
  S.renders += 1;
  updateSummary();
  // Marks fade: repaint a few times a second while any is showing.
  window.clearTimeout(fadeTimer);
  if (marked) fadeTimer = window.setTimeout(invalidate, S.bundles.length > LARGE ? 500 : 250);
}

//
// Pointer: wheel zooms, drag pans, hover names what is under it, a click on a link opens its panel; double click fits
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

// What is under a canvas point (CSS pixels): a switch, else the nearest node, else the nearest bundle within reach.
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
  bestD = Infinity;
  for (const b of S.bundles) {
    if (!b.bin) continue; // not drawn
    const d = segmentDistance(x, y, b.ax * kx + tx, b.ay * ky + ty, b.bx * kx + tx, b.by * ky + ty);
    const reach = Math.max(5, b.width / 2 + 3);
    // Among bundles within reach, the nearest; at equal distance the hotter (it is drawn on top).
    if (d <= reach && (d < bestD - 0.5 || (Math.abs(d - bestD) <= 0.5 && (b.util ?? -1) > (best.item.util ?? -1)))) {
      best = { kind: "bundle", item: b };
      bestD = d;
    }
  }
  return best;
}

function pct(v, digits = 1) {
  return v === null || v === undefined ? "no reading" : `${(v * 100).toFixed(digits)} %`;
}

function endName(ref) {
  const e = endpoint(ref);
  if (!e) return String(ref && ref[1]);
  if (ref[0] === "block") return e.short;
  if (ref[0] === "switch") return e.name || String(e.id);
  if (nodeShape(e) === "group" && (e.hosts || []).length) return nameRange([...e.hosts].sort(collator.compare));
  return e.hostname || String(e.id);
}

function bundleName(b) {
  if (b.kind === "branch") {
    // A node's host links to its block's leaves: "gpu0043 ↔ leaf009–leaf016".
    const leaves = b.members.map((i) => {
      const l = S.links[i];
      return endName(l.a[0] === "switch" ? l.a : l.b);
    });
    return `${endName(b.b)} ↔ ${nameRange([...new Set(leaves)].sort(collator.compare))}`;
  }
  return `${endName(b.a)} ↔ ${endName(b.b)}`;
}

function linkName(l) {
  return `${endName(l.a)} ↔ ${endName(l.b)}`;
}

function gbps(v) {
  return `${Number(v).toLocaleString("en-GB", { maximumFractionDigits: 1 })} Gb/s`;
}

// "train-3, train-7 and 2 more", the running jobs of a list (each once).
function jobNames(jobs) {
  const names = [...new Map(jobs.map((j) => [j.id, j.name])).values()].sort(collator.compare);
  if (!names.length) return "none";
  return names.length <= 4 ? names.join(", ") : `${names.slice(0, 4).join(", ")} and ${names.length - 4} more`;
}

function jobsOfBundle(b) {
  const jobs = b.members.flatMap((i) => S.jobsByLink.get(String(S.links[i].id)) || []);
  for (const ref of [b.a, b.b]) {
    const n = ref[0] === "node" && S.nodes.get(String(ref[1]));
    if (n && S.aggregated) for (const host of n.hosts || []) jobs.push(...(S.jobsByHost.get(host) || []));
  }
  return jobs;
}

function jobsOfNode(n) {
  const hosts = nodeShape(n) === "group" ? n.hosts || [] : [n.hostname];
  return hosts.flatMap((host) => S.jobsByHost.get(host) || []);
}

function jobsOfSwitch(key) {
  return (S.endBundles.get(`switch:${key}`) || []).flatMap((i) => jobsOfBundle(S.bundles[i]));
}

// What the tooltip says: a title and rows of [what, value].
function describe(h) {
  if (h.kind === "switch") {
    const s = h.item;
    const key = String(s.id);
    const bundles = (S.endBundles.get(`switch:${key}`) || []).map((i) => S.bundles[i]);
    const links = bundles.reduce((n, b) => n + b.count, 0);
    const capacity = bundles.reduce((n, b) => n + b.capacity, 0);
    const traffic = bundles.reduce((n, b) => n + (b.mean ?? 0) * b.capacity, 0);
    return {
      title: s.name || key,
      rows: [
        ["Role", s.role || `tier ${s.tier}`],
        ["Hottest port", pct(s.hottest)],
        ["Load, all its links", capacity ? `${pct(traffic / capacity)} of ${gbps(capacity)}` : "no links"],
        ["Links", `${links} to ${bundles.length} neighbours`],
        ["Jobs through it", jobNames(jobsOfSwitch(key))],
      ],
    };
  }
  if (h.kind === "node") {
    const n = h.item;
    const key = String(n.id);
    const own = (S.endBundles.get(`node:${key}`) || []).map((i) => S.bundles[i]);
    const hottest = own.reduce((m, b) => (b.util === null ? m : Math.max(m ?? 0, b.util)), null);
    if (nodeShape(n) === "group") {
      const states = Object.entries(n.states || {}).map(([st, k]) => `${k} ${labelOf("node_state", st).toLowerCase()}`);
      return {
        title: n.hostname,
        rows: [
          ["GPUs", `${n.gpus}${n.storage ? ` · ${n.storage} storage` : ""}`],
          ["Nodes", states.join(", ") || String(n.members)],
          ["Hottest host link", pct(hottest)],
          ["Jobs", jobNames(jobsOfNode(n))],
        ],
      };
    }
    return {
      title: n.hostname || key,
      rows: [
        ["Node", [labelOf("node_role", n.role), labelOf("node_state", n.state), n.gpus ? `${n.gpus} GPUs` : ""]
          .filter(Boolean)
          .join(" · ")],
        ["Hottest host link", pct(hottest)],
        ["Host links", `${own.reduce((k, b) => k + b.count, 0)}`],
        ["Jobs", jobNames(jobsOfNode(n))],
      ],
    };
  }
  const b = h.item;
  const each = b.count > 1 ? `${b.count} links, ${gbps(b.capacity)}` : gbps(b.capacity);
  const load = b.count > 1 ? `hottest ${pct(b.util)}, mean ${pct(b.mean)}` : pct(b.util);
  return {
    title: bundleName(b),
    rows: [
      ["Load", load],
      ["Capacity", each],
      ["State", `${labelOf("link_state", b.state)}${b.errors ? " · errors growing" : ""}`],
      ["Jobs", jobNames(jobsOfBundle(b))],
    ],
  };
}

function renderTip(d) {
  const rows = d.rows.map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: v })));
  tip.replaceChildren(el("div", { class: "tip-title", text: d.title }), el("table", {}, ...rows));
  setData(summary, "hover", d.title);
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
    if (h && h.kind === "bundle") openLink(S.links[hottestMember(h.item)].id);
    else if (h && h.kind === "node") {
      const own = (S.endBundles.get(`node:${h.item.id}`) || []).map((i) => S.bundles[i]);
      const hottest = own.sort((p, q) => (q.util ?? -1) - (p.util ?? -1))[0];
      if (hottest) openLink(S.links[hottestMember(hottest)].id);
    }
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
document.getElementById("fabric-fit").addEventListener("click", () => {
  S.selectedSwitch = null;
  S.selectedNode = null;
  fitAll();
});
new ResizeObserver(() => (S.view.fitted ? fit() : invalidate())).observe(canvasBox);

function hover() {
  hoverFrame = 0;
  if (!lastMove) return;
  const h = hit(canvasPoint(lastMove));
  canvas.classList.toggle("over-link", Boolean(h && h.kind === "bundle"));
  if (!h) {
    tip.hidden = true;
    return;
  }
  renderTip(describe(h));
  const r = canvasBox.getBoundingClientRect();
  const x = lastMove.clientX - r.left + 14;
  const y = lastMove.clientY - r.top + 14;
  tip.hidden = false;
  // Inside the canvas: to the left of the pointer near the right edge, above it near the bottom.
  tip.style.left = `${x + tip.offsetWidth > r.width ? Math.max(0, x - 28 - tip.offsetWidth) : x}px`;
  tip.style.top = `${y + tip.offsetHeight > r.height ? Math.max(0, y - 28 - tip.offsetHeight) : y}px`;
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
  const b = S.bundles[l.bundle];
  const rows = [
    ["Utilisation", `${pct(l.util)} of link capacity`],
    ["Capacity", gbps(l.capacity_gbps)],
    ["State", labelOf("link_state", l.state)],
    ["Errors", l.errors ? "counters growing" : "none"],
  ];
  if (b && b.members.length > 1) {
    const load = `hottest ${pct(b.util)}, mean ${pct(b.mean)}`;
    rows.push(["Bundle", `${b.count} links between these ends, ${gbps(b.capacity)}: ${load}`]);
  }
  rows.push(["Jobs on it", jobNames(S.jobsByLink.get(String(l.id)) || [])]);
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
modeToggle.addEventListener("click", () => setMode(S.mode === "util" ? "state" : "util"));

//
// Hooks for tests: the hidden summary and window.__fabric
//

function state() {
  return {
    links: S.links.length,
    bundles: S.bundles.length,
    nodes: S.nodes.size,
    switches: S.switches.size,
    aggregated: S.aggregated,
    mode: S.mode,
    job: S.job,
    jobs: S.jobs.size,
    highlightedLinks: S.hlLinks || 0,
    highlightedBundles: S.hlBundles.size,
    highlightedNodes: S.hlNodes.size,
    selectedLink: S.selectedId,
    selectedSwitch: S.selectedSwitch,
    selectedNode: S.selectedNode,
    changed: S.changes.size + S.switchChanges.size + S.nodeChanges.size,
    marked: S.marked || 0,
    labels: S.labels,
    snapshotSeq: S.seq.snapshot,
    lastDeltaSeq: S.seq.delta,
    queueSeq: S.seq.queue,
    deltas: S.deltas,
    renders: S.renders,
    renderMs: Math.round(S.renderMs * 100) / 100,
    snapshotMs: Math.round((S.snapshotMs || 0) * 100) / 100, // taking a snapshot in (bundles, bins, ranks)
    firstDrawAt: Math.round(S.firstDrawAt || 0), // ms after the page started, when the first snapshot was drawn
  };
}

function updateSummary() {
  const st = state();
  for (const [key, value] of Object.entries(st)) setData(summary, key, value);
  const counts = `${st.switches} switches · ${st.nodes} ${S.aggregated ? "node groups" : "nodes"}`;
  setText(
    statusBox,
    st.snapshotSeq === null && !st.links
      ? "Waiting for the fabric…"
      : `${counts} · ${st.links} links in ${st.bundles} bundles`,
  );
}

function linkPoint(id) {
  const l = S.linkById.get(String(id));
  if (!l) return null;
  const b = S.bundles[l.bundle];
  const r = canvas.getBoundingClientRect();
  return {
    x: r.left + ((b.ax + b.bx) / 2) * S.view.kx + S.view.tx,
    y: r.top + ((b.ay + b.by) / 2) * S.view.ky + S.view.ty,
  };
}

// The client x/y of a switch or node (by key) or of the middle of a bundle (by key), as drawn now.
function pointOf(kind, key) {
  const item = kind === "bundle" ? S.bundleByKey.get(key) : (kind === "switch" ? S.switches : S.nodes).get(String(key));
  if (!item) return null;
  const r = canvas.getBoundingClientRect();
  const [x, y] = kind === "bundle" ? [(item.ax + item.bx) / 2, (item.ay + item.by) / 2] : [item.x, item.y];
  return { x: r.left + x * S.view.kx + S.view.tx, y: r.top + y * S.view.ky + S.view.ty };
}

window.__fabric = { state, selectJob, setMode, openLink, closePanel, linkPoint, pointOf, search, fit: fitAll };

//
// Live data
//

renderLegend();
updateSummary();
const fabric = connect(root.dataset.wsFabric);
fabric.subscribe("fabric", (event) => {
  if (event.kind === "snapshot") applySnapshot(event.state, event.seq);
  else if (!applyDelta(event.data, event.seq)) fabric.resync();
});
connect(root.dataset.wsQueue).subscribe("queue", (event) => applyQueue(event.state, event.seq));
