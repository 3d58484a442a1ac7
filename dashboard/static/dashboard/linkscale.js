// The link load scale shared by the fabric page (fabric.js) and the job page's small fabric view (minifabric.js), and
// its legend.
//
// Colour = utilisation on viridis (colour-blind safe, lightness rising with load: on the dark canvas busy links are
// bright). Two things make the load readable at a glance where a plain 0-100 % viridis made a purple haze:
// - the scale is a square root: 5 % of capacity is already a fifth of the way up, 25 % half way, so the loads a
//   cluster mostly runs at (a few % to a few tens of %) get most of the colours, and a 10-point change shows;
// - viridis' darkest fifth (dark violet, invisible on the canvas) is left out: the scale starts at a blue that
//   reads on the dark ground, and a link that carries nothing (under IDLE_BELOW) is drawn apart, dim and thin.
// UTIL_BINS colour classes; down links dashed in the state colour, links with no reading yet grey and dashed.

import { VIRIDIS, colourOf, el, labelOf } from "./dom.js";

export const UTIL_BINS = 32;
export const IDLE_BELOW = 0.005; // utilisation under 0.5 %: idle
export const IDLE = "#3a4357"; // an idle link: recedes on the dark canvas
export const NO_DATA = "#7f8797"; // a link with no reading yet: not a state, so not in the legend's colours
const SCALE_FROM = 0.22; // where on viridis 0 % load starts (below it, violet on near-black)
export const TICKS = [0, 5, 25, 50, 100]; // % of capacity marked on the legend

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

// Where a utilisation (0..1) sits on the scale, 0..1: its square root.
export function scalePosition(util) {
  return Math.sqrt(Math.min(Math.max(Number.isFinite(util) ? util : 0, 0), 1));
}

// The colour of a utilisation (0..1); idle ones get IDLE.
export function loadColour(util) {
  if (!(util >= IDLE_BELOW)) return IDLE;
  return viridis(SCALE_FROM + (1 - SCALE_FROM) * scalePosition(util));
}

// The colour class of a link (or bundle of links): "down", "nodata", "idle" or "u<bin>".
export function linkBin(link) {
  if (link.state === "down") return "down";
  if (link.util === null || link.util === undefined) return "nodata";
  if (link.util < IDLE_BELOW) return "idle";
  return `u${Math.min(UTIL_BINS - 1, Math.max(0, Math.floor(scalePosition(link.util) * UTIL_BINS)))}`;
}

// The colour of a "u<bin>" class: its middle.
export function binColour(bin) {
  const position = (Number(bin.slice(1)) + 0.5) / UTIL_BINS;
  return viridis(SCALE_FROM + (1 - SCALE_FROM) * position);
}

export function sample(width, paint) {
  const c = el("canvas", { class: "legend-sample", width, height: 12, "aria-hidden": "true" });
  paint(c.getContext("2d"));
  return c;
}

export function lineSample(colour, dash, width = 2.5) {
  return sample(28, (g) => {
    g.strokeStyle = colour;
    g.lineWidth = width;
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

// The utilisation legend: [scale bar with its (square-root spaced) ticks, idle, down, no reading].
export function utilisationLegend() {
  const width = 200;
  const bar = sample(width, (g) => {
    for (let x = 0; x < width; x++) {
      g.fillStyle = viridis(SCALE_FROM + ((1 - SCALE_FROM) * x) / (width - 1));
      g.fillRect(x, 0, 1, 12);
    }
  });
  const ticks = el("span", { class: "legend-ticks legend-ticks-placed" });
  for (const t of TICKS) {
    const tick = el("span", { text: `${t}`, "data-tick": t });
    tick.style.left = `${scalePosition(t / 100) * width}px`; // CSSOM, which the Content-Security-Policy allows
    ticks.append(tick);
  }
  return [
    el(
      "span",
      { class: "legend-scale" },
      el("span", { class: "legend-title", text: "Link utilisation, % of capacity (square-root scale)" }),
      el("span", { class: "legend-bar" }, bar, ticks),
    ),
    legendEntry(lineSample(IDLE, [], 1), "Idle (under 0.5 %)"),
    legendEntry(lineSample(colourOf("link_state", "down"), [2, 3]), labelOf("link_state", "down")),
    legendEntry(lineSample(NO_DATA, [3, 3]), "No reading yet"),
  ];
}
