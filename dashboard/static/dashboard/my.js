// The tenant's page: its own jobs, live from the queue socket of each cluster it uses (the server sends a tenant
// only its own jobs; positions are places in the whole queue). One table set per cluster section.

import { connect } from "./live.js";
import { loaded } from "./dom.js";
import { QueueTables } from "./queue-tables.js";

for (const section of document.querySelectorAll("[data-role=tenant-cluster]")) {
  const tables = new QueueTables(section, { links: (job) => `/my/jobs/${job.id}/`, showTenant: false });
  connect(section.dataset.wsQueue).subscribe("queue", (event) => {
    loaded(section);
    tables.draw(event.state, event);
  });
}
