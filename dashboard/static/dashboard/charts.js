// ECharts (vendored: static/vendor/echarts/echarts.min.js, loaded before the page modules as window.echarts)
// with the dashboard's defaults. Tooltips are formatted here as markup with classes: the Content-Security-Policy
// allows no inline style="" attributes, which ECharts' default tooltip markup uses.

import { escapeHtml } from "./dom.js";

export const FONT = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
export const MUTED = "#5b6477";

export function makeChart(container) {
  if (!window.echarts) throw new Error("ECharts is not loaded");
  const chart = window.echarts.init(container, null, { renderer: "canvas" });
  if (window.ResizeObserver) new ResizeObserver(() => chart.resize()).observe(container);
  return chart;
}

export function baseOption() {
  return {
    animation: false,
    textStyle: { fontFamily: FONT, color: "#1d2330" },
    tooltip: { confine: true, className: "chart-tip", borderWidth: 0, padding: 0, backgroundColor: "transparent" },
  };
}

// A tooltip: a title line and rows of [label, value, colour?]; every text escaped.
export function tipHtml(title, rows = [], footer = "") {
  const lines = rows
    .map(([label, value, colour]) => {
      const dot = colour ? `<i class="dot dot-${escapeHtml(colour.replace("#", ""))}"></i>` : "";
      return `<tr><th>${dot}${escapeHtml(label)}</th><td>${escapeHtml(value)}</td></tr>`;
    })
    .join("");
  const foot = footer ? `<div class="tip-foot">${escapeHtml(footer)}</div>` : "";
  return `<div class="tip"><div class="tip-title">${escapeHtml(title)}</div><table>${lines}</table>${foot}</div>`;
}

export function timeAxis() {
  return {
    type: "time",
    // The span of the data, not a round span around it: a fresh trend of two points otherwise spans days.
    min: "dataMin",
    max: "dataMax",
    axisLabel: { color: MUTED, hideOverlap: true, fontSize: 10 },
    axisLine: { lineStyle: { color: "#dde1e8" } },
    splitLine: { show: false },
  };
}

export function valueAxis(name, extra = {}) {
  return {
    type: "value",
    name,
    nameTextStyle: { color: MUTED, fontSize: 10, align: "left" },
    axisLabel: { color: MUTED, fontSize: 10 },
    splitLine: { lineStyle: { color: "#eef0f4" } },
    ...extra,
  };
}
