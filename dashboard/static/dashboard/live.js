// Live data for the dashboard pages: one WebSocket per socket path, a store per topic, subscribers per topic.
//
// The message contract is docs/dashboard.md ("Sockets"). Usage, from any page module:
//
//   import { connect } from "./live.js";
//   const live = connect("/ws/clusters/1/fabric/");          // shared: a second connect() returns the same socket
//   const off = live.subscribe("gpus", (event) => { ... });  // event: {kind, topic, data, state, seq}
//
// The socket asks the server only for the topics the page subscribes to: it opens once the code that called
// connect() has run (a microtask later), with the topics subscribed so far in its URL (`?topics=gpus`), and a topic
// subscribed after that is asked for with {"type": "subscribe", "topics": [...]}. Every reconnect asks for all of
// them again. A socket nobody subscribed to by then asks for nothing, which the server answers with every topic.
//
// - kind "snapshot": `state` is the topic's whole state (rebuild what depends on it). It also comes after every
//   reconnect and resync, so a page that draws snapshots right never shows stale data.
// - kind "delta": `data` is the delta as sent (draw only what it names); `state` already has it applied.
// A subscriber that joins late gets the current state at once as a "snapshot".
//
// Store shapes (`state`), built from the snapshots and kept up to date by the deltas:
//   overview  the object itself (its deltas replace it whole)
//   fabric    {switches, nodes, links, aggregated, byId: {switches: Map, nodes: Map, links: Map}}  (ids as strings)
//   gpus      {gpus, metrics, byId: Map}
//   alerts    {alerts (newest first), groups (by rule, severity and cause), byId: Map}
//   queue     {pending (queue order), running, recent (newest first), byId: Map}
//   other     the snapshot's data; a delta is merged into it shallowly
//
// The socket reconnects with exponential backoff (0.5 s doubling, capped at 10 s, with jitter), except after the
// server's refusals (4400 unknown topic, 4401 signed out, 4403 no access, 4404 unknown cluster). The attempt counter
// goes back to 0 only when a snapshot arrives, not when the socket opens: a server that accepts and then closes backs
// off too. Each topic has a group of its own on the server, so its own seq: a delta whose seq skips one of its topic's
// makes the client send {"type": "resync", "topics": [topic]}; that topic's deltas are then ignored until its fresh
// snapshot arrives.
// The header badge (#live-state) shows the worst state of the page's sockets in data-state:
// "connecting", "open", "reconnecting" or "closed"; a socket is "open" ("live") from its first snapshot on, not
// from the moment it opens. Frames are JSON text, or binary for the fabric and GPU topics (decodeBinary); a big one
// comes in parts (Joiner).

const BACKOFF_START_MS = 500;
const BACKOFF_CAP_MS = 10_000;
const RESYNC_RETRY_MS = 5_000;
const REFUSALS = {
  4400: ["unknown topic", "the page asked for a topic this socket does not carry"],
  4401: ["signed out", "signed out: sign in again"],
  4403: ["no access", "no access to this cluster"],
  4404: ["unknown cluster", "unknown cluster"],
};
const RECENT_MAX = 200;

const sockets = new Map();

export function socketUrl(path) {
  const scheme = window.location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${window.location.host}${path}`;
}

export function connect(path) {
  let socket = sockets.get(path);
  if (!socket) {
    socket = new LiveSocket(path);
    sockets.set(path, socket);
    socket.start();
  }
  return socket;
}

// The socket's URL asking for `topics` (none: all of them, as the server answers a URL without the parameter).
export function topicsUrl(path, topics) {
  if (!topics.length) return socketUrl(path);
  const query = `topics=${topics.map(encodeURIComponent).join(",")}`;
  return socketUrl(`${path}${path.includes("?") ? "&" : "?"}${query}`);
}

// The sockets of this page (tests and the console can inspect them).
export function allSockets() {
  return [...sockets.values()];
}

function indexBy(items, key = "id") {
  const map = new Map();
  for (const item of items || []) map.set(String(item[key]), item);
  return map;
}

function byNewest(field) {
  return (a, b) => String(b[field] || "").localeCompare(String(a[field] || "")) || Number(b.id) - Number(a.id);
}

// How each topic's snapshot becomes a store, and how a delta changes it.
const TOPICS = {
  overview: {
    snapshot: (data) => data,
    delta: (_state, data) => data,
  },
  fabric: {
    snapshot: (data) => ({
      ...data,
      switches: data.switches || [],
      nodes: data.nodes || [],
      links: data.links || [],
      byId: { switches: indexBy(data.switches), nodes: indexBy(data.nodes), links: indexBy(data.links) },
    }),
    delta: (state, data) => {
      for (const kind of ["switches", "nodes", "links"]) {
        for (const [id, patch] of Object.entries(data[kind] || {})) {
          const item = state.byId[kind].get(String(id));
          if (item) Object.assign(item, patch);
        }
      }
      return state;
    },
  },
  gpus: {
    snapshot: (data) => ({ ...data, gpus: data.gpus || [], byId: indexBy(data.gpus) }),
    delta: (state, data) => {
      for (const [id, patch] of Object.entries(data.gpus || {})) {
        const gpu = state.byId.get(String(id));
        if (gpu) Object.assign(gpu, patch);
      }
      return state;
    },
  },
  alerts: {
    snapshot: (data) => {
      const alerts = [...(data.alerts || [])];
      return { alerts, groups: data.groups || [], byId: indexBy(alerts) };
    },
    delta: (state, data) => {
      if (data.groups) state.groups = data.groups; // sent whole when any group changed (they are few)
      for (const id of data.remove || []) state.byId.delete(String(id));
      for (const alert of data.upsert || []) {
        const old = state.byId.get(String(alert.id));
        state.byId.set(String(alert.id), old ? Object.assign(old, alert) : alert);
      }
      state.alerts = [...state.byId.values()].sort(byNewest("last_seen"));
      return state;
    },
  },
  queue: {
    snapshot: (data) => {
      const pending = [...(data.pending || [])];
      const running = [...(data.running || [])];
      const byId = new Map();
      for (const job of pending) byId.set(String(job.id), { list: "pending", job });
      for (const job of running) byId.set(String(job.id), { list: "running", job });
      // Positions are global queue places; on an operator's socket they are simply 1..n, so a new order
      // renumbers them. A tenant's socket shows some of the queue only: its positions come from the server.
      const contiguous = pending.every((job, i) => job.position === i + 1);
      return { pending, running, recent: [...(data.recent || [])], byId, contiguous };
    },
    delta: (state, data) => {
      const removed = new Set((data.remove || []).map(String));
      for (const id of removed) state.byId.delete(id);
      const upsert = data.upsert || {};
      for (const list of ["pending", "running"]) {
        for (const job of upsert[list] || []) {
          const id = String(job.id);
          const old = state.byId.get(id);
          if (old && old.list === list) Object.assign(old.job, job);
          else {
            state.byId.delete(id); // a job that moves list goes to the end of its new one
            state.byId.set(id, { list, job: old ? Object.assign(old.job, job) : job });
          }
        }
      }
      const inList = (list) => [...state.byId.values()].filter((e) => e.list === list).map((e) => e.job);
      let pending = inList("pending");
      if (Array.isArray(data.order)) {
        const place = new Map(data.order.map((id, i) => [String(id), i]));
        pending.sort((a, b) => (place.get(String(a.id)) ?? 1e9) - (place.get(String(b.id)) ?? 1e9));
        if (state.contiguous) {
          const given = new Set((upsert.pending || []).filter((j) => j.position != null).map((j) => String(j.id)));
          pending.forEach((job, i) => {
            if (!given.has(String(job.id))) job.position = i + 1;
          });
        }
      } else {
        const old = new Map(state.pending.map((job, i) => [String(job.id), i]));
        pending.sort((a, b) => (old.get(String(a.id)) ?? 1e9) - (old.get(String(b.id)) ?? 1e9));
      }
      state.pending = pending;
      state.running = inList("running");
      if (data.recent && data.recent.length) state.recent = [...data.recent, ...state.recent].slice(0, RECENT_MAX);
      return state;
    },
  },
};

// The compact binary frame of the big topics (dashboard/broadcast.py, `wire`): a uint32 header length, the JSON
// header (the frame, its lists of items replaced by {"$rows": i} or, in a delta, {"$byid": i}; "tables": the
// columns of each), then every column as a typed array. Decoded here into the frame as JSON would have carried it.
const ARRAYS = { u8: Uint8Array, u16: Uint16Array, u32: Uint32Array, f64: Float64Array };

function decodeColumn(col, n, buffer, bodyAt) {
  const raw = new ARRAYS[col.t](buffer, bodyAt + col.o, n);
  const out = new Array(n);
  if (col.e === "f64") {
    for (let i = 0; i < n; i++) out[i] = raw[i];
    return out;
  }
  if (col.e === "table") {
    for (let i = 0; i < n; i++) out[i] = raw[i] === col.absent ? ABSENT : col.v[raw[i]];
    return out;
  }
  const scale = col.s || 1;
  if (col.e === "delta") {
    let v = col.first;
    for (let i = 0; i < n; i++) {
      if (i) v += raw[i] + col.base;
      out[i] = scale === 1 ? v : v / scale;
    }
    return out;
  }
  for (let i = 0; i < n; i++) {
    out[i] = raw[i] === col.null ? null : scale === 1 ? raw[i] + col.base : (raw[i] + col.base) / scale;
  }
  return out;
}

const ABSENT = Symbol("absent");

// A message longer than the server's part size comes as consecutive binary parts (dashboard/broadcast.py, `parts`):
// a 16-byte header (uint32 0xFFFFFFFF, uint32 message id, uint16 index, uint16 count, uint32 kind: 0 binary, 1 text)
// and a slice of the message. Joined here in order into the message the server encoded.
const PART_MARK = 0xffffffff;
const PART_HEADER = 16;

export class Joiner {
  constructor() {
    this.id = null;
    this.pieces = [];
  }

  // The whole message `data` completes (a message that is not a part is whole), else null.
  feed(data) {
    if (typeof data === "string" || data.byteLength < PART_HEADER) return data;
    const view = new DataView(data);
    if (view.getUint32(0, true) !== PART_MARK) return data;
    const id = view.getUint32(4, true);
    const index = view.getUint16(8, true);
    const count = view.getUint16(10, true);
    const kind = view.getUint32(12, true);
    if (index === 0) {
      this.id = id;
      this.pieces = [];
    } else if (id !== this.id || index !== this.pieces.length) {
      this.id = null; // a part out of order: the message is dropped (its topic's seq gap asks for a resync)
      this.pieces = [];
      return null;
    }
    this.pieces.push(new Uint8Array(data, PART_HEADER));
    if (this.pieces.length < count) return null;
    const whole = new Uint8Array(this.pieces.reduce((n, piece) => n + piece.length, 0));
    let at = 0;
    for (const piece of this.pieces) {
      whole.set(piece, at);
      at += piece.length;
    }
    this.id = null;
    this.pieces = [];
    return kind === 1 ? new TextDecoder().decode(whole) : whole.buffer;
  }
}

export function decodeBinary(buffer) {
  const size = new DataView(buffer).getUint32(0, true);
  const frame = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, size)));
  const bodyAt = 4 + size;
  const data = frame.data || {};
  for (const [key, value] of Object.entries(data)) {
    if (!value || typeof value !== "object" || !("$rows" in value || "$byid" in value)) continue;
    const spec = frame.tables[value.$rows ?? value.$byid];
    const cols = spec.cols.map((col) => [col.k, decodeColumn(col, spec.n, buffer, bodyAt)]);
    const items = new Array(spec.n);
    for (let i = 0; i < spec.n; i++) {
      const item = {};
      for (const [k, values] of cols) if (values[i] !== ABSENT) item[k] = values[i];
      items[i] = item;
    }
    if ("$rows" in value) data[key] = items;
    else {
      const byId = {};
      for (const item of items) {
        const id = item.id;
        delete item.id;
        byId[String(id)] = item;
      }
      data[key] = byId;
    }
  }
  delete frame.tables;
  return frame;
}

const GENERIC = {
  snapshot: (data) => data,
  delta: (state, data) => Object.assign(state, data),
};

class LiveSocket {
  constructor(path) {
    this.path = path;
    this.url = socketUrl(path);
    this.state = "connecting";
    this.detail = "";
    this.stores = new Map();
    this.subscribers = new Map();
    this.wanted = new Set(); // every topic the page subscribed to: what each (re)connect asks for
    this.asked = null; // what this connection asked for (null: all, before the first open too)
    this.topicSeq = new Map(); // seq of each topic's last snapshot
    this.lastSeq = new Map(); // seq of each topic's last frame on this connection
    this.awaiting = new Set(); // topics whose fresh snapshot we wait for after a resync
    this.resyncAt = new Map();
    this.attempt = 0;
    this.ws = null;
    this.timer = null;
    this.messages = 0;
    this.refusal = "";
  }

  start() {
    // Later, so that the subscriptions made right after connect() are in the first URL.
    queueMicrotask(() => this._open());
    updateBadge();
  }

  subscribe(topic, callback) {
    if (!this.subscribers.has(topic)) this.subscribers.set(topic, new Set());
    this.subscribers.get(topic).add(callback);
    this.wanted.add(topic);
    this._askForMore();
    if (this.stores.has(topic)) {
      const state = this.stores.get(topic);
      callback({ kind: "snapshot", topic, data: state, state, seq: this.topicSeq.get(topic) });
    }
    return () => this.subscribers.get(topic).delete(callback);
  }

  get(topic) {
    return this.stores.get(topic);
  }

  // Fresh snapshots of `topics` (all of this socket's when left out).
  resync(topics = null) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    this.ws.send(JSON.stringify(topics ? { type: "resync", topics } : { type: "resync" }));
    for (const topic of topics || this.stores.keys()) {
      this.resyncAt.set(topic, Date.now());
      this.awaiting.add(topic);
    }
  }

  // Topics subscribed after this connection's URL was made: asked for once it is open (else at its reconnect).
  _askForMore() {
    if (this.asked === null || !this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    const more = [...this.wanted].filter((topic) => !this.asked.has(topic));
    if (!more.length) return;
    this.ws.send(JSON.stringify({ type: "subscribe", topics: more }));
    for (const topic of more) this.asked.add(topic);
  }

  _open() {
    this.timer = null;
    this._setState(this.attempt ? "reconnecting" : "connecting", "");
    const topics = [...this.wanted];
    this.asked = topics.length ? new Set(topics) : null;
    this.url = topicsUrl(this.path, topics);
    let ws;
    try {
      ws = new WebSocket(this.url);
    } catch (error) {
      this._retry(String(error));
      return;
    }
    this.ws = ws;
    ws.binaryType = "arraybuffer";
    ws.addEventListener("open", () => {
      // Not "live" yet, and the backoff stays: a server that accepts and then closes (1011, a frame too big) is
      // retried ever more slowly. Both change with the first snapshot (_handle).
      this.lastSeq.clear();
      this.awaiting.clear();
      this._askForMore(); // subscribed while it was connecting
      this._setState(this.attempt ? "reconnecting" : "connecting", "open, waiting for the first snapshot");
    });
    const joiner = new Joiner(); // parts of one connection's messages
    ws.addEventListener("message", (event) => {
      const whole = joiner.feed(event.data);
      if (whole === null) return;
      let message;
      try {
        message = typeof whole === "string" ? JSON.parse(whole) : decodeBinary(whole);
      } catch (error) {
        console.error("live: a frame that does not decode", error);
        return;
      }
      this._handle(message);
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (REFUSALS[event.code]) {
        this.refusal = REFUSALS[event.code][0];
        this._setState("closed", REFUSALS[event.code][1]);
        return;
      }
      this._retry(event.code ? `closed (${event.code})` : "closed");
    });
  }

  _retry(why) {
    const delay = Math.min(BACKOFF_CAP_MS, BACKOFF_START_MS * 2 ** this.attempt) * (0.75 + Math.random() * 0.25);
    this.attempt += 1;
    this._setState("reconnecting", `${why}; retrying in ${Math.ceil(delay / 1000)} s`);
    this.timer = window.setTimeout(() => this._open(), delay);
  }

  _setState(state, detail) {
    this.state = state;
    this.detail = detail;
    updateBadge();
  }

  _handle(message) {
    const { type, topic, seq, data } = message || {};
    if (!topic || (type !== "snapshot" && type !== "delta")) return;
    this.messages += 1;
    const reducer = TOPICS[topic] || GENERIC;
    if (type === "snapshot") {
      if (this.state !== "open") {
        this.attempt = 0; // a snapshot arrived: the connection works, the next failure starts the backoff afresh
        this._setState("open", "");
      }
      const state = reducer.snapshot(data || {});
      this.stores.set(topic, state);
      this.topicSeq.set(topic, seq);
      this.awaiting.delete(topic);
      if (typeof seq === "number") this.lastSeq.set(topic, Math.max(this.lastSeq.get(topic) ?? seq, seq));
      this._emit({ kind: "snapshot", topic, data: state, state, seq });
      return;
    }
    // A delta: only on top of this connection's snapshot of its topic, and only if none was missed. Every frame of
    // a topic's group has its own seq (snapshots carry the group's current one): an old seq is a repeat.
    if (typeof seq === "number") {
      const last = this.lastSeq.get(topic);
      this.lastSeq.set(topic, Math.max(last ?? seq, seq));
      if (last !== undefined && seq <= last) return;
      if (last !== undefined && seq > last + 1) {
        const since = Date.now() - (this.resyncAt.get(topic) ?? 0);
        if (!this.awaiting.has(topic) || since > RESYNC_RETRY_MS) this.resync([topic]);
        return;
      }
    }
    if (!this.stores.has(topic) || this.awaiting.has(topic)) return;
    const known = this.topicSeq.get(topic);
    if (typeof seq === "number" && typeof known === "number" && seq <= known) return; // already in the snapshot
    const state = reducer.delta(this.stores.get(topic), data || {});
    this.stores.set(topic, state);
    this._emit({ kind: "delta", topic, data: data || {}, state, seq });
  }

  _emit(event) {
    for (const callback of this.subscribers.get(event.topic) || []) {
      try {
        callback(event);
      } catch (error) {
        console.error(`live: subscriber of ${event.topic} failed`, error);
      }
    }
  }
}

const BADGE_TEXT = { connecting: "connecting…", open: "live", reconnecting: "reconnecting…", closed: "offline" };
const BADGE_RANK = { open: 0, connecting: 1, reconnecting: 2, closed: 3 };

function updateBadge() {
  const badge = document.getElementById("live-state");
  if (!badge) return;
  const all = allSockets();
  if (!all.length) return;
  const worst = all.reduce((a, b) => (BADGE_RANK[b.state] > BADGE_RANK[a.state] ? b : a));
  badge.hidden = false;
  badge.dataset.state = worst.state;
  badge.textContent = worst.state === "closed" && worst.refusal ? worst.refusal : BADGE_TEXT[worst.state];
  badge.title = all.map((s) => `${s.path}: ${s.state}${s.detail ? ` (${s.detail})` : ""}`).join("\n");
}
