"""The digital twin: a simulated cluster whose samples look exactly like the real collectors' (pure, no I/O).

GPU utilisation, memory and power follow the jobs placed on each GPU; InfiniBand traffic follows the jobs
too: every job spanning more than one node runs a ring all-reduce (each node sends
`allreduce_gbps_per_node` to the next node of the ring, nodes in sorted order), and a data-intensive job
also reads its dataset from its storage node. Each flow is split over the sender's host links (rails) and
routed over a shortest path of the switch graph (in a fat tree: up to the lowest common tier and down
again); among equal-cost next hops a hash of (src, dst, hop) picks one, so the spread is ECMP-like and
deterministic. A link direction offered more than its capacity carries its capacity and the excess shows
up as `port_xmit_wait` growth on the sending port.

Time is piecewise constant: `advance(now, jobs)` first accumulates the traffic of the previous interval
(at the rates set by the previous call), then sets the rates of `jobs` for the time from `now` on.
`sample(node, now)` reads the counters extrapolated to `now` at those rates, so two samples always give
the rates of the jobs running between them, and counters never go backwards.

Faults come from `random.Random(seed)` on a Poisson schedule of `fault_rate` faults per simulated hour,
independent of how often `advance` is called: a flapping host link (DOWN for a while, `link_downed` + 1
when it comes back), a GPU XID (79 or 48, reported once in `xid_events`), a host link whose
`symbol_error` climbs steadily. `schedule_fault` adds one by hand (tests, demo). Every fault is in
`model.faults`.

Counters are cumulative, data counters in 4-octet units, all 64-bit (`counter_bits` empty), as the
sysfs/perfquery collectors report them; `fabric.telemetry.rates` turns two samples into rates.
`sample` gives a host's HCA ports (`host_devices` names them, else mlx5_<i>); `switch_sample` gives the ports of
switches, as perfquery run by a fabric agent would (device = "0x" + switch GUID, port = switch port number), so
leaf-spine links have counters too. A flap shows on both ends of the link; symbol errors on the host end.

`inherit(old)` carries counters, faults, the fault schedule and the clock over from the model a rebuilt one
replaces (the fabric changed): links that still exist keep counting from where they were.
"""

from __future__ import annotations

import random
import zlib
from collections import deque
from dataclasses import dataclass

from fabric.collectors.samples import GpuSample, NodeSample, PortSample
from fabric.topology.graph import HOST_HOST, HOST_SWITCH, FabricGraph, natural_key
from fabric.topology.types import Fabric

IDLE_POWER_W = 60.0
IDLE_TEMP_C = 32.0
STORAGE_READ_GBPS = 50.0  # what each node of a data-intensive job reads from the dataset's storage node
WAIT_TICKS_PER_S = 1_000_000  # port_xmit_wait ticks a port accrues per second of being fully blocked
DATA_INTENSIVE = "data-intensive"

# workload -> (GPU utilisation %, share of GPU memory used)
_WORKLOAD_LOAD: dict[str, tuple[float, float]] = {
    "training": (93.0, 0.85),
    "inference": (60.0, 0.45),
    DATA_INTENSIVE: (75.0, 0.70),
}
_DEFAULT_LOAD = (85.0, 0.70)

FLAP = "link_flap"
XID = "xid"
SYMBOL_ERRORS = "symbol_errors"
FAULT_KINDS: tuple[str, ...] = (FLAP, XID, SYMBOL_ERRORS)
XID_CODES: tuple[int, ...] = (79, 48)


@dataclass(frozen=True, slots=True)
class TwinGpu:
    node: str
    index: int
    uuid: str = ""
    model: str = ""
    memory_mib: float = 81559.0
    tdp_w: float = 700.0


@dataclass(slots=True)
class TwinJob:
    job_id: str
    gpus: list[tuple[str, int]]  # (node, GPU index)
    workload: str = "training"
    dataset_node: str | None = None
    allreduce_gbps_per_node: float = 0.0  # what each node sends per second to its ring neighbour
    share: float = 1.0  # of each of its GPUs: 1 whole, an MPS compute %, MIG slices / 7, 1 / time-slice replicas

    @property
    def nodes(self) -> list[str]:
        return sorted({n for n, _ in self.gpus}, key=natural_key)


@dataclass(slots=True)
class TwinFault:
    kind: str  # FLAP / XID / SYMBOL_ERRORS
    start: float
    end: float  # FLAP: when the link comes back; XID: == start; SYMBOL_ERRORS: when the errors stop climbing
    link_key: str = ""  # FLAP, SYMBOL_ERRORS
    node: str = ""  # the node whose port or GPU shows it
    gpu_index: int | None = None  # XID
    xid: int | None = None  # XID
    errors_per_s: float = 0.0  # SYMBOL_ERRORS
    reported: bool = False  # XID: already returned once in xid_events

    @property
    def target(self) -> str:
        return self.link_key if self.kind != XID else f"{self.node}/gpu{self.gpu_index}"

    def active(self, now: float) -> bool:
        return self.start <= now < self.end


@dataclass(slots=True)
class _Dir:
    """One direction of a link: counters of the sending port (tx, wait) and the receiving port (rx)."""

    rate_bps: float = 0.0  # bytes/s carried, from the last advance on
    wait_per_s: float = 0.0  # xmit_wait ticks/s on the sending port
    offered_bps: float = 0.0
    bytes: float = 0.0  # cumulative at `TwinModel._t`
    wait: float = 0.0


class TwinModel:
    def __init__(
        self,
        fabric: Fabric,
        gpus: list[TwinGpu],
        seed: int = 0,
        fault_rate: float = 6.0,
        host_devices: dict[str, str] | None = None,
    ) -> None:
        """`host_devices`: link key -> the HCA device name at the host end (mlx5_<i> where not given)."""
        self.fabric = fabric
        self.host_devices = host_devices or {}
        self.graph = FabricGraph.build(fabric)
        self.gpus = sorted(gpus, key=lambda g: (natural_key(g.node), g.index))
        self.gpus_by_node: dict[str, list[TwinGpu]] = {}
        for g in self.gpus:
            self.gpus_by_node.setdefault(g.node, []).append(g)
        self.seed = seed
        self.fault_rate = fault_rate  # faults per simulated hour; 0 disables them
        self.faults: list[TwinFault] = []
        self._rng = random.Random(seed)
        self._next_fault_at: float | None = None
        self._t: float | None = None
        # (link index, 0 = a->b / 1 = b->a)
        self._dirs: list[tuple[_Dir, _Dir]] = [(_Dir(), _Dir()) for _ in self.graph.links]
        self._gpu_jobs: dict[tuple[str, int], list[TwinJob]] = {}
        self._dist_cache: dict[tuple[int, frozenset[int]], list[int]] = {}
        g = self.graph
        self._host_link_ids = [li for li, k in enumerate(g.link_kind) if k == HOST_SWITCH]
        self._host_link_ids.sort(key=lambda li: g.links[li].key)
        # switch GUID (lowercase, no 0x) -> [(port number, link index, the switch is the link's `a` end)]
        by_switch: dict[str, list[tuple[int, int, bool]]] = {key: [] for key in g.switch_keys}
        for li, link in enumerate(g.links):
            if g.link_kind[li] == HOST_HOST:
                continue
            for end, number, is_a in ((link.a, link.a_port, True), (link.b, link.b_port, False)):
                if end in by_switch:
                    by_switch[end].append((number, li, is_a))
        self._switch_ports: dict[str, list[tuple[int, int, bool]]] = {}
        for key, ports in by_switch.items():
            used = {n for n, _, _ in ports if n > 0}
            spare = (n for n in range(1, len(ports) + len(used) + 2) if n not in used)
            ports = [(n if n > 0 else next(spare), li, is_a) for n, li, is_a in ports]  # hand-built: no numbers
            self._switch_ports[_guid(key)] = sorted(ports)

    def inherit(self, old: TwinModel) -> None:
        """Continue from `old` (the model of the fabric before a change): clock, fault schedule, faults on links
        that still exist, and the counters of every link key both know. Call before the first `advance`."""
        self._t, self._next_fault_at = old._t, old._next_fault_at
        self._rng.setstate(old._rng.getstate())
        keys = {link.key for link in self.graph.links}
        self.faults = [f for f in old.faults if f.kind == XID or f.link_key in keys]
        old_dirs = {link.key: old._dirs[li] for li, link in enumerate(old.graph.links)}
        for li, link in enumerate(self.graph.links):
            before = old_dirs.get(link.key)
            if before is not None:
                self._dirs[li] = (_copy_dir(before[0]), _copy_dir(before[1]))

    # ---- time ----

    def advance(self, now: float, jobs: list[TwinJob]) -> None:
        """Accumulate the previous interval's traffic up to `now`, then run `jobs` from `now` on."""
        if self._t is None:
            self._t = now
            if self.fault_rate > 0:
                self._next_fault_at = now + self._rng.expovariate(self.fault_rate / 3600.0)
        elif now > self._t:
            dt = now - self._t
            for d_ab, d_ba in self._dirs:
                for d in (d_ab, d_ba):
                    d.bytes += d.rate_bps * dt
                    d.wait += d.wait_per_s * dt
            self._t = now
        self._draw_faults(now)
        self._gpu_jobs = {}
        for job in jobs:
            for key in job.gpus:
                self._gpu_jobs.setdefault((key[0], key[1]), []).append(job)
        self._route(now, jobs)

    def link_loads(self) -> dict[str, float]:
        """Link key -> offered utilisation (0..1, the busier direction) since the last advance."""
        out: dict[str, float] = {}
        for li, link in enumerate(self.graph.links):
            cap = link.capacity_gbps * 1e9 / 8
            offered = max(d.offered_bps for d in self._dirs[li])
            out[link.key] = 0.0 if cap <= 0 else min(1.0, offered / cap)
        return out

    def link_offered_gbps(self) -> dict[str, float]:
        """Link key -> traffic offered to the busier direction (Gb/s, uncapped) since the last advance."""
        return {
            link.key: max(d.offered_bps for d in self._dirs[li]) * 8 / 1e9 for li, link in enumerate(self.graph.links)
        }

    # ---- faults ----

    def schedule_fault(
        self,
        kind: str,
        start: float,
        duration: float = 30.0,
        link_key: str = "",
        node: str = "",
        gpu_index: int | None = None,
        xid: int = 79,
        errors_per_s: float = 2.0,
    ) -> TwinFault:
        """Add a fault by hand. A link fault names its link (a host link); an XID its node and GPU."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
        if kind == XID:
            fault = TwinFault(XID, start, start, node=node, gpu_index=gpu_index or 0, xid=xid)
        else:
            li = next((i for i in self._host_link_ids if self.graph.links[i].key == link_key), None)
            if li is None:
                raise ValueError(f"{link_key!r} is not a host link of the fabric")
            fault = TwinFault(
                kind,
                start,
                start + duration,
                link_key=link_key,
                node=self._host_of(li),
                errors_per_s=errors_per_s if kind == SYMBOL_ERRORS else 0.0,
            )
        self.faults.append(fault)
        return fault

    def _draw_faults(self, now: float) -> None:
        if self.fault_rate <= 0 or self._next_fault_at is None:
            return
        rng = self._rng
        while self._next_fault_at <= now:
            t = self._next_fault_at
            kind = rng.choice(FAULT_KINDS)
            a, b = rng.random(), rng.random()  # fixed draws per fault: the schedule depends on the seed only
            if kind == XID and self.gpus:
                g = self.gpus[int(a * len(self.gpus))]
                self.faults.append(TwinFault(XID, t, t, node=g.node, gpu_index=g.index, xid=XID_CODES[b < 0.5]))
            elif kind != XID and self._host_link_ids:
                li = self._host_link_ids[int(a * len(self._host_link_ids))]
                if kind == FLAP:
                    duration, rate = 20.0 + 40.0 * b, 0.0
                else:
                    duration, rate = 600.0 + 1200.0 * b, 0.5 + 4.5 * b
                self.faults.append(
                    TwinFault(
                        kind,
                        t,
                        t + duration,
                        link_key=self.graph.links[li].key,
                        node=self._host_of(li),
                        errors_per_s=rate,
                    )
                )
            self._next_fault_at = t + rng.expovariate(self.fault_rate / 3600.0)

    def _down_links(self, now: float) -> set[str]:
        return {f.link_key for f in self.faults if f.kind == FLAP and f.active(now)}

    def _host_of(self, li: int) -> str:
        return self.graph.host_keys[self.graph.end_b[li]]

    # ---- traffic ----

    def _route(self, now: float, jobs: list[TwinJob]) -> None:
        g = self.graph
        down_keys = self._down_links(now)
        down = frozenset(li for li, link in enumerate(g.links) if link.key in down_keys)
        offered = [[0.0, 0.0] for _ in g.links]
        for job in jobs:
            nodes = [n for n in job.nodes if n in g.host_index]
            if len(nodes) > 1 and job.allreduce_gbps_per_node > 0:
                rate = job.allreduce_gbps_per_node * 1e9 / 8
                for i, src in enumerate(nodes):
                    self._add_flow(src, nodes[(i + 1) % len(nodes)], rate, down, offered)
            if job.workload == DATA_INTENSIVE and job.dataset_node and job.dataset_node in g.host_index:
                for n in nodes:
                    if n != job.dataset_node:
                        self._add_flow(job.dataset_node, n, STORAGE_READ_GBPS * 1e9 / 8, down, offered)
        for li, link in enumerate(g.links):
            cap = link.capacity_gbps * 1e9 / 8
            for k in (0, 1):
                d = self._dirs[li][k]
                d.offered_bps = offered[li][k]
                if li in down or not link.up:
                    d.rate_bps = d.wait_per_s = 0.0
                    continue
                d.rate_bps = min(d.offered_bps, cap) if cap > 0 else d.offered_bps
                excess = d.offered_bps - d.rate_bps
                d.wait_per_s = WAIT_TICKS_PER_S * min(1.0, excess / d.rate_bps) if excess > 0 and d.rate_bps else 0.0

    def _add_flow(self, src: str, dst: str, rate: float, down: frozenset[int], offered: list[list[float]]) -> None:
        g = self.graph
        hs, hd = g.host_index[src], g.host_index[dst]
        s_links = [(s, li) for s, li in g.host_links[hs] if li not in down]
        d_links = [(s, li) for s, li in g.host_links[hd] if li not in down]
        if not s_links or not d_links:
            return
        share = rate / len(s_links)
        for rail, (s_sw, s_li) in enumerate(s_links):
            same = [(s, li) for s, li in d_links if s == s_sw]  # rail-aligned: same leaf on both sides
            d_sw, d_li = (same or d_links)[0 if same else _hash(src, dst, rail) % len(d_links)]
            path = self._switch_path(s_sw, d_sw, down, f"{src}>{dst}#{rail}")
            if path is None:
                continue
            self._load(s_li, g.links[s_li].a == src, share, offered)  # out of the source host
            for li, forward in path:
                self._load(li, forward, share, offered)
            # into the destination host: from the switch end to the host end
            self._load(d_li, g.links[d_li].b == dst, share, offered)

    def _load(self, li: int, a_to_b: bool, rate: float, offered: list[list[float]]) -> None:
        offered[li][0 if a_to_b else 1] += rate

    def _switch_path(self, src: int, dst: int, down: frozenset[int], salt: str) -> list[tuple[int, bool]] | None:
        """Shortest path src -> dst over up switch links as [(link index, goes a->b)]; None when cut off."""
        if src == dst:
            return []
        dist = self._dist_to(dst, down)
        if dist[src] < 0:
            return None
        g = self.graph
        path: list[tuple[int, bool]] = []
        cur, hop = src, 0
        while cur != dst:
            nxt = [(w, li) for w, li in g.sw_adj[cur] if li not in down and dist[w] == dist[cur] - 1]
            w, li = nxt[_hash(salt, str(hop)) % len(nxt)]
            path.append((li, g.links[li].a == g.switch_keys[cur]))
            cur, hop = w, hop + 1
        return path

    def _dist_to(self, dst: int, down: frozenset[int]) -> list[int]:
        key = (dst, down)
        dist = self._dist_cache.get(key)
        if dist is None:
            if len(self._dist_cache) > 4096:
                self._dist_cache.clear()
            g = self.graph
            dist = [-1] * g.n_switches
            dist[dst] = 0
            queue = deque([dst])
            while queue:
                v = queue.popleft()
                for w, li in g.sw_adj[v]:
                    if dist[w] < 0 and li not in down:
                        dist[w] = dist[v] + 1
                        queue.append(w)
            self._dist_cache[key] = dist
        return dist

    # ---- samples ----

    def sample(self, node: str, now: float) -> NodeSample:
        out = NodeSample(node=node, collected_at=now, collector="twin")
        if node not in self.gpus_by_node and node not in self.graph.host_index:
            out.errors.append(f"node {node!r} is not in the twin")
            return out
        out.gpus = [self._gpu_sample(g, now) for g in self.gpus_by_node.get(node, [])]
        out.ports = self._port_samples(node, now)
        return out

    def _gpu_sample(self, gpu: TwinGpu, now: float) -> GpuSample:
        rng = random.Random(f"{self.seed}/{gpu.node}/{gpu.index}/{now:.3f}")
        jobs = self._gpu_jobs.get((gpu.node, gpu.index), [])
        if jobs:
            util = mem_share = 0.0
            for job in jobs:
                u, m = _WORKLOAD_LOAD.get(job.workload, _DEFAULT_LOAD)
                util += u * job.share
                mem_share += m * job.share
            util = min(100.0, util + rng.uniform(-3.0, 3.0))
            mem_share = min(0.98, mem_share + rng.uniform(-0.01, 0.01))
        else:
            util = rng.choice((0.0, 0.0, 0.0, 1.0))
            mem_share = 0.0
        mem_used = round(gpu.memory_mib * mem_share) if jobs else 1.0
        busy = util / 100.0
        power = IDLE_POWER_W + (gpu.tdp_w - IDLE_POWER_W) * busy * 0.9 + rng.uniform(-2.0, 2.0)
        xids: list[int] = []
        ecc_uncorrected = 0
        for f in self.faults:
            if f.kind == XID and f.node == gpu.node and f.gpu_index == gpu.index and f.start <= now:
                if f.xid == 48:
                    ecc_uncorrected += 1
                if not f.reported and f.xid is not None:
                    f.reported = True
                    xids.append(f.xid)
        return GpuSample(
            index=gpu.index,
            uuid=gpu.uuid,
            name=gpu.model,
            utilisation_gpu_pct=round(util, 1),
            utilisation_memory_pct=round(util * 0.6, 1),
            memory_used_mib=float(mem_used),
            memory_free_mib=float(gpu.memory_mib - mem_used),
            memory_total_mib=float(gpu.memory_mib),
            temperature_c=round(IDLE_TEMP_C + 45.0 * busy + rng.uniform(-1.0, 1.0), 1),
            temperature_limit_c=87.0,
            power_w=round(max(power, 20.0), 1),
            power_limit_w=float(gpu.tdp_w),
            sm_clock_mhz=1980.0 if jobs else 345.0,
            ecc_uncorrected=ecc_uncorrected,
            ecc_corrected=0,
            remapped_rows_pending=False,
            remapped_rows_failure=False,
            xid_events=xids,
        )

    def _port_samples(self, node: str, now: float) -> list[PortSample]:
        g = self.graph
        hi = g.host_index.get(node)
        if hi is None:
            return []
        dt = 0.0 if self._t is None else max(0.0, now - self._t)
        down = self._down_links(now)
        ports = []
        for i, (_s, li) in enumerate(g.host_links_all[hi]):
            link = g.links[li]
            host_is_b = link.b == node
            tx, rx = self._dirs[li][1 if host_is_b else 0], self._dirs[li][0 if host_is_b else 1]
            device = self.host_devices.get(link.key, f"mlx5_{i}")
            number = (link.b_port if host_is_b else link.a_port) or 1
            ports.append(self._port(li, device, number, tx, rx, now, dt, down, host_end=True))
        return ports

    def switch_sample(self, node: str, guids: list[str], now: float) -> NodeSample:
        """The ports of switches `guids` that have a link, as a fabric agent reading them with perfquery sees
        them: device (and guid) "0x" + switch GUID, port = the switch's port number; `node` names the agent."""
        out = NodeSample(node=node, collected_at=now, collector="twin")
        dt = 0.0 if self._t is None else max(0.0, now - self._t)
        down = self._down_links(now)
        for guid in guids:
            ports = self._switch_ports.get(_guid(guid))
            if ports is None:
                out.errors.append(f"switch {guid!r} is not in the twin")
                continue
            device = "0x" + _guid(guid)
            for number, li, is_a in ports:
                tx, rx = self._dirs[li][0 if is_a else 1], self._dirs[li][1 if is_a else 0]
                out.ports.append(self._port(li, device, number, tx, rx, now, dt, down, host_end=False))
        return out

    def _port(
        self, li: int, device: str, number: int, tx: _Dir, rx: _Dir, now: float, dt: float, down: set[str],
        *, host_end: bool,
    ) -> PortSample:  # fmt: skip
        """One end of link `li`: `tx` the direction it sends, `rx` the one it receives, counters at `now`."""
        link = self.graph.links[li]
        is_down = link.key in down or not link.up
        extra = 0.0 if is_down else dt
        flaps = sum(1 for f in self.faults if f.kind == FLAP and f.link_key == link.key and f.end <= now)
        symbols = 0
        if host_end:  # the host's receiver is the sick one
            symbols = sum(
                int(f.errors_per_s * (min(now, f.end) - f.start))
                for f in self.faults
                if f.kind == SYMBOL_ERRORS and f.link_key == link.key and f.start <= now
            )
        return PortSample(
            device=device,
            port=number,
            guid="" if host_end else device,
            state="DOWN" if is_down else "ACTIVE",
            phys_state="Polling" if is_down else "LinkUp",
            rate_gbps=link.capacity_gbps,
            rate_text=f"{link.capacity_gbps:g} Gb/sec ({link.width}X {link.speed})".strip(),
            counters={
                "port_xmit_data": int((tx.bytes + tx.rate_bps * extra) // 4),
                "port_rcv_data": int((rx.bytes + rx.rate_bps * extra) // 4),
                "port_xmit_packets": int((tx.bytes + tx.rate_bps * extra) // 4096),
                "port_rcv_packets": int((rx.bytes + rx.rate_bps * extra) // 4096),
                "port_xmit_wait": int(tx.wait + tx.wait_per_s * extra),
                "symbol_error": symbols,
                "link_downed": flaps,
                "port_rcv_errors": 0,
                "link_error_recovery": 0,
                "port_xmit_discards": 0,
            },
        )


def _guid(key: str) -> str:
    """A switch GUID as the database keeps it: lowercase, no 0x."""
    key = key.strip().lower()
    return key[2:] if key.startswith("0x") else key


def _copy_dir(d: _Dir) -> _Dir:
    return _Dir(d.rate_bps, d.wait_per_s, d.offered_bps, d.bytes, d.wait)


def _hash(*parts: str | int) -> int:
    return zlib.crc32("|".join(str(p) for p in parts).encode())


__all__ = [
    "FAULT_KINDS",
    "FLAP",
    "STORAGE_READ_GBPS",
    "SYMBOL_ERRORS",
    "XID",
    "TwinFault",
    "TwinGpu",
    "TwinJob",
    "TwinModel",
]
