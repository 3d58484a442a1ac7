// A tenant's own job (/my/jobs/<id>/): its status, place in the queue, expected start and reason, live from the
// cluster's queue socket (the server sends a tenant only its own jobs). The log is job-log.js's.

import { connect } from "./live.js";
import { byId, setBadge, setText } from "./dom.js";
import { startText } from "./queue-tables.js";

const page = byId("page");
const jobId = String(page.dataset.jobId);
let current = null;

function draw(job, list) {
  const pending = list === "pending";
  setBadge(byId("job-status"), "job_status", pending ? "pending" : job.status || "running");
  setText(byId("job-position"), pending ? (job.position ?? "–") : "–");
  setText(byId("job-reason"), pending ? job.reason || "–" : "–");
  current = pending ? job : null;
  setText(byId("job-start"), current ? startText(current) : "–");
}

connect(page.dataset.wsQueue).subscribe("queue", (event) => {
  const entry = event.state.byId.get(jobId);
  if (entry) draw(entry.job, entry.list);
  else if (event.kind === "delta" && (event.data.remove || []).map(String).includes(jobId)) {
    byId("job-left").hidden = false; // finished, failed or cancelled: the page's own data says which after a reload
  }
});

// The countdown moves between rounds.
window.setInterval(() => {
  if (current) setText(byId("job-start"), startText(current));
}, 5_000);
