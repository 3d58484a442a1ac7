// The link utilisation scale shared by the fabric page (fabric.js) and the job page's small fabric view
// (minifabric.js): viridis in UTIL_BINS bins (colour-blind safe, perceptually uniform; on the dark canvas idle links
// are dark, busy bright), down links dashed, links with no reading grey; and its legend.

import { VIRIDIS, colourOf, el, labelOf } from "./dom.js";

export const UTIL_BINS = 20;
export const NO_DATA = "#7f8797"; // a link with no reading yet: not a state, so not in the legend's colours

// Viridis, interpolated between dom.js's stops.
const VIRIDIS_RGB = VIRIDIS.map((h) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16)));
export function viridis(t) {
  const v = Math.min(Math.max(Number.isFinite(t) ? t : 0, 0), 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(v), VIRIDIS.length - 2);
  const f = v - i;
  const a = VIRIDIS_RGB[i];
  const b = VIRIDIS_RGB[i + 1];
  return `rgb(${a.map((x, k) => Math.round(x + (b[k] - x) * f)).join(",")})`;
}

// The colour class of a link: "down", "nodata" or "u<bin>".
export function linkBin(link) {
  if (link.state === "down") return "down";
  if (link.util === null || link.util === undefined) return "nodata";
  return `u${Math.min(UTIL_BINS - 1, Math.max(0, Math.floor(link.util * UTIL_BINS)))}`;
}

export function sample(width, paint) {
  const c = el("canvas", { class: "legend-sample", width, height: 12, "aria-hidden": "true" });
  paint(c.getContext("2d"));
  return c;
}

export function lineSample(colour, dash) {
  return sample(28, (g) => {
    g.strokeStyle = colour;
    g.lineWidth = 2.5;
    g.setLineDash(dash || []);
    g.beginPath();
    g.moveTo(1, 6);
    g.lineTo(27, 6);
    g.stroke();
  });
}

export function legendEntry(swatch, label) {
  return el("span", { class: "legend-entry" }, swatch, el("span", { text: label }));
}

// The utilisation legend: [scale bar with ticks, down, no reading].
export function utilisationLegend() {
  const bar = sample(200, (g) => {
    for (let x = 0; x < 200; x++) {
      g.fillStyle = viridis(x / 199);
      g.fillRect(x, 0, 1, 12);
    }
  });
  const ticks = el("span", { class: "legend-ticks" }, ...[0, 25, 50, 75, 100].map((t) => el("span", { text: `${t}` })));
  return [
    el(
      "span",
      { class: "legend-scale" },
      el("span", { class: "legend-title", text: "Link utilisation, % of link capacity" }),
      el("span", { class: "legend-bar" }, bar, ticks),
    ),
    legendEntry(lineSample(colourOf("link_state", "down"), [2, 3]), labelOf("link_state", "down")),
    legendEntry(lineSample(NO_DATA, [3, 3]), "No reading yet"),
  ];
}
