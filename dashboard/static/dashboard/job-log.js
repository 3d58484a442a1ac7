// Job page, "Log" section: the tail of the job's log on each node of its latest launch, from the jobs API
// (GET /api/v1/jobs/<id>/log/, the node agents answer within a few seconds). Loaded once, and on "Refresh".

import { byId, loaded, setText } from "./dom.js";

const section = byId("job-log");

function nodeTail(node) {
  const figure = document.createElement("figure");
  const caption = document.createElement("figcaption");
  caption.textContent = node.error ? `${node.host}: ${node.error}` : node.host;
  const pre = document.createElement("pre");
  pre.dataset.host = node.host;
  pre.textContent = node.lines.length ? node.lines.join("\n") : "(empty)";
  figure.append(caption, pre);
  return figure;
}

async function loadLog() {
  const note = byId("job-log-note");
  try {
    const response = await fetch(`${section.dataset.logUrl}?lines=${encodeURIComponent(section.dataset.lines)}`, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    const body = await response.json();
    setText(note, body.detail || "");
    note.hidden = !body.detail;
    byId("job-log-nodes").replaceChildren(...body.nodes.map(nodeTail));
  } catch (error) {
    setText(note, `Could not load the log: ${error.message}`);
    note.hidden = false;
  }
  loaded(section);
}

if (section) {
  byId("job-log-refresh").addEventListener("click", loadLog);
  loadLog();
}
