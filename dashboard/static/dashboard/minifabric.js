// A job's placement drawn on a small fabric view (the job page): only its subgraph, i.e. its nodes (or, on an
// aggregated fabric, the groups they belong to), the switches its links touch, and those links, coloured by live
// utilisation on the fabric page's scale (linkscale.js: viridis on a square root; idle links dim, down links dashed,
// links with no reading grey).
//
// Inputs (docs/dashboard.md): the queue socket's `queue` topic (the job's running entry: `nodes` hostnames and
// `links` ids) and the fabric socket's `fabric` topic (snapshot x/y positions, re-scaled to the small box). The
// fabric socket is opened only once the job is placed. A fabric delta updates the colour of the subgraph's
// changed links only (their objects are live.js's store entries); one animation frame then repaints the canvas.
//
//   import { miniFabric } from "./minifabric.js";
//   miniFabric(document.getElementById("job-fabric"), { jobId: "12", wsQueue, wsFabric, fabricUrl });
//
// The root holds [data-mini=view] (the canvas box), [data-mini=empty], [data-mini=legend] and a hidden
// [data-mini=summary] whose data- attributes are the test hooks (state, nodes, links, switches, groups, hosts,
// colours, utilMax, linkUpdates, snapshots, renders, labels, overlaps: names drawn, and names another's shape or name
// covers).

import { connect } from "./live.js";
import { colourOf, el, labelOf, setData, setText } from "./dom.js";
import { IDLE, NO_DATA, binColour, linkBin, loadColour, utilisationLegend } from "./linkscale.js";

const BACKGROUND = "#151a24";
const GROUP_FILL = "#2b3242";
const SWITCH_GAP = 48; // the layout's units (fabric/topology/layout.py)
const MAX_STRETCH = 6;

function binStyle(bin) {
  if (bin === "down") return { colour: colourOf("link_state", "down"), dash: [4, 3] };
  if (bin === "nodata") return { colour: NO_DATA, dash: [3, 3] };
  if (bin === "idle") return { colour: IDLE, dash: [] };
  return { colour: binColour(bin), dash: [] };
}

function pct(v) {
  return v === null || v === undefined ? "no reading" : `${(v * 100).toFixed(1)} %`;
}

// A short, stable digest of the links' colours (a test hook: it changes when any link changes colour).
function digest(text) {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16);
}

export function miniFabric(root, { jobId, wsQueue, wsFabric, fabricUrl = "" }) {
  const box = root.querySelector("[data-mini=view]");
  const empty = root.querySelector("[data-mini=empty]");
  const legendBox = root.querySelector("[data-mini=legend]");
  const summary = root.querySelector("[data-mini=summary]");
  const canvas = el("canvas", {
    class: "minifabric-canvas",
    role: "img",
    "aria-label": "The job's part of the fabric: its nodes, and the switches and links its traffic uses",
  });
  const tip = el("div", { class: "fabric-tip", role: "tooltip", hidden: true });
  box.append(canvas, tip);
  const ctx = canvas.getContext("2d");

  const M = {
    entry: undefined, // the job's queue entry {list, job}; null once it left the queue; undefined before a snapshot
    sig: "",
    fabric: null, // live.js's fabric store
    fabricSocket: null,
    hostToNode: new Map(), // hostname -> node key (a group's on an aggregated fabric)
    nodeLinks: new Map(), // node key -> [link ids]
    // The subgraph: entries point at the store's objects, which live.js keeps current.
    switches: new Map(),
    nodes: new Map(), // key -> {ref, hosts: how many of the job's hosts it stands for}
    links: new Map(), // id -> {ref, bin}
    state: "waiting",
    linkUpdates: 0,
    snapshots: 0,
    renders: 0,
    labels: 0, // names drawn
    overlaps: 0, // names covered by another's shape or name
    view: null,
  };

  //
  // The subgraph
  //

  function indexFabric() {
    M.hostToNode = new Map();
    M.nodeLinks = new Map();
    for (const n of M.fabric.nodes) {
      const key = String(n.id);
      if (n.hostname && n.role !== "group") M.hostToNode.set(n.hostname, key);
      for (const host of n.hosts || []) M.hostToNode.set(host, key);
    }
    for (const l of M.fabric.links) {
      for (const ref of [l.a, l.b]) {
        if (!Array.isArray(ref) || ref[0] !== "node") continue;
        const key = String(ref[1]);
        if (!M.nodeLinks.has(key)) M.nodeLinks.set(key, []);
        M.nodeLinks.get(key).push(String(l.id));
      }
    }
  }

  function endpoint(ref) {
    if (!Array.isArray(ref) || !M.fabric) return null;
    return (ref[0] === "switch" ? M.fabric.byId.switches : M.fabric.byId.nodes).get(String(ref[1])) || null;
  }

  function rebuild() {
    M.switches = new Map();
    M.nodes = new Map();
    M.links = new Map();
    const entry = M.entry;
    const job = entry && entry.job;
    if (entry === undefined) return show("waiting", "Waiting for live data…");
    if (!entry) return show("gone", "No placement to draw: the job is neither queued nor running.");
    if (entry.list === "pending") return show("pending", "Not placed yet: the job waits in the queue.");
    if (!(job.nodes || []).length) return show("pending", "Not placed yet.");
    if (!M.fabricSocket) {
      M.fabricSocket = connect(wsFabric);
      M.fabricSocket.subscribe("fabric", onFabric); // a snapshot at once if the store has one
    }
    if (!M.fabric) return show("loading", "Waiting for the fabric…");

    for (const host of job.nodes) {
      const key = M.hostToNode.get(host);
      const n = key !== undefined && M.fabric.byId.nodes.get(key);
      if (!n) continue;
      if (!M.nodes.has(key)) M.nodes.set(key, { ref: n, hosts: 0 });
      M.nodes.get(key).hosts += 1;
    }
    const ids = new Set((job.links || []).map(String));
    // Aggregated: the host links are folded into one per group and switch, so take the groups' folded links.
    if (M.fabric.aggregated) for (const key of M.nodes.keys()) for (const id of M.nodeLinks.get(key) || []) ids.add(id);
    for (const id of ids) {
      const l = M.fabric.byId.links.get(id);
      if (!l) continue; // a host link folded away (aggregated), or gone
      const ends = [l.a, l.b].map((ref) => [ref, endpoint(ref)]);
      if (ends.some(([, e]) => !e)) continue;
      for (const [ref, e] of ends) {
        const key = String(ref[1]);
        if (ref[0] === "switch") M.switches.set(key, e);
        else if (!M.nodes.has(key)) M.nodes.set(key, { ref: e, hosts: 0 });
      }
      M.links.set(id, { ref: l, bin: linkBin(l) });
    }
    if (!M.nodes.size) return show("unknown", "Its nodes are not on the fabric's map.");
    layout();
    return show("placed", "");
  }

  function show(state, message) {
    M.state = state;
    setText(empty, message);
    empty.hidden = state === "placed";
    box.hidden = state !== "placed";
    legendBox.hidden = state !== "placed";
    if (state === "placed") invalidate();
    updateSummary();
  }

  //
  // Positions: the snapshot's x/y (a tiered stand-in without them), re-scaled to the box
  //

  function layout() {
    const switches = [...M.switches.values()];
    const nodes = [...M.nodes.values()].map((n) => n.ref);
    const all = [...switches, ...nodes];
    const pos = new Map();
    if (all.every((p) => Number.isFinite(p.x) && Number.isFinite(p.y))) {
      for (const p of all) pos.set(p, { x: p.x, y: p.y });
    } else {
      const tiers = [...new Set(switches.map((s) => s.tier ?? 0))].sort((a, b) => b - a);
      const rows = [...tiers.map((t) => switches.filter((s) => (s.tier ?? 0) === t)), nodes];
      const width = Math.max(...rows.map((r) => r.length)) * SWITCH_GAP;
      rows.forEach((row, r) => row.forEach((p, i) => pos.set(p, { x: ((i + 0.5) * width) / row.length, y: r * 120 })));
    }
    let x0 = Infinity;
    let y0 = Infinity;
    let x1 = -Infinity;
    let y1 = -Infinity;
    for (const { x, y } of pos.values()) {
      x0 = Math.min(x0, x);
      y0 = Math.min(y0, y);
      x1 = Math.max(x1, x);
      y1 = Math.max(y1, y);
    }
    M.view = { pos, x0, y0, x1, y1 };
  }

  function size() {
    const dpr = Math.min(window.devicePixelRatio || 1, 3);
    const w = box.clientWidth;
    const h = box.clientHeight;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    return { w, h, dpr };
  }

  // Screen positions (CSS pixels) of the subgraph's switches and nodes: the layout's x/y scaled to the box, then
  // each row (same y) spread where neighbours crowd (at least `want` px apart, in their order, around where they were)
  // and squeezed back into the box if that makes it too wide. Returns the positions and each row's smallest gap.
  function project(w, h) {
    const v = M.view;
    const padX = 40;
    const padTop = 26; // switch labels above
    const padBottom = 38; // node labels below: on two staggered lines when one is too narrow
    const bw = Math.max(v.x1 - v.x0, SWITCH_GAP);
    const bh = Math.max(v.y1 - v.y0, SWITCH_GAP);
    let kx = Math.max((w - 2 * padX) / bw, 0.01);
    let ky = Math.max((h - padTop - padBottom) / bh, 0.01);
    kx = Math.min(kx, ky * MAX_STRETCH);
    ky = Math.min(ky, kx * MAX_STRETCH);
    const rows = new Map(); // screen y -> [[item, x, y]]
    const switches = new Set(M.switches.values());
    // The job's nodes all go in one row, at the lowest node's height: the layout stacks a leaf's nodes in a grid (rows
    // 12 units apart), which scaled to this box put a node's circle on the label of the node above it.
    // In that row they keep the grid's reading order, leaf block by leaf block (blocks left to right).
    let nodeY = -Infinity;
    const blockX = new Map(); // leaf -> the leftmost x of the job's nodes under it
    for (const [p, at] of v.pos) {
      if (switches.has(p)) continue;
      nodeY = Math.max(nodeY, at.y);
      blockX.set(p.leaf, Math.min(blockX.get(p.leaf) ?? Infinity, at.x));
    }
    for (const [p, at] of v.pos) {
      const node = !switches.has(p);
      const y = padTop + (h - padTop - padBottom) / 2 + ((node ? nodeY : at.y) - (v.y0 + v.y1) / 2) * ky;
      const key = Math.round(y);
      if (!rows.has(key)) rows.set(key, []);
      const order = node ? [blockX.get(p.leaf), at.y, at.x] : [at.x, 0, 0];
      rows.get(key).push([p, w / 2 + (at.x - (v.x0 + v.x1) / 2) * kx, y, order]);
    }
    const out = new Map();
    const gaps = new Map(); // item -> the smallest gap in its row
    const slots = new Map(); // item -> 0 or 1, alternating along its row (the line of a staggered name)
    for (const row of rows.values()) {
      row.sort((a, b) => a[3][0] - b[3][0] || a[3][1] - b[3][1] || a[3][2] - b[3][2]);
      const want = row.some(([p]) => switches.has(p) || nodeShape(p) === "group") ? 56 : 64;
      const xs = row.map(([, x]) => x);
      for (let i = 1; i < xs.length; i++) xs[i] = Math.max(xs[i], xs[i - 1] + want);
      const shift = row.reduce((t, [, x]) => t + x, 0) / row.length - xs.reduce((t, x) => t + x, 0) / xs.length;
      const span = xs[xs.length - 1] - xs[0];
      const room = w - 2 * padX;
      const k = span > room ? room / span : 1;
      const left = k < 1 ? padX : Math.min(Math.max(xs[0] + shift, padX), w - padX - span);
      const gap = xs.length > 1 ? Math.min(...xs.slice(1).map((x, i) => (x - xs[i]) * k)) : Infinity;
      row.forEach(([p, , y], i) => {
        out.set(p, { x: left + (xs[i] - xs[0]) * k, y });
        gaps.set(p, gap);
        slots.set(p, i % 2);
      });
    }
    return { at: out, gaps, slots };
  }

  //
  // Drawing: links (a light casing under each, so idle dark-violet links show on the dark ground), nodes, switches
  //

  let frame = 0;
  function invalidate() {
    if (!frame) frame = window.requestAnimationFrame(draw);
  }

  function nodeShape(n) {
    if (n.role === "group" || (n.members || 1) > 1) return "group";
    return n.role === "storage" ? "storage" : "node";
  }

  function draw() {
    frame = 0;
    if (M.state !== "placed" || !M.view) return;
    const { w, h, dpr } = size();
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.fillStyle = BACKGROUND;
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (!w || !h) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const { at, gaps, slots } = project(w, h);
    M.screen = at;
    const fits = (p, text) => gaps.get(p) >= ctx.measureText(text).width + 6;
    // Staggered on two lines, a name needs half the room: each neighbour's is on the other line.
    const fitsStaggered = (p, text) => 2 * gaps.get(p) >= ctx.measureText(text).width + 6;
    // What was drawn where (CSS pixels), to count labels that a shape covers (a test hook: `overlaps`).
    const shapes = [];
    const labels = [];
    const shape = (owner, x, y, rx, ry) => shapes.push({ owner, x0: x - rx, y0: y - ry, x1: x + rx, y1: y + ry });
    const label = (owner, text, x, y, baseline) => {
      ctx.textBaseline = baseline;
      ctx.fillText(text, x, y);
      const half = ctx.measureText(text).width / 2;
      const top = baseline === "bottom" ? y - 12 : y;
      labels.push({ owner, x0: x - half, y0: top, x1: x + half, y1: top + 12 });
    };

    ctx.lineCap = "round";
    for (const casing of [true, false]) {
      for (const l of M.links.values()) {
        const a = at.get(endpoint(l.ref.a));
        const b = at.get(endpoint(l.ref.b));
        if (!a || !b) continue;
        const style = binStyle(l.bin);
        ctx.beginPath();
        ctx.moveTo(a.x, a.y);
        ctx.lineTo(b.x, b.y);
        ctx.setLineDash(casing ? [] : style.dash);
        ctx.strokeStyle = casing ? "#3a4254" : style.colour;
        ctx.lineWidth = casing ? 5 : 3;
        ctx.stroke();
      }
    }
    ctx.setLineDash([]);

    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "center";
    for (const { ref: n, hosts } of M.nodes.values()) {
      const p = at.get(n);
      const colour = colourOf("node_state", n.state === "mixed" ? "up" : n.state);
      ctx.lineWidth = 2;
      ctx.strokeStyle = "#ffffff";
      if (nodeShape(n) === "group") {
        // A group of the aggregated view: highlighted, with how many of its nodes are the job's.
        ctx.fillStyle = GROUP_FILL;
        ctx.fillRect(p.x - 26, p.y - 9, 52, 18);
        ctx.strokeRect(p.x - 26, p.y - 9, 52, 18);
        shape(n, p.x, p.y, 27, 10);
        ctx.fillStyle = "#ffffff";
        ctx.textBaseline = "middle";
        ctx.fillText(`${hosts}/${n.members}`, p.x, p.y);
        ctx.fillStyle = "#e6e9ef";
        const name = String(n.hostname || n.id).split(":")[0];
        if (fits(n, name)) label(n, name, p.x, p.y + 12, "top");
        continue;
      }
      ctx.fillStyle = colour;
      ctx.beginPath();
      if (nodeShape(n) === "storage") {
        ctx.moveTo(p.x, p.y - 8);
        ctx.lineTo(p.x + 8, p.y);
        ctx.lineTo(p.x, p.y + 8);
        ctx.lineTo(p.x - 8, p.y);
        ctx.closePath();
      } else ctx.arc(p.x, p.y, 6, 0, Math.PI * 2);
      ctx.fill();
      ctx.stroke();
      const r = nodeShape(n) === "storage" ? 9 : 7;
      shape(n, p.x, p.y, r, r);
      const name = n.hostname || String(n.id);
      ctx.fillStyle = "#e6e9ef";
      if (fits(n, name)) label(n, name, p.x, p.y + 10, "top");
      else if (fitsStaggered(n, name)) label(n, name, p.x, p.y + 10 + 13 * slots.get(n), "top");
    }

    ctx.lineWidth = 1;
    ctx.strokeStyle = "#d8dce4";
    for (const s of M.switches.values()) {
      const p = at.get(s);
      ctx.fillStyle = loadColour(s.hottest ?? 0);
      ctx.fillRect(p.x - 22, p.y - 7, 44, 14);
      ctx.strokeRect(p.x - 22, p.y - 7, 44, 14);
      shape(s, p.x, p.y, 22.5, 7.5);
      ctx.fillStyle = "#e6e9ef";
      const name = s.name || String(s.id);
      if (fits(s, name)) label(s, name, p.x, p.y - 9, "bottom");
    }
    const meets = (a, b) => a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
    M.labels = labels.length;
    M.overlaps = labels.reduce((k, l) => k + shapes.filter((s) => s.owner !== l.owner && meets(l, s)).length, 0);
    M.overlaps += labels.reduce((k, l, i) => k + labels.slice(i + 1).filter((o) => meets(l, o)).length, 0);
    M.renders += 1;
    updateSummary();
  }

  //
  // Hover tells, a click opens the link (or switch) on the fabric page
  //

  function hit(x, y) {
    if (!M.screen) return null;
    for (const s of M.switches.values()) {
      const p = M.screen.get(s);
      if (p && Math.abs(x - p.x) <= 24 && Math.abs(y - p.y) <= 9) return { kind: "switch", item: s };
    }
    for (const { ref: n, hosts } of M.nodes.values()) {
      const p = M.screen.get(n);
      const r = nodeShape(n) === "group" ? 26 : 9;
      if (p && Math.abs(x - p.x) <= r && Math.abs(y - p.y) <= 10) return { kind: "node", item: n, hosts };
    }
    let best = null;
    let bestD = 6;
    for (const l of M.links.values()) {
      const a = M.screen.get(endpoint(l.ref.a));
      const b = M.screen.get(endpoint(l.ref.b));
      if (!a || !b) continue;
      const dx = b.x - a.x;
      const dy = b.y - a.y;
      const len = dx * dx + dy * dy;
      const t = len ? Math.min(1, Math.max(0, ((x - a.x) * dx + (y - a.y) * dy) / len)) : 0;
      const d = Math.hypot(x - (a.x + t * dx), y - (a.y + t * dy));
      if (d <= bestD) {
        best = { kind: "link", item: l.ref };
        bestD = d;
      }
    }
    return best;
  }

  function nameOf(ref) {
    const e = endpoint(ref);
    if (!e) return String(ref && ref[1]);
    return ref[0] === "switch" ? e.name || String(e.id) : e.hostname || String(e.id);
  }

  function describe(h) {
    if (h.kind === "switch") {
      const s = h.item;
      return `${s.name} (${s.role || `tier ${s.tier}`}) · hottest port ${pct(s.hottest)}`;
    }
    if (h.kind === "node") {
      const n = h.item;
      if (nodeShape(n) === "group") return `${n.hostname} · ${h.hosts} of them the job's`;
      return `${n.hostname} · ${labelOf("node_state", n.state)}${n.gpus ? ` · ${n.gpus} GPUs` : ""}`;
    }
    const l = h.item;
    const errors = l.errors ? " · errors growing" : "";
    const state = labelOf("link_state", l.state);
    return `${nameOf(l.a)} ↔ ${nameOf(l.b)} · ${pct(l.util)} of ${l.capacity_gbps} Gb/s · ${state}${errors}`;
  }

  function pointer(ev) {
    const r = canvas.getBoundingClientRect();
    return hit(ev.clientX - r.left, ev.clientY - r.top);
  }

  canvas.addEventListener("pointermove", (ev) => {
    const h = pointer(ev);
    canvas.classList.toggle("over-item", Boolean(h && h.kind !== "node"));
    if (!h) {
      tip.hidden = true;
      return;
    }
    setText(tip, describe(h));
    const r = box.getBoundingClientRect();
    tip.style.left = `${Math.min(ev.clientX - r.left + 12, Math.max(r.width - 240, 0))}px`;
    tip.style.top = `${ev.clientY - r.top + 12}px`;
    tip.hidden = false;
  });
  canvas.addEventListener("pointerleave", () => {
    tip.hidden = true;
  });
  canvas.addEventListener("click", (ev) => {
    const h = pointer(ev);
    if (!h || !fabricUrl) return;
    if (h.kind === "link" && /^\d+$/.test(String(h.item.id))) window.location.assign(`${fabricUrl}?link=${h.item.id}`);
    else if (h.kind === "switch") window.location.assign(`${fabricUrl}?switch=${h.item.id}`);
    else window.location.assign(`${fabricUrl}?job=${encodeURIComponent(jobId)}`);
  });
  new ResizeObserver(invalidate).observe(box);

  //
  // Test hooks
  //

  function updateSummary() {
    const links = [...M.links.values()];
    const utils = links.map((l) => l.ref.util).filter((u) => Number.isFinite(u));
    const colours = links.map((l) => `${l.ref.id}:${l.bin}`).sort();
    const values = {
      state: M.state,
      aggregated: Boolean(M.fabric && M.fabric.aggregated),
      nodes: M.nodes.size,
      groups: [...M.nodes.values()].filter((n) => nodeShape(n.ref) === "group").length,
      hosts: [...M.nodes.values()].reduce((k, n) => k + n.hosts, 0),
      switches: M.switches.size,
      links: M.links.size,
      colours: digest(colours.join(",")),
      utilMax: utils.length ? Math.round(Math.max(...utils) * 100) : "",
      linkUpdates: M.linkUpdates,
      snapshots: M.snapshots,
      renders: M.renders,
      labels: M.labels,
      overlaps: M.overlaps,
    };
    for (const [key, value] of Object.entries(values)) setData(summary, key, value);
  }

  //
  // Live data
  //

  function onFabric(event) {
    if (event.kind === "snapshot") {
      M.fabric = event.state;
      M.snapshots += 1;
      indexFabric();
      rebuild();
      return;
    }
    // A delta: recolour only the subgraph's links it names (the store already holds their new values).
    let changed = false;
    for (const id of Object.keys(event.data.links || {})) {
      const l = M.links.get(id);
      if (!l) continue;
      l.bin = linkBin(l.ref);
      M.linkUpdates += 1;
      changed = true;
    }
    for (const id of Object.keys(event.data.switches || {})) changed = changed || M.switches.has(id);
    for (const id of Object.keys(event.data.nodes || {})) changed = changed || M.nodes.has(id);
    if (changed) invalidate();
    updateSummary();
  }

  function onQueue(event) {
    const entry = event.state.byId.get(String(jobId)) || null;
    const job = entry && entry.job;
    const sig = entry ? `${entry.list}|${(job.nodes || []).join(",")}|${(job.links || []).join(",")}` : "-";
    if (M.entry !== undefined && sig === M.sig) return;
    M.sig = sig;
    M.entry = entry;
    rebuild();
  }

  legendBox.replaceChildren(...utilisationLegend());
  show("waiting", "Waiting for live data…");
  connect(wsQueue).subscribe("queue", onQueue);
  return { state: () => ({ ...summary.dataset }) };
}
