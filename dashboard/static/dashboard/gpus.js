// GPUs: one heat-map cell per GPU, rows by leaf (wrapped when a leaf has many nodes), a gap between nodes.
// Colour: the selected metric on a viridis (utilisation, memory) or cividis (temperature, power) scale; GPUs that
// are not healthy carry a marker whose shape and colour come from the gpu_health legend.
// A snapshot lays the grid out; a delta changes the values of the cells it names and redraws the series data
// (not the axes or the scale) at most once per frame. The table view (rows data-gpu-id) is built when first opened
// and then updated cell by cell.

import { baseOption, makeChart, tipHtml } from "./charts.js";
import { connect } from "./live.js";
import {
  byId,
  CIVIDIS,
  colourOf,
  el,
  fmtNumber,
  frameScheduler,
  jsonScript,
  KeyedRows,
  labelOf,
  loaded,
  setBadge,
  setData,
  setText,
  VIRIDIS,
} from "./dom.js";

const page = byId("page");
const clusterId = page.dataset.clusterId;
const MIN_CELL_PX = 11;
const MAX_CELL_PX = 26;
const UNHEALTHY = { degraded: "triangle", failed: "diamond" };
const METRICS = jsonScript("gpu-metrics") || { util: "%", mem_used: "MiB", temp: "°C", power: "W" };
const SCALES = { util: VIRIDIS, mem_used: VIRIDIS, temp: CIVIDIS, power: CIVIDIS };
const NAMES = { util: "Utilisation", mem_used: "Memory used", temp: "Temperature", power: "Power" };

const chartEl = byId("gpu-heatmap");
const select = byId("gpu-metric");
const detail = byId("gpu-detail");
const tableWrap = byId("gpu-table-wrap");
let chart = null;
let store = null;
let metric = select.value || "util";
let layout = null; // {gpuAt: [gpu], indexOf: Map(id -> data index), pos: Map(id -> [x, y]), rows, cols}
let heat = []; // [x, y, value] per GPU, in layout order
let table = null;
let selected = null;

function range(m) {
  const gpus = store ? store.gpus : [];
  if (m === "util") return [0, 100];
  if (m === "temp") return [20, 90];
  if (m === "mem_used") return [0, Math.max(1, ...gpus.map((g) => g.mem_total || 0))];
  const top = Math.max(300, ...gpus.map((g) => g.power || 0));
  return [0, Math.ceil(top / 100) * 100];
}

function value(gpu) {
  const v = gpu[metric];
  return v == null ? "-" : v;
}

function buildLayout(gpus) {
  const perNode = Math.max(1, ...gpus.map((g) => (g.index ?? 0) + 1));
  const leaves = [];
  for (const gpu of gpus) {
    let leaf = leaves[leaves.length - 1];
    if (!leaf || leaf.name !== gpu.leaf) leaves.push((leaf = { name: gpu.leaf, nodes: [] }));
    let node = leaf.nodes[leaf.nodes.length - 1];
    if (!node || node.name !== gpu.node) leaf.nodes.push((node = { name: gpu.node, gpus: [] }));
    node.gpus.push(gpu);
  }
  const width = Math.max(320, chartEl.clientWidth - 110);
  const budget = Math.max(perNode + 1, Math.floor(width / MIN_CELL_PX));
  const widest = Math.max(1, ...leaves.map((l) => l.nodes.length));
  const nodesPerRow = Math.max(1, Math.min(widest, Math.floor((budget + 1) / (perNode + 1))));
  const rows = [];
  const gpuAt = [];
  const indexOf = new Map();
  const pos = new Map();
  for (const leaf of leaves) {
    for (let start = 0; start < leaf.nodes.length; start += nodesPerRow) {
      const y = rows.length;
      rows.push(start === 0 ? leaf.name || "(no leaf)" : `${leaf.name} (${start / nodesPerRow + 1})`);
      leaf.nodes.slice(start, start + nodesPerRow).forEach((node, slot) => {
        for (const gpu of node.gpus) {
          const x = slot * (perNode + 1) + (gpu.index ?? 0);
          indexOf.set(String(gpu.id), gpuAt.length);
          pos.set(String(gpu.id), [x, y]);
          gpuAt.push(gpu);
        }
      });
    }
  }
  const cols = nodesPerRow * (perNode + 1) - 1;
  return { gpuAt, indexOf, pos, rows, cols, perNode };
}

function overlay() {
  const points = [];
  for (const gpu of layout.gpuAt) {
    const shape = UNHEALTHY[gpu.health];
    if (!shape) continue;
    const [x, y] = layout.pos.get(String(gpu.id));
    points.push({ value: [x, y, gpu.id], symbol: shape, itemStyle: { color: colourOf("gpu_health", gpu.health) } });
  }
  return points;
}

function visualMap() {
  const [min, max] = range(metric);
  const unit = METRICS[metric];
  return {
    id: "scale",
    type: "continuous",
    seriesIndex: 0,
    dimension: 2,
    min,
    max,
    calculable: false,
    orient: "horizontal",
    left: "center",
    top: 0,
    itemWidth: 12,
    itemHeight: 220,
    text: [`${fmtNumber(max)} ${unit}`, `${fmtNumber(min)} ${unit}`],
    textStyle: { fontSize: 11 },
    inRange: { color: SCALES[metric] },
  };
}

function drawAll() {
  if (!store) return;
  layout = buildLayout(store.gpus);
  heat = layout.gpuAt.map((gpu) => {
    const [x, y] = layout.pos.get(String(gpu.id));
    return [x, y, value(gpu)];
  });
  const cell = Math.max(MIN_CELL_PX, Math.min(MAX_CELL_PX, (chartEl.clientWidth - 110) / Math.max(1, layout.cols)));
  chartEl.style.height = `${Math.round(layout.rows.length * cell + 70)}px`;
  if (!chart) {
    chart = makeChart(chartEl);
    chart.on("click", (params) => showDetail(gpuOf(params)));
  }
  chart.resize();
  chart.setOption(
    {
      ...baseOption(),
      grid: { left: 100, right: 10, top: 40, bottom: 10 },
      xAxis: { type: "category", data: [...Array(layout.cols).keys()].map(String), show: false },
      yAxis: {
        type: "category",
        data: layout.rows,
        inverse: true,
        axisTick: { show: false },
        axisLine: { show: false },
        axisLabel: { fontSize: 10, color: "#5b6477" },
      },
      visualMap: visualMap(),
      tooltip: { ...baseOption().tooltip, formatter: (params) => tip(gpuOf(params)) },
      series: [
        {
          id: "heat",
          type: "heatmap",
          data: heat,
          progressive: 0,
          itemStyle: { borderColor: "#ffffff", borderWidth: 1 },
          emphasis: { itemStyle: { borderColor: "#1d2330", borderWidth: 2 } },
        },
        { id: "health", type: "scatter", symbolSize: Math.max(6, cell * 0.55), data: overlay(), z: 3 },
      ],
    },
    { notMerge: true },
  );
  setData(chartEl, "gpus", layout.gpuAt.length);
  setData(chartEl, "metric", metric);
  drawSummary();
  if (table) table.sync(store.gpus);
}

let heatDirty = false;
let overlayDirty = false;
const redraw = frameScheduler(() => {
  if (!chart) return;
  const series = [];
  if (heatDirty) series.push({ id: "heat", data: heat });
  if (overlayDirty) series.push({ id: "health", data: overlay() });
  heatDirty = overlayDirty = false;
  if (series.length) chart.setOption({ series });
  drawSummary();
  if (selected) showDetail(selected);
});

function applyDelta(changes) {
  for (const id of Object.keys(changes)) {
    const i = layout.indexOf.get(String(id));
    if (i === undefined) continue;
    const gpu = layout.gpuAt[i];
    const patch = changes[id];
    if (metric in patch) {
      heat[i][2] = value(gpu);
      heatDirty = true;
    }
    if ("health" in patch) overlayDirty = true;
    if (table) table.upsert(gpu);
  }
  redraw();
}

function drawSummary() {
  const gpus = store.gpus;
  const readings = gpus.map((g) => g[metric]).filter((v) => v != null);
  const mean = readings.length ? readings.reduce((a, b) => a + b, 0) / readings.length : null;
  setText(byId("gpu-count"), fmtNumber(gpus.length));
  setText(byId("gpu-unhealthy"), fmtNumber(gpus.filter((g) => UNHEALTHY[g.health]).length));
  setText(byId("gpu-mean"), mean == null ? "–" : `${fmtNumber(mean, 1)} ${METRICS[metric]}`);
  setText(byId("gpu-mean-label"), `Mean ${NAMES[metric].toLowerCase()}`);
}

function gpuOf(params) {
  if (!params || !layout) return null;
  if (params.seriesId === "health") return store.byId.get(String(params.value[2])) || null;
  return layout.gpuAt[params.dataIndex] || null;
}

function fmtMetric(gpu, m) {
  const v = gpu[m];
  if (v == null) return "no reading";
  if (m === "mem_used") return `${fmtNumber(v)} / ${fmtNumber(gpu.mem_total)} MiB`;
  return `${fmtNumber(v, m === "util" ? 0 : 0)} ${METRICS[m]}`;
}

function tip(gpu) {
  if (!gpu) return "";
  const rows = [
    ["Health", labelOf("gpu_health", gpu.health), colourOf("gpu_health", gpu.health)],
    ...Object.keys(METRICS).map((m) => [NAMES[m], fmtMetric(gpu, m)]),
    ["Jobs", (gpu.jobs || []).map((j) => `${j.name} (#${j.id})`).join(", ") || "none"],
  ];
  return tipHtml(`${gpu.node} GPU ${gpu.index} · ${gpu.model} · ${gpu.leaf}`, rows, "Click for details");
}

function showDetail(gpu) {
  if (!gpu) return;
  selected = gpu;
  detail.hidden = false;
  setData(detail, "gpuId", gpu.id);
  setText(detail.querySelector("[data-f=title]"), `${gpu.node} GPU ${gpu.index} (${gpu.model}, leaf ${gpu.leaf})`);
  setBadge(detail.querySelector("[data-f=health]"), "gpu_health", gpu.health);
  for (const m of Object.keys(METRICS)) setText(detail.querySelector(`[data-f=${m}]`), fmtMetric(gpu, m));
  const jobs = detail.querySelector("[data-f=jobs]");
  const key = (gpu.jobs || []).map((j) => `${j.id}:${j.name}`).join("|");
  if (jobs.dataset.key !== key) {
    jobs.dataset.key = key;
    jobs.replaceChildren(
      ...(gpu.jobs || []).map((j) =>
        el("li", {}, el("a", { href: `/clusters/${clusterId}/jobs/${j.id}/`, text: `${j.name} (#${j.id})` })),
      ),
    );
    if (!gpu.jobs || !gpu.jobs.length) jobs.append(el("li", { class: "muted", text: "no job" }));
  }
}

function makeTable() {
  const tbody = tableWrap.querySelector("tbody");
  return new KeyedRows(tbody, {
    create: (gpu) =>
      el(
        "tr",
        { "data-gpu-id": gpu.id },
        el("td", { "data-f": "node" }),
        el("td", { "data-f": "index", class: "num" }),
        el("td", { "data-f": "model" }),
        el("td", { "data-f": "leaf" }),
        el("td", {}, el("span", { "data-f": "health" })),
        el("td", { "data-f": "util", class: "num" }),
        el("td", { "data-f": "mem_used", class: "num" }),
        el("td", { "data-f": "temp", class: "num" }),
        el("td", { "data-f": "power", class: "num" }),
        el("td", { "data-f": "jobs" }),
      ),
    update: (tr, gpu) => {
      const q = (f) => tr.querySelector(`[data-f=${f}]`);
      setText(q("node"), gpu.node);
      setText(q("index"), gpu.index);
      setText(q("model"), gpu.model);
      setText(q("leaf"), gpu.leaf);
      setBadge(q("health"), "gpu_health", gpu.health);
      for (const m of Object.keys(METRICS)) setText(q(m), gpu[m] == null ? "–" : fmtNumber(gpu[m]));
      setText(q("jobs"), (gpu.jobs || []).map((j) => `${j.name} (#${j.id})`).join(", "));
    },
  });
}

tableWrap.addEventListener("toggle", () => {
  if (tableWrap.open && !table && store) {
    table = makeTable();
    table.sync(store.gpus);
  }
});

select.addEventListener("change", () => {
  metric = select.value;
  if (store) drawAll();
});

connect(page.dataset.wsFabric).subscribe("gpus", (event) => {
  store = event.state;
  loaded(page);
  byId("gpu-empty").hidden = store.gpus.length > 0;
  chartEl.hidden = store.gpus.length === 0;
  if (event.kind === "snapshot" || !layout) drawAll();
  else applyDelta(event.data.gpus || {});
});
