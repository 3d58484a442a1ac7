"""Live views' snapshots on the wire (issue 16): bytes and build time of each topic's first frame at N servers.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<a database of your own> \\
        .venv/bin/python bench/bench_push_snapshot.py [--nodes 128 2000] [--runs 3]

Builds the demo's fabric at N servers (`manage.py demo --no-serve --nodes N`: its fat tree, pools, tenants and jobs)
in the database DATABASE_URL names (emptied first: use one of your own), polls the twin once as the demo's worker
does, and for each topic prints the bytes of the snapshot frame a socket sends on connect
(dashboard.broadcast.snapshot_frames, encoded as sent by `broadcast.wire`: the largest frame of the topic and their
sum, gzip'd for information, beside the JSON text every topic went as before the compact form), the
time to build it from the database (median of --runs, the cabling cached as in a running server) and to encode it,
and the bytes of one delta after a second poll. The goal: every frame under 512 KB at 2,000 servers, far from
daphne's 1 MiB message limit.
"""

from __future__ import annotations

import argparse
import gzip
import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

BUDGET_BYTES = 512 * 1024


def _bytes(message: str | bytes) -> bytes:
    return message if isinstance(message, bytes) else message.encode()


def _gz(messages: list[bytes]) -> int:
    """Bytes after gzip (for information: the sockets send without permessage-deflate)."""
    return sum(len(gzip.compress(m, 6)) for m in messages)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[128, 2000])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clusterctl.settings")
    os.environ.setdefault("DEBUG", "1")
    if "DATABASE_URL" not in os.environ:
        sys.exit("set DATABASE_URL to a database of your own (it is emptied)")
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    from dashboard import broadcast
    from dashboard.topics import FABRIC_TOPICS
    from fabric import stored_twin
    from fabric.collectors.samples import FABRIC_SOURCE
    from fabric.ingest import ingest_samples
    from fabric.models import Cluster, Node, Switch

    def poll(cluster_id: int) -> None:
        hosts = list(Node.objects.filter(cluster_id=cluster_id).values_list("hostname", flat=True))
        guids = list(Switch.objects.filter(cluster_id=cluster_id).values_list("guid", flat=True))
        samples = [stored_twin.sample_node(h, cluster=cluster_id, fault_rate=0) for h in hosts]
        samples.append(stored_twin.sample_switches(FABRIC_SOURCE, guids, cluster=cluster_id, fault_rate=0))
        ingest_samples(cluster_id, samples)

    call_command("migrate", verbosity=0)
    for n in args.nodes:
        call_command("flush", interactive=False, verbosity=0)
        cache.clear()
        stored_twin.forget_twins()
        t0 = time.perf_counter()
        call_command("demo", "--no-serve", "--nodes", str(n), stdout=io.StringIO())
        cluster_id = Cluster.objects.get(name="demo").pk
        poll(cluster_id)
        print(f"{n} servers: demo built and polled in {time.perf_counter() - t0:.1f} s")
        for topic in FABRIC_TOPICS:
            group = broadcast.fabric_group(cluster_id, topic)
            builds, encodes, sent = [], [], []
            for _ in range(args.runs):
                cache.delete(broadcast.state_key(cluster_id, topic))  # a baseline missing: built as on first use
                t1 = time.perf_counter()
                frames = broadcast.snapshot_frames(cluster_id, [topic], {topic: group})
                t2 = time.perf_counter()
                sent = [_bytes(broadcast.wire(f)) for f in frames]
                t3 = time.perf_counter()
                builds.append((t2 - t1) * 1000)
                encodes.append((t3 - t2) * 1000)
            old = [_bytes(broadcast.encode(f)) for f in frames]  # the JSON text every topic went as before
            sizes = [len(m) for m in sent]
            flag = "" if max(sizes) < BUDGET_BYTES else f"  OVER the {BUDGET_BYTES // 1024} KB budget"
            print(
                f"  {topic:9s} snapshot {sum(sizes):>10,} bytes (gzip {_gz(sent):>9,}) in {len(sizes)} frame(s), "
                f"largest {max(sizes):>9,}; JSON before {sum(map(len, old)):>10,} (gzip {_gz(old):>9,}); "
                f"build {statistics.median(builds):7.1f} ms, encode {statistics.median(encodes):6.1f} ms{flag}"
            )
        poll(cluster_id)
        from dashboard import selectors

        t1 = time.perf_counter()
        current = selectors.build(cluster_id, FABRIC_TOPICS)
        build_ms = (time.perf_counter() - t1) * 1000
        deltas = {}
        for topic in FABRIC_TOPICS:
            kind, data = broadcast.diff(topic, cache.get(broadcast.state_key(cluster_id, topic)), current[topic])
            if kind:
                frame = {"type": kind, "topic": topic, "seq": 1, "data": data}
                sent, old = _bytes(broadcast.wire(frame)), _bytes(broadcast.encode(frame))
                deltas[topic] = f"{kind} {len(sent):,} (JSON before {len(old):,})"
        print(f"  after a second poll: all topics built in {build_ms:.1f} ms; frames: {deltas or 'none'}")


if __name__ == "__main__":
    from peak_rss import peak_rss_line  # beside this script, which Python puts first on sys.path

    main()
    print(peak_rss_line())
