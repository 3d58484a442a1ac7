// What-if (/whatif/, docs/policy-lab.md "From the dashboard"). The form shows the fields of the chosen trace kind
// (a cluster and the JCT policies, or the fractional policies of the Alibaba trace); a run's page polls its small
// status endpoint every second until the run has finished, then reloads to show the results, and draws the charts
// from the result JSON (json_script "whatif-charts"). A policy suite run is followed alike (its table is server-rendered).

import { baseOption, makeChart, MUTED, tipHtml, valueAxis } from "./charts.js";
import { byId, fmtDuration, fmtNumber, jsonScript, setData, setText } from "./dom.js";

const palette = jsonScript("palette") || ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"];
const colour = (i) => palette[i % palette.length];

//
// The form
//

// The kind a file name says (scheduler.sim.run.guess_kind).
export function guessKind(name) {
  const n = String(name || "").toLowerCase();
  if (n.endsWith(".trace")) return "gavel";
  if (!n.endsWith(".csv")) return "";
  if (n.includes("pod_list")) return "alibaba";
  if (n.includes("workload-")) return "pollux";
  if (n.endsWith("job.csv") || n.includes("_job")) return "tiresias";
  return "";
}

function setUpForm(form) {
  const kind = byId("id_kind");
  const trace = byId("id_trace");
  const upload = byId("id_upload");

  const currentKind = () => {
    if (kind.value) return kind.value;
    if (upload.files && upload.files.length) return guessKind(upload.files[0].name);
    const option = trace.selectedOptions[0];
    return option ? option.dataset.kind || "" : "";
  };
  const refresh = () => {
    const fractional = currentKind() === "alibaba";
    for (const node of form.querySelectorAll("[data-for='jct']")) node.hidden = fractional;
    for (const node of form.querySelectorAll("[data-for='fractional']")) node.hidden = !fractional;
  };
  // One source at a time: a chosen file clears the upload and the other way round.
  trace.addEventListener("change", () => {
    if (trace.value) upload.value = "";
    refresh();
  });
  upload.addEventListener("change", () => {
    if (upload.files && upload.files.length) trace.value = "";
    refresh();
  });
  kind.addEventListener("change", refresh);
  form.addEventListener("submit", () => {
    const button = form.querySelector("button[type='submit']");
    if (button) {
      button.disabled = true;
      button.textContent = "Replaying…";
    }
  });
  refresh();
}

//
// A run: progress, then charts
//

function showStatus(status) {
  const badge = byId("whatif-status");
  setText(badge, status.status);
  setData(badge, "status", status.status);
  const p = status.progress;
  if (p) {
    byId("whatif-progress").value = p.fraction;
    const step = p.case ? `${p.case} · ${p.policy}` : p.policy; // a suite run names its case too
    setText(byId("whatif-step"), `${step} (${p.index}/${p.policies}): ${p.done}/${p.total}`);
  }
}

function poll(page) {
  const url = page.dataset.statusUrl;
  const tick = async () => {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const status = await response.json();
      showStatus(status);
      if (status.finished) {
        window.location.reload(); // the server renders the results
        return;
      }
    } catch (error) {
      setText(byId("whatif-step"), `status unavailable (${error.message}); retrying`);
    }
    window.setTimeout(tick, 1000);
  };
  window.setTimeout(tick, 1000);
}

function shortDuration(seconds) {
  if (seconds >= 86400) return `${fmtNumber(seconds / 86400, 1)} d`;
  if (seconds >= 3600) return `${fmtNumber(seconds / 3600, 1)} h`;
  if (seconds >= 60) return `${fmtNumber(seconds / 60, 0)} min`;
  return `${fmtNumber(seconds, 0)} s`;
}

function lineChart(container, { series, xAxis, yAxis, tip }) {
  const chart = makeChart(container);
  const base = baseOption();
  chart.setOption({
    ...base,
    color: series.map((_s, i) => colour(i)),
    legend: { bottom: 0, type: "scroll", textStyle: { color: MUTED, fontSize: 11 } },
    grid: { left: 56, right: 44, top: 30, bottom: 58 },
    tooltip: {
      ...base.tooltip,
      trigger: "axis",
      formatter: (items) => {
        const list = Array.isArray(items) ? items : [items];
        if (!list.length) return "";
        return tipHtml(
          tip.title(list[0].value[0]),
          list.map((item) => [item.seriesName, tip.value(item.value[1]), colour(item.seriesIndex)]),
        );
      },
    },
    xAxis,
    yAxis,
    series,
  });
  setData(container, "series", series.length); // drawn (read by the browser tests)
  return chart;
}

function drawJct(charts) {
  const cdf = byId("whatif-jct-cdf");
  if (cdf) {
    lineChart(cdf, {
      series: charts.policies.map((p) => ({
        name: p.policy,
        type: "line",
        step: "end",
        showSymbol: false,
        lineStyle: { width: 1.5 },
        data: p.jct_cdf,
      })),
      xAxis: valueAxis("JCT", { type: "log", axisLabel: { color: MUTED, fontSize: 10, formatter: shortDuration } }),
      yAxis: valueAxis("fraction of jobs", {
        min: 0,
        max: 1,
        axisLabel: { color: MUTED, fontSize: 10, formatter: (v) => `${Math.round(v * 100)} %` },
      }),
      tip: { title: (x) => `JCT ${fmtDuration(x)}`, value: (y) => `${fmtNumber(y * 100, 1)} % of jobs done` },
    });
  }
  const util = byId("whatif-utilisation");
  if (util) {
    lineChart(util, {
      series: charts.policies.map((p) => ({
        name: p.policy,
        type: "line",
        step: "end",
        showSymbol: false,
        lineStyle: { width: 1 },
        data: p.utilisation,
      })),
      xAxis: valueAxis("time", { axisLabel: { color: MUTED, fontSize: 10, formatter: shortDuration } }),
      yAxis: valueAxis("GPUs held", {
        min: 0,
        max: 1,
        axisLabel: { color: MUTED, fontSize: 10, formatter: (v) => `${Math.round(v * 100)} %` },
      }),
      tip: { title: (x) => `at ${fmtDuration(x)}`, value: (y) => `${fmtNumber(y * 100, 1)} % of GPUs` },
    });
  }
}

function drawFractional(charts) {
  const el = byId("whatif-fractional");
  if (!el) return;
  lineChart(el, {
    series: charts.policies.map((p) => ({
      name: p.policy,
      type: "line",
      showSymbol: false,
      lineStyle: { width: 1.5 },
      data: p.curve,
    })),
    xAxis: valueAxis("arrived, % of capacity", { axisLabel: { color: MUTED, fontSize: 10 } }),
    yAxis: valueAxis("unallocated GPUs, %", { min: 0, axisLabel: { color: MUTED, fontSize: 10 } }),
    tip: { title: (x) => `arrivals at ${fmtNumber(x, 1)} %`, value: (y) => `${fmtNumber(y, 2)} % unallocated` },
  });
}

const form = byId("whatif-form");
if (form) setUpForm(form);

const suiteForm = byId("whatif-suite-form");
if (suiteForm) {
  suiteForm.addEventListener("submit", () => {
    const button = suiteForm.querySelector("button[type='submit']");
    if (button) {
      button.disabled = true;
      button.textContent = "Running the suite…";
    }
  });
}

const runPage = byId("page");
if (runPage && runPage.dataset.runId) {
  if (runPage.dataset.finished !== "true") poll(runPage);
  const charts = jsonScript("whatif-charts");
  if (charts && window.echarts) {
    if (charts.kind === "fractional") drawFractional(charts);
    else drawJct(charts);
  }
}
