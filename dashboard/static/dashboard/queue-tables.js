// The queue's tables (pending in order, running with placement, recent preemptions and migrations), shared by the
// operators' Queue page and the tenant's /my/ page. Rows are keyed by job id (data-job-id), created once and then
// updated cell by cell; a new queue order moves rows, it does not rebuild them. Waiting times tick locally.

import { cell, el, fmtDuration, fmtTime, KeyedRows, setText } from "./dom.js";

const NODES_SHOWN = 6;
const RECENT_SHOWN = 50;

function jobCell(job, links) {
  const text = `${job.name} (#${job.id})`;
  return links ? el("a", { href: links(job), "data-f": "name", text }) : el("span", { "data-f": "name", text });
}

export class QueueTables {
  // root: the element holding tables #pending, #running, #recent (tbody each) and their empty notes;
  // links(job) -> URL of the job's page (operators: the cluster's job page; a tenant: /my/jobs/<id>/), or null;
  // filter(job) -> bool (optional).
  constructor(root, { links = null, showTenant = true, filter = null } = {}) {
    this.root = root;
    this.links = links;
    this.showTenant = showTenant;
    this.filter = filter;
    this.waitRef = new Map(); // job id -> [wait_s at receipt, Date.now() at receipt]
    this.startAt = new Map(); // job id -> the job (its start_at, start_estimate), to count down locally
    const part = (name) => root.querySelector(`[data-table=${name}]`);
    this.pending = new KeyedRows(part("pending").querySelector("tbody"), {
      create: (job) => this.pendingRow(job),
      update: (tr, job) => this.updatePending(tr, job),
      empty: root.querySelector("[data-empty=pending]"),
    });
    this.running = new KeyedRows(part("running").querySelector("tbody"), {
      create: (job) => this.runningRow(job),
      update: (tr, job) => this.updateRunning(tr, job),
      empty: root.querySelector("[data-empty=running]"),
    });
    this.recent = new KeyedRows(part("recent").querySelector("tbody"), {
      key: (e) => `${e.job}:${e.kind}:${e.at}`,
      create: (e) => this.recentRow(e),
      update: () => {},
      empty: root.querySelector("[data-empty=recent]"),
    });
    window.setInterval(() => this.tick(), 5_000);
  }

  // The whole queue state (a snapshot, or the store after a delta): rows change only where their data did.
  draw(state, event = null) {
    if (!event || event.kind === "snapshot") {
      this.pending.sync(state.pending);
      this.running.sync(state.running);
      this.recent.sync(state.recent.slice(0, RECENT_SHOWN));
    } else {
      const d = event.data;
      for (const id of d.remove || []) {
        this.pending.remove(id);
        this.running.remove(id);
        this.waitRef.delete(String(id));
        this.startAt.delete(String(id));
      }
      for (const job of (d.upsert && d.upsert.running) || []) {
        this.pending.remove(job.id);
        this.running.upsert(state.byId.get(String(job.id)).job);
      }
      for (const job of (d.upsert && d.upsert.pending) || []) {
        this.running.remove(job.id);
        this.pending.upsert(state.byId.get(String(job.id)).job);
      }
      if (d.order) {
        this.pending.order(state.pending.map((job) => job.id));
        // Positions may have moved for rows the delta did not name (renumbered by the store).
        for (const job of state.pending) setText(cell(this.pending.get(job.id), "position"), job.position ?? "–");
      }
      for (const entry of (d.recent || []).slice().reverse()) this.recent.upsert(entry, { atTop: true });
      while (this.recent.size > RECENT_SHOWN) {
        const last = this.recent.tbody.lastElementChild;
        this.recent.remove(last.dataset.key);
      }
    }
    this.applyFilter();
    this.counts();
  }

  pendingRow(job) {
    return el(
      "tr",
      { "data-job-id": job.id, "data-testid": "pending-row" },
      el("td", { "data-f": "position", class: "num" }),
      el("td", {}, jobCell(job, this.links)),
      this.showTenant ? el("td", { "data-f": "tenant" }) : null,
      el("td", { "data-f": "shape", class: "num" }),
      el("td", { "data-f": "priority" }),
      el("td", { "data-f": "reason", class: "reason", "data-testid": "pending-reason" }),
      el("td", { "data-f": "start", "data-testid": "start-estimate" }),
      el("td", { "data-f": "wait", class: "num" }),
    );
  }

  updatePending(tr, job) {
    tr.dataset.tenant = job.tenant || "";
    tr.dataset.priority = job.priority || "";
    setText(cell(tr, "position"), job.position ?? "–");
    setText(cell(tr, "name"), `${job.name} (#${job.id})`);
    setText(cell(tr, "tenant"), job.tenant);
    setText(cell(tr, "shape"), shapeText(job));
    setText(cell(tr, "priority"), job.priority);
    setText(cell(tr, "reason"), job.reason || "–");
    this.startAt.set(String(job.id), job);
    setText(cell(tr, "start"), startText(job));
    if (job.wait_s != null) this.waitRef.set(String(job.id), [job.wait_s, Date.now()]);
    setText(cell(tr, "wait"), this.waitText(job));
  }

  runningRow(job) {
    return el(
      "tr",
      { "data-job-id": job.id, "data-testid": "running-row" },
      el("td", {}, jobCell(job, this.links)),
      this.showTenant ? el("td", { "data-f": "tenant" }) : null,
      el("td", { "data-f": "shape", class: "num" }),
      el("td", { "data-f": "priority" }),
      el("td", { "data-f": "started" }),
      el("td", { "data-f": "nodes", class: "nodes", "data-testid": "placement" }),
    );
  }

  updateRunning(tr, job) {
    tr.dataset.tenant = job.tenant || "";
    tr.dataset.priority = job.priority || "";
    setText(cell(tr, "name"), `${job.name} (#${job.id})`);
    setText(cell(tr, "tenant"), job.tenant);
    setText(cell(tr, "shape"), shapeText(job));
    setText(cell(tr, "priority"), job.priority);
    setText(cell(tr, "started"), fmtTime(job.started_at));
    const nodes = job.nodes || [];
    const more = nodes.length > NODES_SHOWN ? ` +${nodes.length - NODES_SHOWN} more` : "";
    const nodesCell = cell(tr, "nodes");
    setText(nodesCell, nodes.slice(0, NODES_SHOWN).join(", ") + more);
    if (nodesCell) nodesCell.title = nodes.join(", ");
  }

  recentRow(e) {
    return el(
      "tr",
      { "data-job-id": e.job, "data-testid": "recent-row" },
      el("td", { text: fmtTime(e.at) }),
      el("td", {}, jobCell({ id: e.job, name: e.name }, this.links)),
      this.showTenant ? el("td", { text: e.tenant || "" }) : null,
      el("td", {}, el("span", { class: `kind kind-${e.kind}`, text: e.kind })),
      el("td", { class: "reason", text: e.reason || "" }),
    );
  }

  waitText(job) {
    const ref = this.waitRef.get(String(job.id));
    if (ref) return fmtDuration(ref[0] + (Date.now() - ref[1]) / 1000);
    if (job.submitted_at) return fmtDuration((Date.now() - new Date(job.submitted_at).getTime()) / 1000);
    return "–";
  }

  tick() {
    for (const [id, tr] of this.pending.rows) {
      const ref = this.waitRef.get(id);
      if (ref) setText(cell(tr, "wait"), fmtDuration(ref[0] + (Date.now() - ref[1]) / 1000));
      const job = this.startAt.get(id);
      if (job) setText(cell(tr, "start"), startText(job));
    }
  }

  applyFilter() {
    if (!this.filter) return;
    for (const table of [this.pending, this.running, this.recent]) {
      for (const tr of table.rows.values()) {
        const show = this.filter(tr);
        if (tr.hidden === show) tr.hidden = !show;
      }
    }
    this.counts();
  }

  counts() {
    for (const [name, table] of [["pending", this.pending], ["running", this.running], ["recent", this.recent]]) {
      const node = this.root.querySelector(`[data-count=${name}]`);
      if (!node) continue;
      const shown = [...table.rows.values()].filter((tr) => !tr.hidden).length;
      setText(node, shown === table.size ? String(table.size) : `${shown} of ${table.size}`);
    }
  }
}

// What a pending job's expected start rests on, in a few words (dashboard/views.py START_WORDS says the same).
const START_WORDS = {
  preempting: "after preemption",
  stopping: "as jobs stop",
  backfill: "reserved",
  leaf: "waiting for one leaf",
};

// "in 55 min 03 s (reserved)", "any moment (after preemption)" once the time has come, "–" without an estimate.
export function startText(job) {
  if (!job.start_at) return "–";
  const left = (new Date(job.start_at).getTime() - Date.now()) / 1000;
  const when = left >= 1 ? `in ${fmtDuration(left)}` : "any moment";
  return `${when} (${START_WORDS[job.start_estimate] || job.start_estimate})`;
}

// What it asks for, in words: the server writes it (dashboard/selectors.py shape_text), e.g. "MPS, 25 % of 1 GPU".
export function shapeText(job) {
  if (job.shape) return job.shape;
  return `${job.gpus ?? "?"} GPU${job.gpus === 1 ? "" : "s"}`;
}
