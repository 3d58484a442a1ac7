// Alerts: open ones and those cleared in the last 24 h, newest first, live from the `alerts` topic of the cluster's
// fabric socket. The server renders the first rows (data-key = alert id); the socket then updates them in place.
// Acknowledge is a plain form POST (CSRF token included) that works without this script; with it, the POST goes
// through fetch and only the row changes.

import { connect } from "./live.js";
import { byId, cell, el, fmtTime, KeyedRows, loaded, setBadge, setText } from "./dom.js";

const page = byId("page");
const clusterId = page.dataset.clusterId;
const severitySelect = byId("filter-severity");
const showCleared = byId("filter-cleared");
const ackTemplate = byId("ack-form");

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

function update(tr, alert) {
  tr.dataset.severity = alert.severity;
  tr.dataset.cleared = alert.cleared_at ? "1" : "";
  setBadge(cell(tr, "severity"), "alert_severity", alert.severity);
  setText(cell(tr, "rule"), alert.rule);
  setText(cell(tr, "object"), `${alert.object_kind} ${alert.object_key}`);
  setText(cell(tr, "message"), alert.message);
  setText(cell(tr, "first_seen"), fmtTime(alert.first_seen));
  setText(cell(tr, "last_seen"), fmtTime(alert.last_seen));
  setText(cell(tr, "state"), alert.cleared_at ? `cleared ${fmtTime(alert.cleared_at)}` : "open");
  const ack = cell(tr, "ack");
  if (alert.acknowledged_by) {
    if (ack.dataset.by !== alert.acknowledged_by) {
      ack.dataset.by = alert.acknowledged_by;
      ack.replaceChildren(el("span", { class: "acked", "data-testid": "acknowledged", text: `✓ ${alert.acknowledged_by}` }));
    }
  } else if (!ack.querySelector("form")) {
    delete ack.dataset.by;
    ack.replaceChildren(ackForm(alert.id));
  }
  tr.hidden = !visible(tr);
}

function visible(tr) {
  if (severitySelect.value && tr.dataset.severity !== severitySelect.value) return false;
  return showCleared.checked || !tr.dataset.cleared;
}

const rows = new KeyedRows(byId("alerts-table").querySelector("tbody"), {
  create,
  update,
  empty: byId("alerts-empty"),
});

function refilter() {
  for (const tr of rows.rows.values()) tr.hidden = !visible(tr);
}
severitySelect.addEventListener("change", refilter);
showCleared.addEventListener("change", refilter);
refilter();

// Acknowledge without leaving the page.
page.addEventListener("submit", async (event) => {
  const form = event.target.closest("form[data-role=ack]");
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
    const tr = form.closest("tr");
    const ack = cell(tr, "ack");
    ack.dataset.by = result.acknowledged_by;
    ack.replaceChildren(el("span", { class: "acked", "data-testid": "acknowledged", text: `✓ ${result.acknowledged_by}` }));
  } catch (error) {
    button.disabled = false;
    button.title = `Could not acknowledge: ${error.message}`;
  }
});

connect(page.dataset.wsFabric).subscribe("alerts", (event) => {
  loaded(page);
  if (event.kind === "snapshot") {
    rows.sync(event.state.alerts);
    return;
  }
  for (const id of event.data.remove || []) rows.remove(id);
  for (const alert of event.data.upsert || []) rows.upsert(alert);
  rows.order(event.state.alerts.map((a) => a.id));
});
