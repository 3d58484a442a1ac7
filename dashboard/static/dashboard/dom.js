// Small DOM helpers shared by the page scripts: change only what changed, never rebuild a whole table.

export function byId(id) {
  return document.getElementById(id);
}

// Data a page passes in json_script elements (<script type="application/json" id="...">).
export function jsonScript(id) {
  const el = document.getElementById(id);
  if (!el) return null;
  try {
    return JSON.parse(el.textContent);
  } catch {
    return null;
  }
}

// The states' labels and colours (clusterctl/legend.py, the same as /api/v1/choices/), passed by the page.
let legendCache = null;
export function legend(name) {
  if (!legendCache) legendCache = jsonScript("legends") || {};
  return legendCache[name] || [];
}

export function colourOf(name, value, fallback = "#999999") {
  const item = legend(name).find((entry) => entry.value === value);
  return item ? item.colour : fallback;
}

export function labelOf(name, value) {
  const item = legend(name).find((entry) => entry.value === value);
  return item ? item.label : String(value ?? "");
}

export function setText(el, text) {
  if (!el) return false;
  const value = text == null ? "" : String(text);
  if (el.textContent === value) return false;
  el.textContent = value;
  return true;
}

export function setData(el, key, value) {
  if (!el) return;
  const text = value == null ? "" : String(value);
  if (el.dataset[key] !== text) el.dataset[key] = text;
}

// A state value as a CSS class part (dashboard.views.css_token does the same for legend.css).
export function cssToken(value) {
  return String(value ?? "").replace(/[^A-Za-z0-9_-]/g, "_") || "none";
}

// A state badge: the colour comes from legend.css (class st-<legend>-<value>), the words from the legend.
export function setBadge(el, name, value) {
  if (!el) return;
  const cls = `badge st-${name}-${cssToken(value)}`;
  if (el.className !== cls) el.className = cls;
  setText(el, labelOf(name, value));
  setData(el, "state", value);
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) if (child != null) node.append(child);
  return node;
}

export function escapeHtml(value) {
  return String(value ?? "").replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c],
  );
}

//
// Numbers and times
//

export function fmtNumber(value, digits = 0) {
  if (value == null || Number.isNaN(Number(value))) return "–";
  return Number(value).toLocaleString("en-GB", { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function fmtPct(fraction, digits = 0) {
  return fraction == null ? "–" : `${fmtNumber(fraction * 100, digits)} %`;
}

export function fmtDuration(seconds) {
  if (seconds == null || Number.isNaN(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

export function fmtTime(iso) {
  if (!iso) return "–";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const sameDay = date.toDateString() === new Date().toDateString();
  return sameDay
    ? date.toLocaleTimeString("en-GB")
    : date.toLocaleString("en-GB", { dateStyle: "short", timeStyle: "medium" });
}

export function secondsSince(iso) {
  if (!iso) return null;
  const t = new Date(iso).getTime();
  return Number.isNaN(t) ? null : (Date.now() - t) / 1000;
}

//
// Colour scales readable by colour-blind users (perceptually uniform, monotonic in lightness)
//

export const VIRIDIS = [
  "#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725",
];
export const CIVIDIS = [
  "#00224e", "#123570", "#3b496c", "#575d6d", "#707173", "#8a8779", "#a69d75", "#c4b56c", "#e4cf5b", "#fee838",
];

//
// Tables kept in place: rows keyed by id, created once, updated cell by cell, moved only when out of order
//

export class KeyedRows {
  // tbody: the <tbody>; create(item) -> <tr>; update(tr, item) changes its cells (use setText);
  // empty: an element shown when there are no rows (optional); key(item) -> id (default item.id).
  constructor(tbody, { create, update, empty = null, key = (item) => item.id, onChange = null }) {
    this.tbody = tbody;
    this.create = create;
    this.update = update;
    this.empty = empty;
    this.key = key;
    this.onChange = onChange;
    this.rows = new Map();
    // Rows the server rendered (data-key: table rows, or the items of a list) are adopted, not rebuilt.
    for (const tr of tbody.querySelectorAll(":scope > [data-key]")) this.rows.set(tr.dataset.key, tr);
  }

  // The whole list, in order (a snapshot): update, add, move and remove rows as needed.
  sync(items) {
    const seen = new Set();
    items.forEach((item, i) => {
      const id = String(this.key(item));
      seen.add(id);
      const tr = this._row(id, item);
      if (this.tbody.children[i] !== tr) this.tbody.insertBefore(tr, this.tbody.children[i] || null);
    });
    for (const [id, tr] of this.rows) {
      if (!seen.has(id)) {
        tr.remove();
        this.rows.delete(id);
      }
    }
    this._changed();
  }

  upsert(item, { atTop = false } = {}) {
    const id = String(this.key(item));
    const isNew = !this.rows.has(id);
    const tr = this._row(id, item);
    if (isNew) this.tbody.insertBefore(tr, atTop ? this.tbody.firstElementChild : null);
    this._changed();
    return tr;
  }

  remove(id) {
    const tr = this.rows.get(String(id));
    if (!tr) return;
    tr.remove();
    this.rows.delete(String(id));
    this._changed();
  }

  // Reorder the existing rows to follow ids (rows not named keep their relative place at the end).
  order(ids) {
    let i = 0;
    for (const id of ids) {
      const tr = this.rows.get(String(id));
      if (!tr) continue;
      if (this.tbody.children[i] !== tr) this.tbody.insertBefore(tr, this.tbody.children[i] || null);
      i += 1;
    }
  }

  get(id) {
    return this.rows.get(String(id));
  }

  get size() {
    return this.rows.size;
  }

  _row(id, item) {
    let tr = this.rows.get(id);
    if (!tr) {
      tr = this.create(item);
      tr.dataset.key = id;
      this.rows.set(id, tr);
    }
    this.update(tr, item);
    return tr;
  }

  _changed() {
    if (this.empty) this.empty.hidden = this.rows.size > 0;
    if (this.onChange) this.onChange(this);
  }
}

// The element's cell for a field: <td data-f="name">.
export function cell(tr, field) {
  return tr.querySelector(`[data-f="${field}"]`);
}

// Show the loading note until the first data arrives; then the content.
export function loaded(root = document) {
  for (const node of root.querySelectorAll("[data-loading]")) node.hidden = true;
  for (const node of root.querySelectorAll("[data-when-loaded]")) node.hidden = false;
}

// Redraw at most once per animation frame, however many deltas arrive.
export function frameScheduler(draw) {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    window.requestAnimationFrame(() => {
      pending = false;
      draw();
    });
  };
}
