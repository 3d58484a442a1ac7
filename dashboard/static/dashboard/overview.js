// Overview: one card per cluster, kept live from the `overview` topic of the cluster's fabric socket.
// Each number sits in an element with data-field="<path in the overview object>" and data-format; only those whose
// text changes are touched. The trend chart gets new series data only when the trend has a new point.

import { baseOption, makeChart, timeAxis, tipHtml, valueAxis } from "./charts.js";
import { connect } from "./live.js";
import { el, fmtDuration, fmtNumber, fmtPct, fmtTime, jsonScript, loaded, setText } from "./dom.js";

const FORMATS = {
  int: (v) => fmtNumber(v),
  pct: (v) => fmtPct(v),
  cv: (v) => (v == null ? "–" : fmtNumber(v, 2)),
  ms: (v) => (v == null ? "–" : `${fmtNumber(v)} ms`),
  time: (v) => fmtTime(v),
  ago: (v) => (v ? `${fmtDuration((Date.now() - new Date(v).getTime()) / 1000)} ago` : "never"),
};

function get(obj, path) {
  return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

const palette = jsonScript("palette") || ["#0072B2", "#E69F00", "#009E73"];

class ClusterCard {
  constructor(card) {
    this.card = card;
    this.fields = [...card.querySelectorAll("[data-field]")];
    this.priorities = card.querySelector("[data-role=priorities]");
    this.chartEl = card.querySelector("[data-role=trend]");
    this.chart = null;
    this.lastTrend = "";
    this.data = null;
    connect(card.dataset.wsFabric).subscribe("overview", (event) => this.draw(event.state));
    window.setInterval(() => this.data && this.drawFields(), 10_000); // "12 s ago" keeps counting
  }

  draw(data) {
    this.data = data;
    loaded(this.card);
    this.card.dataset.live = "1";
    this.drawFields();
    this.drawPriorities(get(data, "queue.by_priority") || {});
    this.drawTrend(data.trend || []);
  }

  drawFields() {
    for (const node of this.card.querySelectorAll("[data-show-if]")) {
      node.hidden = get(this.data, node.dataset.showIf) == null;
    }
    for (const node of this.fields) {
      const format = FORMATS[node.dataset.format] || FORMATS.int;
      setText(node, format(get(this.data, node.dataset.field)));
    }
  }

  drawPriorities(counts) {
    for (const [name, n] of Object.entries(counts)) {
      let item = this.priorities.querySelector(`[data-priority="${CSS.escape(name)}"]`);
      if (!item) {
        item = el("li", { "data-priority": name }, el("span", { class: "k", text: name }), " ", el("b"));
        this.priorities.append(item);
      }
      setText(item.querySelector("b"), fmtNumber(n));
    }
  }

  drawTrend(trend) {
    if (!this.chartEl) return;
    const last = trend.length ? `${trend.length}:${trend[trend.length - 1].at}` : "";
    if (last === this.lastTrend) return;
    this.lastTrend = last;
    this.chartEl.classList.toggle("is-empty", trend.length === 0);
    if (!this.chart) {
      this.chart = makeChart(this.chartEl);
      this.chart.setOption({
        ...baseOption(),
        color: palette,
        grid: { left: 34, right: 40, top: 24, bottom: 20 },
        legend: { top: 0, left: 0, itemWidth: 12, itemHeight: 6, textStyle: { fontSize: 10 } },
        xAxis: timeAxis(),
        // Units are in the series names: left axis %, right axis counts.
        yAxis: [valueAxis("", { min: 0, max: 100 }), valueAxis("", { min: 0, splitLine: { show: false } })],
        tooltip: { ...baseOption().tooltip, trigger: "axis", formatter: (params) => this.tip(params) },
        series: [
          { id: "util", name: "Utilisation %", type: "line", showSymbol: false, data: [] },
          { id: "allocated", name: "GPUs allocated", type: "line", yAxisIndex: 1, showSymbol: false, data: [] },
          { id: "pending", name: "Jobs pending", type: "line", yAxisIndex: 1, showSymbol: false, data: [] },
        ],
      });
    }
    // A line needs two points: until then show the points themselves.
    const showSymbol = trend.length < 3;
    this.chart.setOption({
      series: [
        { id: "util", showSymbol, data: trend.map((p) => [p.at, p.utilisation == null ? null : p.utilisation * 100]) },
        { id: "allocated", showSymbol, data: trend.map((p) => [p.at, p.allocated]) },
        { id: "pending", showSymbol, data: trend.map((p) => [p.at, p.pending]) },
      ],
    });
  }

  tip(params) {
    const list = Array.isArray(params) ? params : [params];
    if (!list.length) return "";
    const rows = list.map((p) => [
      p.seriesName,
      p.seriesId === "util" ? `${fmtNumber(p.value[1], 1)} %` : fmtNumber(p.value[1]),
      p.color,
    ]);
    return tipHtml(fmtTime(list[0].value[0]), rows);
  }
}

for (const card of document.querySelectorAll("[data-role=cluster-card]")) new ClusterCard(card);
