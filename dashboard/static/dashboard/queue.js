// Queue (operators): pending jobs in queue order with their place and reason, running jobs with their placement,
// recent preemptions and migrations; live from the cluster's queue socket. Filters act on the rows in place.

import { connect } from "./live.js";
import { byId, el, loaded } from "./dom.js";
import { QueueTables } from "./queue-tables.js";

const page = byId("page");
const clusterId = page.dataset.clusterId;
const tenantSelect = byId("filter-tenant");
const prioritySelect = byId("filter-priority");
const search = byId("filter-text");

function matches(tr) {
  const tenant = tenantSelect.value;
  const priority = prioritySelect.value;
  const text = search.value.trim().toLowerCase();
  if (tenant && tr.dataset.tenant !== tenant) return false;
  if (priority && tr.dataset.priority !== priority) return false;
  return !text || tr.textContent.toLowerCase().includes(text);
}

const tables = new QueueTables(page, {
  links: (job) => `/clusters/${clusterId}/jobs/${job.id}/`,
  filter: matches,
});

// Offer the tenants and priorities present; keep the options (and the choice) as the queue changes.
function offer(select, values) {
  const have = new Set([...select.options].map((o) => o.value));
  for (const value of [...values].sort()) {
    if (value && !have.has(value)) select.append(el("option", { value, text: value }));
  }
}

for (const control of [tenantSelect, prioritySelect]) control.addEventListener("change", () => tables.applyFilter());
search.addEventListener("input", () => tables.applyFilter());

connect(page.dataset.wsQueue).subscribe("queue", (event) => {
  loaded(page);
  const jobs = [...event.state.pending, ...event.state.running];
  offer(tenantSelect, new Set(jobs.map((j) => j.tenant)));
  offer(prioritySelect, new Set(jobs.map((j) => j.priority)));
  tables.draw(event.state, event);
});
