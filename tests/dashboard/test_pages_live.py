"""The pages' socket module (dashboard/static/dashboard/live.js), run in Node against a fake WebSocket: the topics a
page subscribes to asked for in the URL (and later ones by a message), snapshots and deltas per topic, resync of a
topic on a gap in its seq, reconnection with capped exponential backoff, fresh snapshots after a reconnect, no retry
after a refusal, and the connection badge."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from itertools import pairwise
from pathlib import Path

import pytest

from dashboard import broadcast

LIVE = Path(__file__).resolve().parents[2] / "dashboard" / "static" / "dashboard" / "live.js"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

HARNESS = r"""
const timers = [];
const sockets = [];
const badge = { hidden: true, dataset: {}, textContent: "", title: "" };
globalThis.window = {
  location: { protocol: "https:", host: "dash.example.org" },
  setTimeout: (fn, ms) => { timers.push({ fn, ms }); return timers.length; },
};
globalThis.document = { getElementById: (id) => (id === "live-state" ? badge : null) };
class FakeSocket {
  static OPEN = 1;
  constructor(url) { this.url = url; this.sent = []; this.readyState = 0; this.on = {}; sockets.push(this); }
  addEventListener(type, fn) { (this.on[type] ||= []).push(fn); }
  send(text) { this.sent.push(JSON.parse(text)); }
  fire(type, event = {}) { if (type === "open") this.readyState = 1; for (const fn of this.on[type] || []) fn(event); }
  message(m) { this.fire("message", { data: JSON.stringify(m) }); }
  close(code) { this.readyState = 3; this.fire("close", { code }); }
}
globalThis.WebSocket = FakeSocket;
const { connect } = await import(process.argv[1]);
const out = {};
const last = () => sockets[sockets.length - 1];
const tick = () => Promise.resolve(); // the socket opens a microtask after connect()

// One socket per path, shared; wss:// on an https page, asking for the topics subscribed; the badge follows it.
const live = connect("/ws/clusters/1/fabric/");
out.same = connect("/ws/clusters/1/fabric/") === live;
out.openedAtOnce = sockets.length;
const overviews = [];
live.subscribe("overview", (e) => overviews.push([e.kind, e.seq]));
const events = [];
live.subscribe("gpus", (e) => events.push([e.kind, e.seq, e.state.byId.get("40").util]));
out.badgeConnecting = badge.dataset.state;
await tick();
out.url = last().url;
last().fire("open");
out.badgeOpened = badge.dataset.state; // open, but no snapshot yet: not "live"
last().message({ type: "snapshot", topic: "overview", seq: 1, data: {} });
out.badgeOpen = [badge.dataset.state, badge.textContent, badge.hidden];

// Snapshot, then deltas in sequence, each topic counting its own seq; a gap resyncs that topic only and holds its
// deltas until its fresh snapshot.
last().message({ type: "snapshot", topic: "gpus", seq: 5, data: { gpus: [{ id: 40, util: 10, temp: 50 }] } });
last().message({ type: "delta", topic: "gpus", seq: 6, data: { gpus: { "40": { util: 20 } } } });
last().message({ type: "delta", topic: "overview", seq: 2, data: {} }); // overview's seq: no gap for either
last().message({ type: "delta", topic: "gpus", seq: 6, data: { gpus: { "40": { util: 99 } } } }); // not newer
last().message({ type: "delta", topic: "gpus", seq: 8, data: { gpus: { "40": { util: 30 } } } }); // 7 missed
out.resyncSent = [...last().sent];
last().message({ type: "delta", topic: "overview", seq: 3, data: {} }); // not held by the gpus' resync
last().message({ type: "delta", topic: "gpus", seq: 9, data: { gpus: { "40": { util: 40 } } } }); // awaiting
last().message({ type: "snapshot", topic: "gpus", seq: 9, data: { gpus: [{ id: 40, util: 45, temp: 51 }] } });
last().message({ type: "delta", topic: "gpus", seq: 10, data: { gpus: { "40": { util: 50 } } } });
out.events = events;
out.overviews = overviews;
out.temp = live.get("gpus").byId.get("40").temp;

// A topic subscribed once the socket is open is asked for by a message, and by the URL of every reconnect.
live.subscribe("alerts", () => {});
out.subscribeSent = last().sent.slice(out.resyncSent.length);

// A late subscriber gets the current state at once.
let late = null;
live.subscribe("gpus", (e) => { late = [e.kind, e.state.byId.get("40").util]; });
out.late = late;

// Lost connection: reconnect with exponential backoff capped at 10 s, and a fresh snapshot replaces the store.
const delays = [];
for (let i = 0; i < 8; i++) {
  last().close(1006);
  delays.push(timers[timers.length - 1].ms);
  timers[timers.length - 1].fn();
}
out.delays = delays;
out.sockets = sockets.length;
out.reconnectUrl = last().url;
out.badgeRetry = badge.dataset.state;
last().fire("open");
last().message({ type: "snapshot", topic: "gpus", seq: 1, data: { gpus: [{ id: 40, util: 5 }] } });
last().message({ type: "delta", topic: "gpus", seq: 2, data: { gpus: { "40": { util: 6 } } } });
out.afterReconnect = events.slice(-2);

// A refusal (signed out) stops retrying and says why.
const before = timers.length;
last().close(4401);
out.refused = [timers.length === before, badge.dataset.state, badge.textContent];

// Subscribed while connecting: asked for as soon as it is open. A topic the socket does not carry is refused (4400)
// and not retried.
const four = connect("/ws/clusters/4/fabric/");
four.subscribe("overview", () => {});
await tick();
four.subscribe("fabric", () => {});
out.sentConnecting = [...last().sent];
last().fire("open");
out.sentOpen = last().sent;
const timersBefore = timers.length;
last().close(4400);
out.unknownTopic = [timers.length === timersBefore, four.state, four.refusal];

// A server that accepts and then closes (1011) before any snapshot: the backoff keeps growing; a snapshot resets it.
// Nothing subscribed: it asks for every topic.
const flaky = connect("/ws/clusters/3/fabric/");
await tick();
out.allUrl = last().url;
const flakyDelays = [];
for (let i = 0; i < 4; i++) {
  last().fire("open");
  last().close(1011);
  flakyDelays.push(timers[timers.length - 1].ms);
  timers[timers.length - 1].fn();
}
last().fire("open");
last().message({ type: "snapshot", topic: "overview", seq: 1, data: {} });
// A binary frame (dashboard.broadcast.wire) decodes into the same store as its JSON.
const raw = Buffer.from(process.argv[2], "base64");
last().fire("message", { data: raw.buffer.slice(raw.byteOffset, raw.byteOffset + raw.length) });
out.binary = flaky.get("gpus").gpus;
last().close(1011);
flakyDelays.push(timers[timers.length - 1].ms);
out.flakyDelays = flakyDelays;
out.flakyState = flaky.state;

// The queue store: removals, a new order that renumbers an operator's places, a job that starts.
const q = connect("/ws/clusters/1/queue/");
const seen = [];
q.subscribe("queue", (e) => seen.push(e.kind));
await tick();
last().fire("open");
last().message({ type: "snapshot", topic: "queue", seq: 1, data: {
  pending: [{ id: 1, position: 1 }, { id: 2, position: 2 }, { id: 3, position: 3 }],
  running: [{ id: 9, nodes: ["a"] }], recent: [] } });
last().message({ type: "delta", topic: "queue", seq: 2, data: {
  remove: [1], order: [3, 2], upsert: { running: [{ id: 4, nodes: ["b"] }] },
  recent: [{ job: 1, kind: "preempted", at: "t" }] } });
let s = q.get("queue");
out.queue1 = { pending: s.pending.map((j) => [j.id, j.position]), running: s.running.map((j) => j.id),
               recent: s.recent.length };
last().message({ type: "delta", topic: "queue", seq: 3, data: { upsert: { running: [{ id: 2 }] } } });
s = q.get("queue");
out.queue2 = { pending: s.pending.map((j) => j.id), running: s.running.map((j) => j.id) };
out.queueEvents = seen;

// A tenant's socket keeps the global places the server sends.
const t = connect("/ws/clusters/2/queue/");
await tick();
last().fire("open");
last().message({ type: "snapshot", topic: "queue", seq: 1, data: {
  pending: [{ id: 5, position: 4 }, { id: 6, position: 9 }], running: [], recent: [] } });
last().message({ type: "delta", topic: "queue", seq: 2, data: { order: [6, 5] } });
out.tenantQueue = t.get("queue").pending.map((j) => [j.id, j.position]);

// Alerts: upsert and remove, newest first.
last().message({ type: "snapshot", topic: "alerts", seq: 3, data: { alerts: [
  { id: 1, last_seen: "2026-01-01T00:00:01Z" }, { id: 2, last_seen: "2026-01-01T00:00:00Z" }] } });
last().message({ type: "delta", topic: "alerts", seq: 4, data: {
  upsert: [{ id: 3, last_seen: "2026-01-01T00:00:05Z" }, { id: 2, last_seen: "2026-01-01T00:00:09Z" }],
  remove: [1] } });
out.alerts = t.get("alerts").alerts.map((a) => a.id);
console.log(JSON.stringify(out));
"""


BINARY = {"type": "snapshot", "topic": "gpus", "seq": 2, "data": {"gpus": [
    {"id": 40, "node": "gpu001", "util": 12.5, "health": "ok", "jobs": []},
    {"id": 41, "node": "gpu001", "util": None, "health": "xid", "jobs": [{"id": 7, "name": "train"}]},
], "metrics": {"util": "%"}}}  # fmt: skip


def run_harness() -> dict:
    result = subprocess.run(
        [
            "node",
            "--input-type=module",
            "-e",
            HARNESS,
            LIVE.as_uri(),
            base64.b64encode(broadcast.wire(BINARY)).decode(),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def out() -> dict:
    return run_harness()


def test_one_shared_socket_per_path_and_the_badge(out):
    assert out["same"] is True
    assert out["openedAtOnce"] == 0  # after the page's subscriptions, so that its URL can name them
    assert out["url"] == "wss://dash.example.org/ws/clusters/1/fabric/?topics=overview,gpus"
    assert out["badgeConnecting"] == "connecting"
    assert out["badgeOpened"] == "connecting"  # the socket is open; "live" only once a snapshot came
    assert out["badgeOpen"] == ["open", "live", False]


def test_a_server_that_closes_before_any_snapshot_is_retried_ever_more_slowly(out):
    first, *rest, after_snapshot = out["flakyDelays"]
    assert first <= 500 and all(b >= a * 1.5 for a, b in pairwise([first, *rest]))  # 0.5, 1, 2, 4 s (jitter)
    assert rest[-1] >= 3_000 and after_snapshot <= 500
    assert out["flakyState"] == "reconnecting"


def test_a_binary_frame_decodes_into_the_json_shapes(out):
    assert out["binary"] == BINARY["data"]["gpus"]


def test_a_topic_subscribed_later_is_asked_for_and_kept_after_a_reconnect(out):
    assert out["subscribeSent"] == [{"type": "subscribe", "topics": ["alerts"]}]
    assert out["reconnectUrl"] == "wss://dash.example.org/ws/clusters/1/fabric/?topics=overview,gpus,alerts"


def test_a_topic_subscribed_while_connecting_is_asked_for_once_open(out):
    assert out["sentConnecting"] == []
    assert out["sentOpen"] == [{"type": "subscribe", "topics": ["fabric"]}]


def test_a_socket_nobody_subscribed_to_asks_for_every_topic(out):
    assert out["allUrl"] == "wss://dash.example.org/ws/clusters/3/fabric/"


def test_an_unknown_topic_is_a_refusal_not_retried(out):
    assert out["unknownTopic"] == [True, "closed", "unknown topic"]


def test_deltas_apply_in_sequence_and_a_gap_asks_for_a_resync_of_its_topic(out):
    assert out["resyncSent"] == [{"type": "resync", "topics": ["gpus"]}]
    # snapshot 5, delta 6; the repeated 6, the gapped 8 and the 9 before the fresh snapshot are not applied.
    assert out["events"][:4] == [["snapshot", 5, 10], ["delta", 6, 20], ["snapshot", 9, 45], ["delta", 10, 50]]
    assert out["temp"] == 51
    assert out["late"] == ["snapshot", 50]


def test_each_topic_counts_its_own_seq(out):
    # overview 1, 2, 3 between the gpus' 5 to 10: no gap for either, and the gpus' resync does not hold them.
    assert out["overviews"] == [["snapshot", 1], ["delta", 2], ["delta", 3]]


def test_reconnects_with_backoff_capped_at_ten_seconds_and_takes_the_fresh_snapshot(out):
    delays = out["delays"]
    assert delays[0] <= 500 and all(b >= a * 0.75 for a, b in pairwise(delays))
    assert max(delays) <= 10_000 and delays[-1] >= 7_500
    assert out["sockets"] == 9 and out["badgeRetry"] == "reconnecting"
    assert out["afterReconnect"] == [["snapshot", 1, 5], ["delta", 2, 6]]


def test_a_refusal_stops_retrying_and_says_why(out):
    assert out["refused"] == [True, "closed", "signed out"]


def test_queue_store_follows_removals_order_and_starts(out):
    assert out["queue1"] == {"pending": [[3, 1], [2, 2]], "running": [9, 4], "recent": 1}
    assert out["queue2"] == {"pending": [3], "running": [9, 4, 2]}
    assert out["queueEvents"] == ["snapshot", "delta", "delta"]
    assert out["tenantQueue"] == [[6, 9], [5, 4]]


def test_alerts_store_upserts_removes_newest_first(out):
    assert out["alerts"] == [2, 3]
