// Job: live status (queue socket), its placement on a small fabric view (minifabric.js), live readings of its GPUs
// (fabric socket, `gpus` topic) in the server-rendered table (rows data-gpu-id), and the history of its GPUs from the
// series endpoint (fabric.selectors.metric_series).

import { MUTED, baseOption, makeChart, timeAxis, tipHtml, valueAxis } from "./charts.js";
import { connect } from "./live.js";
import { byId, cell, fmtNumber, fmtTime, jsonScript, loaded, setBadge, setText } from "./dom.js";
import { miniFabric } from "./minifabric.js";
import { startText } from "./queue-tables.js";

const page = byId("page");
const jobId = String(page.dataset.jobId);
const METRICS = jsonScript("gpu-metrics") || { util: "%", mem_used: "MiB", temp: "°C", power: "W" };
const NAMES = { util: "Utilisation", mem_used: "Memory used", temp: "Temperature", power: "Power" };
const palette = jsonScript("palette") || ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"];
const gpuRows = new Map([...document.querySelectorAll("tr[data-gpu-id]")].map((tr) => [tr.dataset.gpuId, tr]));

//
// Status and place in the queue
//

let pendingEntry = null; // the job's queue entry while it waits: its expected start counts down between rounds

function drawStatus(job, list) {
  const status = list === "pending" ? "pending" : job.status || "running";
  setBadge(byId("job-status"), "job_status", status);
  setText(byId("job-position"), list === "pending" ? (job.position ?? "–") : "–");
  setText(byId("job-reason"), list === "pending" ? job.reason || "–" : "–");
  pendingEntry = list === "pending" ? job : null;
  setText(byId("job-start"), pendingEntry ? startText(pendingEntry) : "–");
}

window.setInterval(() => {
  if (pendingEntry) setText(byId("job-start"), startText(pendingEntry));
}, 5_000);

connect(page.dataset.wsQueue).subscribe("queue", (event) => {
  const entry = event.state.byId.get(jobId);
  if (entry) drawStatus(entry.job, entry.list);
  else if (event.kind === "delta" && (event.data.remove || []).map(String).includes(jobId)) {
    byId("job-left").hidden = false; // finished, failed or cancelled: the page's own data says which after a reload
  }
});

//
// Placement on the fabric: a small view of its nodes, switches and links (minifabric.js)
//

const miniRoot = byId("job-fabric");
if (miniRoot) {
  miniFabric(miniRoot, {
    jobId,
    wsQueue: page.dataset.wsQueue,
    wsFabric: page.dataset.wsFabric,
    fabricUrl: miniRoot.dataset.fabricUrl,
  });
}

//
// Its GPUs, now
//

function drawGpu(tr, gpu) {
  setBadge(cell(tr, "health"), "gpu_health", gpu.health);
  setText(cell(tr, "util"), gpu.util == null ? "–" : fmtNumber(gpu.util));
  setText(cell(tr, "mem_used"), gpu.mem_used == null ? "–" : fmtNumber(gpu.mem_used));
  setText(cell(tr, "temp"), gpu.temp == null ? "–" : fmtNumber(gpu.temp));
  setText(cell(tr, "power"), gpu.power == null ? "–" : fmtNumber(gpu.power));
}

if (gpuRows.size) {
  connect(page.dataset.wsFabric).subscribe("gpus", (event) => {
    loaded(byId("job-gpus"));
    const ids = event.kind === "snapshot" ? [...gpuRows.keys()] : Object.keys(event.data.gpus || {});
    for (const id of ids) {
      const tr = gpuRows.get(String(id));
      const gpu = tr && event.state.byId.get(String(id));
      if (gpu) drawGpu(tr, gpu);
    }
  });
}

//
// History
//

const chartEl = byId("job-series");
const metricSelect = byId("series-metric");
const hoursSelect = byId("series-hours");
let chart = null;
let series = null;

function drawSeries() {
  if (!series || !chartEl) return;
  const metric = metricSelect.value;
  const column = series.fields.indexOf(metric) + 1;
  const empty = series.gpus.every((g) => g.points.length === 0);
  byId("series-empty").hidden = !empty;
  chartEl.hidden = empty;
  if (empty) return;
  if (!chart) chart = makeChart(chartEl);
  chart.setOption(
    {
      ...baseOption(),
      color: palette,
      // The legend (one line, scrolling) on top; the axis name runs along the axis, left of its labels, so it never
      // meets the legend (above the axis, where ECharts puts it by default, the two overlapped).
      grid: { left: 68, right: 16, top: 34, bottom: 24 },
      legend: { type: "scroll", top: 0, left: 8, right: 8, textStyle: { fontSize: 10 } },
      xAxis: timeAxis(),
      yAxis: valueAxis(`${NAMES[metric]} (${METRICS[metric]})`, {
        ...(metric === "util" ? { min: 0, max: 100 } : { min: 0 }),
        nameLocation: "middle",
        nameRotate: 90,
        nameGap: 48,
        nameTextStyle: { color: MUTED, fontSize: 10, align: "center" },
      }),
      tooltip: {
        ...baseOption().tooltip,
        trigger: "axis",
        formatter: (params) => {
          const list = Array.isArray(params) ? params : [params];
          if (!list.length) return "";
          const rows = list.map((p) => [p.seriesName, `${fmtNumber(p.value[1], 1)} ${METRICS[metric]}`, p.color]);
          return tipHtml(fmtTime(list[0].value[0]), rows);
        },
      },
      series: series.gpus.map((g) => ({
        id: String(g.id),
        name: g.label,
        type: "line",
        showSymbol: false,
        data: g.points.map((p) => [p[0], p[column]]),
      })),
    },
    { notMerge: true },
  );
}

async function loadSeries() {
  if (!chartEl) return;
  try {
    const response = await fetch(`${page.dataset.seriesUrl}?hours=${encodeURIComponent(hoursSelect.value)}`, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    series = await response.json();
    loaded(byId("job-history"));
    byId("series-error").hidden = true;
    drawSeries();
  } catch (error) {
    setText(byId("series-error"), `Could not load the history: ${error.message}`);
    byId("series-error").hidden = false;
  }
}

if (chartEl) {
  metricSelect.addEventListener("change", drawSeries);
  hoursSelect.addEventListener("change", loadSeries);
  loadSeries();
  window.setInterval(loadSeries, 60_000);
}
