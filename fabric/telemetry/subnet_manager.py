"""The subnet manager, watched (issue 18, part 1): what `sminfo`, `saquery SMIR` and OpenSM's own files say, and the
health rules over it. PURE.

The SM assigns LIDs, computes the routes and sweeps the fabric; a fabric whose SM died, flaps or hangs stops
healing. What real fabrics speak (tests/fixtures: captured from OpenSM 3.3.23 on ibsim):

- `sminfo`: `sminfo: sm lid 1 sm guid 0x200000, activity count 165 priority 14 state 3 SMINFO_MASTER`, the SM the
  local port names; `sminfo: iberror: failed: query` when it does not answer;
- `saquery SMIR`: one `SMInfoRecord dump` per SM of the subnet (master and standbys) with LID, GUID, ActCount,
  Priority and SMState;
- `opensm.log`: `Entering MASTER state`, `Entering STANDBY state`, `SUBNET UP` lines with their time;
- `opensm.conf`: `routing_engine`, `sm_priority`, `sweep_interval`.

`sm_findings(previous, current)` are the rules, with the previous reading as the memory (hold-down): no SM; two
masters (split brain); the master changed (a failover happened); the master's activity count stopped moving for
`hung_after_s` (a hung SM: it answers but no longer sweeps); no standby (the SM is a single point of failure); a
routing engine that does not fit the fabric (min-hop, OpenSM's default, on a multi-tier fat tree where ftree or
updn balance the up links).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fabric.telemetry.health import Finding
from fabric.telemetry.liveness import CLUSTER_KEY

STATES = {0: "not active", 1: "discovering", 2: "standby", 3: "master"}
MASTER, STANDBY = 3, 2
FAT_TREE_ENGINES = frozenset({"ftree", "updn", "dfsssp", "sssp", "nue"})
HUNG_AFTER_S = 120.0
SM_RULES = ("sm_none", "sm_split_brain", "sm_failover", "sm_hung", "sm_no_standby", "sm_routing_engine")

_SMINFO = re.compile(
    r"sminfo: sm lid (?P<lid>\d+|0x[0-9a-fA-F]+) sm guid (?P<guid>0x[0-9a-fA-F]+), activity count (?P<act>\d+) "
    r"priority (?P<prio>\d+)(?: state (?P<state>\d+))?"
)
_FAILED = re.compile(r"sminfo: iberror: (?:failed: query|query failed)")  # infiniband-diags, new and old wording
_FIELD = re.compile(r"^\s*(LID|GUID|ActCount|Priority|SMState)\.+(\S+)\s*$")
_LOG = re.compile(r"^(?P<when>\w{3} \d\d \d\d:\d\d:\d\d) \d+ \[[0-9A-F]+\] 0x[0-9a-f]+ -> (?P<what>.*)$")


class SmParseError(ValueError):
    """Output that is not what the tool prints (naming the line)."""


@dataclass(frozen=True, slots=True)
class SmInfo:
    lid: int
    guid: str  # "0x" and 16 hex digits
    activity: int
    priority: int
    state: int  # 0..3, STATES

    @property
    def state_name(self) -> str:
        return STATES.get(self.state, f"state {self.state}")


@dataclass(frozen=True, slots=True)
class SmView:
    """The subnet's SMs at one moment (`at`, seconds), as the fabric agent read them."""

    at: float
    sms: tuple[SmInfo, ...] = ()
    routing_engine: str = ""  # from opensm.conf where the agent runs the SM; "" unknown
    log_events: tuple[tuple[str, str], ...] = ()  # the last opensm.log events there (parse_opensm_log), oldest first

    @property
    def last_sweep(self) -> str:
        """When the local OpenSM last brought the subnet up (its log's last `SUBNET UP`, as logged); "" unknown."""
        return next((when for when, what in reversed(self.log_events) if "SUBNET UP" in what), "")

    @property
    def masters(self) -> tuple[SmInfo, ...]:
        return tuple(s for s in self.sms if s.state == MASTER)

    @property
    def standbys(self) -> tuple[SmInfo, ...]:
        return tuple(s for s in self.sms if s.state == STANDBY)


def _guid(text: str) -> str:
    return f"0x{int(text, 16):016x}"


def parse_sminfo(text: str) -> SmInfo | None:
    """The SM that `sminfo` reached; None when no SM answered (`iberror: failed: query`)."""
    for line in text.splitlines():
        m = _SMINFO.search(line)
        if m:
            state = m.group("state")
            return SmInfo(int(m.group("lid"), 0), _guid(m.group("guid")), int(m.group("act")),
                          int(m.group("prio")), int(state) if state is not None else MASTER)  # fmt: skip
        if _FAILED.search(line):
            return None
    raise SmParseError(f"sminfo: no 'sminfo: sm lid ...' line and no query failure in {len(text.splitlines())} lines")


def parse_saquery_smir(text: str) -> tuple[SmInfo, ...]:
    """Every SM of the subnet from `saquery SMIR` (`SMInfoRecord dump` blocks), in LID order."""
    records: list[dict[str, str]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("SMInfoRecord dump"):
            records.append({})
            continue
        m = _FIELD.match(line)
        if m and records:
            records[-1][m.group(1)] = m.group(2)
        elif m:
            raise SmParseError(f"saquery line {number}: {m.group(1)} before any 'SMInfoRecord dump'")
    out = []
    for i, r in enumerate(records, 1):
        missing = [k for k in ("LID", "GUID", "ActCount", "Priority", "SMState") if k not in r]
        if missing:
            raise SmParseError(f"saquery record {i}: missing {', '.join(missing)}")
        out.append(SmInfo(int(r["LID"], 0), _guid(r["GUID"]), int(r["ActCount"], 0), int(r["Priority"], 0),
                          int(r["SMState"], 0)))  # fmt: skip
    return tuple(sorted(out, key=lambda s: s.lid))


def parse_opensm_log(text: str) -> list[tuple[str, str]]:
    """(time as logged, event) for the lines that tell the SM's story: state changes and `SUBNET UP` (the end of a
    heavy sweep)."""
    events = []
    for line in text.splitlines():
        m = _LOG.match(line)
        if m and (m.group("what").startswith("Entering ") or "SUBNET UP" in m.group("what")):
            events.append((m.group("when"), m.group("what").strip()))
    return events


def parse_opensm_conf(text: str) -> dict[str, str]:
    """The settings that matter here; OpenSM writes `(null)` for an unset routing engine (its default, minhop)."""
    out = {}
    for line in text.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0] in ("routing_engine", "sm_priority", "sweep_interval"):
            out[parts[0]] = parts[1].strip()
    if out.get("routing_engine") in ("(null)", ""):
        out["routing_engine"] = "minhop"
    return out


def carry(kept: SmView | None, current: SmView) -> SmView:
    """The reading to keep as the rules' memory: the current one when the master moved on (another master, or its
    activity count grew), else the one kept, so `sm_findings(kept, current)` sees how long the count stood still."""
    if kept is None or len(kept.masters) != 1 or len(current.masters) != 1:
        return current
    before, now = kept.masters[0], current.masters[0]
    return current if before.guid != now.guid or now.activity > before.activity else kept


def _finding(rule: str, severity: str, message: str) -> Finding:
    return Finding(rule, severity, "cluster", CLUSTER_KEY, message)  # type: ignore[arg-type]


def sm_findings(
    previous: SmView | None, current: SmView, *, tiers: int = 2, hung_after_s: float = HUNG_AFTER_S
) -> list[Finding]:
    """The SM rules over the current reading and the kept one (`carry`; None: the first reading)."""
    out: list[Finding] = []
    masters = current.masters
    if not masters:
        out.append(_finding("sm_none", "critical", "no subnet manager answers: the fabric does not heal "
                                                   "(new links, lost links and LIDs stay as they are)"))  # fmt: skip
    elif len(masters) > 1:
        guids = ", ".join(m.guid for m in masters)
        out.append(_finding("sm_split_brain", "critical", f"{len(masters)} master SMs ({guids}): split brain"))
    if masters and not current.standbys:
        out.append(_finding("sm_no_standby", "warning", f"no standby SM: the master {masters[0].guid} is a single "
                                                        "point of failure"))  # fmt: skip
    if previous is not None and len(masters) == 1 and len(previous.masters) == 1:
        before, now = previous.masters[0], masters[0]
        if before.guid != now.guid:
            out.append(_finding("sm_failover", "warning", f"the master SM changed from {before.guid} to {now.guid} "
                                                          f"(lid {now.lid}, priority {now.priority})"))  # fmt: skip
        elif now.activity <= before.activity and current.at - previous.at >= hung_after_s:
            out.append(_finding("sm_hung", "critical", f"the master SM {now.guid} answers but its activity count "
                                f"stayed at {now.activity} for {current.at - previous.at:.0f} s: it no longer "
                                "sweeps"))  # fmt: skip
    engine = current.routing_engine
    if engine and tiers >= 2 and not (set(engine.split(",")) & FAT_TREE_ENGINES):
        out.append(_finding("sm_routing_engine", "warning", f"routing engine {engine} on a {tiers}-tier fat tree: "
                                                            "use ftree or updn to balance the up links"))  # fmt: skip
    return out


def view_to_dict(view: SmView) -> dict:
    return {"at": view.at, "routing_engine": view.routing_engine,
            "sms": [[s.lid, s.guid, s.activity, s.priority, s.state] for s in view.sms],
            "log_events": [list(e) for e in view.log_events]}  # fmt: skip


def view_from_dict(data: dict) -> SmView:
    events = tuple((str(w), str(e)) for w, e in data.get("log_events", ()))
    return SmView(float(data["at"]), tuple(SmInfo(*s) for s in data["sms"]), data.get("routing_engine", ""), events)
