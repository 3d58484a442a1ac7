// Alerts: open ones and those cleared in the last 24 h, live from the `alerts` topic of the cluster's fabric socket.
//
// A storm reads as a few rows: the topic's `groups` (dashboard.selectors.alert_groups: every listed alert grouped by
// rule, severity and cause, i.e. its message with the measurements left out) are the main table, one Acknowledge
// for the whole group; above it the count of alerts per rule (a click shows that rule's groups only). Every alert,
// newest first (the topic's newest 500), stays one click away: a group's "list" shows its own.
//
// The server renders the first rows (data-key = group key, or alert id); the socket then updates them in place.
// Acknowledging is a plain form POST (CSRF token included) that works without this script; with it, the POST goes
// through fetch and only the row changes (the topic's next delta then says who acknowledged what, on every page).

import { connect } from "./live.js";
import { byId, cell, el, fmtTime, KeyedRows, loaded, setBadge, setText } from "./dom.js";

const page = byId("page");
const clusterId = page.dataset.clusterId;
const severitySelect = byId("filter-severity");
const showCleared = byId("filter-cleared");
const ackTemplate = byId("ack-form");
const ackGroupTemplate = byId("ack-group-form");
const all = byId("alerts-all");
const groupFilter = byId("group-filter");
const SAMPLES = 3; // objects named in a group's row

const view = { rule: "", group: "", samples: new Map(), alerts: [] };

//
// Per rule
//

function ruleCounts(groups) {
  const rules = new Map();
  for (const g of groups) {
    const r = rules.get(g.rule) || { rule: g.rule, count: 0, open: 0 };
    r.count += g.count;
    r.open += g.open;
    rules.set(g.rule, r);
  }
  return [...rules.values()].sort((a, b) => b.open - a.open || b.count - a.count || a.rule.localeCompare(b.rule));
}

const ruleRows = new KeyedRows(byId("alert-rules"), {
  key: (r) => r.rule,
  create: (r) =>
    el(
      "li",
      { "data-testid": "rule-count", "data-rule": r.rule },
      el(
        "button",
        { type: "button", "data-role": "rule-filter", "aria-pressed": "false" },
        el("span", { "data-f": "rule", class: "mono" }),
        " ",
        el("b", { "data-f": "count" }),
        " ",
        el("span", { "data-f": "open", class: "muted" }),
      ),
    ),
  update: (li, r) => {
    setText(cell(li, "rule"), r.rule);
    setText(cell(li, "count"), String(r.count));
    setText(cell(li, "open"), `· ${r.open} open`);
    li.querySelector("button").setAttribute("aria-pressed", String(view.rule === r.rule));
  },
});

//
// Groups
//

function ackGroupForm(g) {
  const form = ackGroupTemplate.content.firstElementChild.cloneNode(true);
  for (const name of ["rule", "severity", "cause"]) form.elements[name].value = g[name];
  form.elements.until.value = String(g.last_id);
  return form;
}

function groupAck(td, g) {
  if (!g.unacknowledged) {
    if (!td.querySelector("[data-testid=group-acknowledged]")) {
      td.replaceChildren(el("span", { class: "acked", "data-testid": "group-acknowledged", text: "✓ all" }));
    }
    return;
  }
  let form = td.querySelector("form[data-role=ack-group]");
  if (!form) {
    form = ackGroupForm(g);
    td.replaceChildren(form);
  }
  form.elements.until.value = String(g.last_id);
  setText(form.querySelector("button"), g.count > 1 ? `Acknowledge all ${g.unacknowledged}` : "Acknowledge it");
}

function objectsCell(td, g) {
  const names = view.samples.get(g.key) || [];
  const more = g.count - names.length;
  const text = names.join(", ");
  let list = td.querySelector("[data-role=list-group]");
  if (!list) {
    list = el("button", { type: "button", class: "link", "data-role": "list-group", text: "list" });
    const names = el("span", { "data-f": "names" });
    td.replaceChildren(names, " ", el("span", { "data-f": "more", class: "muted" }), " ", list);
  }
  setText(cell(td, "names"), text);
  setText(cell(td, "more"), more > 0 ? `and ${more} more` : "");
}

const groupRows = new KeyedRows(byId("alert-groups").querySelector("tbody"), {
  key: (g) => g.key,
  create: (g) =>
    el(
      "tr",
      { "data-testid": "alert-group", "data-rule": g.rule },
      el("td", {}, el("span", { "data-f": "severity" })),
      el("td", { "data-f": "rule", class: "mono" }),
      el("td", { "data-f": "message" }),
      el("td", { "data-f": "count", class: "num" }),
      el("td", { "data-f": "objects", class: "mono" }),
      el("td", { "data-f": "first_seen" }),
      el("td", { "data-f": "last_seen" }),
      el("td", { "data-f": "ack" }),
    ),
  update: (tr, g) => {
    tr.dataset.severity = g.severity;
    tr.dataset.open = String(g.open);
    tr.dataset.count = String(g.count);
    setBadge(cell(tr, "severity"), "alert_severity", g.severity);
    setText(cell(tr, "rule"), g.rule);
    const message = cell(tr, "message");
    setText(message, g.message);
    message.title = g.cause;
    const count = cell(tr, "count");
    count.replaceChildren(el("b", { text: String(g.count) }), g.open !== g.count ? ` (${g.open} open)` : "");
    objectsCell(cell(tr, "objects"), g);
    setText(cell(tr, "first_seen"), fmtTime(g.first_seen));
    setText(cell(tr, "last_seen"), fmtTime(g.last_seen));
    groupAck(cell(tr, "ack"), g);
    tr.hidden = !groupVisible(tr);
  },
  empty: byId("alerts-empty"),
});

function groupVisible(tr) {
  if (severitySelect.value && tr.dataset.severity !== severitySelect.value) return false;
  if (view.rule && tr.dataset.rule !== view.rule) return false;
  return showCleared.checked || tr.dataset.open !== "0";
}

//
// Every alert
//

function create(alert) {
  return el(
    "tr",
    { "data-alert-id": alert.id, "data-testid": "alert-row" },
    el("td", {}, el("span", { "data-f": "severity" })),
    el("td", { "data-f": "rule" }),
    el("td", { "data-f": "object", class: "mono" }),
    el("td", { "data-f": "message" }),
    el("td", { "data-f": "first_seen" }),
    el("td", { "data-f": "last_seen" }),
    el("td", { "data-f": "state" }),
    el("td", { "data-f": "ack" }),
  );
}

function ackForm(alertId) {
  const form = ackTemplate.content.firstElementChild.cloneNode(true);
  form.action = `/clusters/${clusterId}/alerts/${alertId}/acknowledge/`;
  return form;
}

function acked(td, by) {
  td.dataset.by = by;
  td.replaceChildren(el("span", { class: "acked", "data-testid": "acknowledged", text: `✓ ${by}` }));
}

function update(tr, alert) {
  tr.dataset.severity = alert.severity;
  tr.dataset.cleared = alert.cleared_at ? "1" : "";
  tr.dataset.group = alert.group || "";
  setBadge(cell(tr, "severity"), "alert_severity", alert.severity);
  setText(cell(tr, "rule"), alert.rule);
  setText(cell(tr, "object"), `${alert.object_kind} ${alert.object_key}`);
  setText(cell(tr, "message"), alert.message);
  setText(cell(tr, "first_seen"), fmtTime(alert.first_seen));
  setText(cell(tr, "last_seen"), fmtTime(alert.last_seen));
  setText(cell(tr, "state"), alert.cleared_at ? `cleared ${fmtTime(alert.cleared_at)}` : "open");
  const ack = cell(tr, "ack");
  if (alert.acknowledged_by) {
    if (ack.dataset.by !== alert.acknowledged_by) acked(ack, alert.acknowledged_by);
  } else if (!ack.querySelector("form")) {
    delete ack.dataset.by;
    ack.replaceChildren(ackForm(alert.id));
  }
  tr.hidden = !visible(tr);
}

function visible(tr) {
  if (severitySelect.value && tr.dataset.severity !== severitySelect.value) return false;
  if (view.group && tr.dataset.group !== view.group) return false;
  if (view.rule && !tr.dataset.group.startsWith(`${view.rule}|`)) return false;
  return showCleared.checked || !tr.dataset.cleared;
}

const rows = new KeyedRows(byId("alerts-table").querySelector("tbody"), { create, update });

//
// Filters
//

function refilter() {
  for (const tr of groupRows.rows.values()) tr.hidden = !groupVisible(tr);
  for (const tr of rows.rows.values()) tr.hidden = !visible(tr);
  for (const li of ruleRows.rows.values()) {
    li.querySelector("button").setAttribute("aria-pressed", String(view.rule === li.dataset.rule));
  }
  groupFilter.hidden = !view.group;
}
severitySelect.addEventListener("change", refilter);
showCleared.addEventListener("change", refilter);
byId("alert-rules").addEventListener("click", (event) => {
  const li = event.target.closest("li[data-rule]");
  if (!li) return;
  view.rule = view.rule === li.dataset.rule ? "" : li.dataset.rule;
  refilter();
});
byId("alert-groups").addEventListener("click", (event) => {
  const button = event.target.closest("[data-role=list-group]");
  if (!button) return;
  view.group = button.closest("tr").dataset.key;
  all.open = true;
  refilter();
  all.scrollIntoView({ block: "start" });
});
byId("group-filter-clear").addEventListener("click", (event) => {
  event.preventDefault(); // inside the <summary>: do not fold the list
  view.group = "";
  refilter();
});

//
// Acknowledge without leaving the page: one alert, or a whole group
//

page.addEventListener("submit", async (event) => {
  const form = event.target.closest("form[data-role=ack], form[data-role=ack-group]");
  if (!form) return;
  event.preventDefault();
  const button = form.querySelector("button");
  button.disabled = true;
  try {
    const response = await fetch(form.action, {
      method: "POST",
      body: new FormData(form),
      headers: { Accept: "application/json", "X-CSRFToken": form.elements.csrfmiddlewaretoken.value },
      credentials: "same-origin",
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const result = await response.json();
    if (form.dataset.role === "ack") {
      acked(cell(form.closest("tr"), "ack"), result.acknowledged_by);
      return;
    }
    // The group: its row and its listed alerts, until the topic's delta confirms.
    const td = form.closest("td");
    const done = `✓ ${result.acknowledged_by}`;
    td.replaceChildren(el("span", { class: "acked", "data-testid": "group-acknowledged", text: done }));
    for (const tr of rows.rows.values()) {
      const ack = cell(tr, "ack");
      if (tr.dataset.group === result.group && !ack.dataset.by) acked(ack, result.acknowledged_by);
    }
  } catch (error) {
    button.disabled = false;
    button.title = `Could not acknowledge: ${error.message}`;
  }
});

//
// Live data
//

function samplesOf(alerts) {
  const samples = new Map();
  for (const a of alerts) {
    const list = samples.get(a.group) || [];
    if (list.length < SAMPLES) list.push(`${a.object_kind} ${a.object_key}`);
    samples.set(a.group, list);
  }
  return samples;
}

function drawGroups(groups) {
  groupRows.sync(groups);
  ruleRows.sync(ruleCounts(groups));
  setText(byId("alerts-all-count"), `(${view.alerts.length}${view.alerts.length >= 500 ? ", the newest 500" : ""})`);
  refilter();
}

connect(page.dataset.wsFabric).subscribe("alerts", (event) => {
  loaded(page);
  view.alerts = event.state.alerts;
  view.samples = samplesOf(view.alerts);
  if (event.kind === "snapshot") {
    rows.sync(event.state.alerts);
  } else {
    for (const id of event.data.remove || []) rows.remove(id);
    for (const alert of event.data.upsert || []) rows.upsert(alert);
    rows.order(event.state.alerts.map((a) => a.id));
  }
  drawGroups(event.state.groups || []);
});
refilter();
