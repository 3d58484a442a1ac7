"""The subnet managers, read on the fabric agent (issue 18, part 1): `saquery SMIR` (every SM of the subnet: LID,
port GUID, priority, state, activity count) and, where this host runs OpenSM, its opensm.conf's routing engine and
the last events of its opensm.log (state changes, `SUBNET UP`: the last heavy sweep).

No Django: the fabric agent's task (fabric.tasks.poll_subnet_managers) and `manage.py subnet_manager --run` call
`read_subnet_managers`; the central side judges the reading (fabric.subnet_manager.record_sm_view). The parsing is
fabric.telemetry.subnet_manager's, checked against real OpenSM 3.3.23 outputs.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from fabric.telemetry.subnet_manager import SmView, parse_opensm_conf, parse_opensm_log, parse_saquery_smir

CA_NAME = re.compile(r"^[A-Za-z0-9_]{1,32}$")


# saquery failing for this host's own reasons (no umad access, no HCA, the tool missing): not a fabric without SM.
HOST_PROBLEMS = ("Permission denied", "Failed to open", "can't open", "No such file or directory", "not found")


class SmReadError(RuntimeError):
    """saquery could not be run, or printed what it never prints (naming which)."""


def saquery_argv(ca: str = "", binary: str = "saquery") -> list[str]:
    argv = [binary, "SMIR"]
    if ca:
        if not CA_NAME.match(ca):
            raise SmReadError(f"HCA {ca!r} is not an HCA name (letters, digits, _)")
        argv += ["-C", ca]
    return argv


LOG_TAIL_BYTES = 256 * 1024  # opensm.log grows for ever: its last events are at the end
LOG_EVENTS = 20


def read_subnet_managers(
    ca: str = "",
    opensm_conf: str = "",
    opensm_log: str = "",
    *,
    timeout_s: float = 30.0,
    run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
    now: Callable[[], float] = time.time,
) -> SmView:
    """The subnet's SMs now. No SA answering (saquery fails without a record) is a reading with no SM: that is what
    a fabric without a subnet manager looks like from a host. SmReadError when saquery cannot run or its output does
    not parse, or opensm.conf cannot be read."""
    argv = saquery_argv(ca)
    try:
        done = run(argv, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SmReadError(f"{' '.join(argv)}: {exc}") from None
    at = now()
    if done.returncode != 0 and any(m in (done.stderr or "") for m in HOST_PROBLEMS):
        raise SmReadError(f"{' '.join(argv)}: {(done.stderr or '').strip()[:300]}")
    text = done.stdout if done.returncode == 0 or "SMInfoRecord" in done.stdout else ""
    try:
        sms = parse_saquery_smir(text)
    except ValueError as exc:
        raise SmReadError(f"{' '.join(argv)}: {exc}") from None
    engine = ""
    if opensm_conf:
        try:
            engine = parse_opensm_conf(Path(opensm_conf).read_text())["routing_engine"] or ""
        except OSError as exc:
            raise SmReadError(f"{opensm_conf}: {exc.strerror or exc}") from None
    events: tuple[tuple[str, str], ...] = ()
    if opensm_log:
        try:
            with open(opensm_log, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
                tail = f.read().decode("utf-8", "replace")
        except OSError as exc:
            raise SmReadError(f"{opensm_log}: {exc.strerror or exc}") from None
        events = tuple(parse_opensm_log(tail)[-LOG_EVENTS:])
    return SmView(at, sms, engine, events)
