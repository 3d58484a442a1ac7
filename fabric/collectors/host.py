"""The host's own CPUs and memory, as a node agent sees them: what jobs asking for host CPU and memory are placed
against (fabric Node.cpu_milli / memory_mib; ingest records a change, never every poll).

* CPUs: the CPUs this process may run on, `os.sched_getaffinity(0)` (a cpuset or `taskset` of the agent narrows
  it; Linux), else `os.cpu_count()`; x 1000 as milli-CPUs, the unit jobs ask in (Kubernetes' "500m").
* Memory: `MemTotal` of /proc/meminfo (kB, i.e. KiB as the kernel writes it), in whole MiB rounded down.

What cannot be read is None with the reason in `errors` (a missing or malformed /proc/meminfo), never 0: 0 would
mean "not tracked" to the scheduler.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .samples import HostSample

MEMINFO = "/proc/meminfo"


def parse_meminfo_total_mib(text: str) -> int:
    """MiB of the `MemTotal:` line of a /proc/meminfo text ("MemTotal:       24683584 kB" -> 24105)."""
    for line in text.splitlines():
        key, sep, rest = line.partition(":")
        if key.strip() != "MemTotal" or not sep:
            continue
        parts = rest.split()
        # The kernel writes every size line as "<number> kB" (KiB); anything else is not a meminfo we know.
        if len(parts) != 2 or not parts[0].isdigit() or parts[1] != "kB":
            raise ValueError(f"malformed MemTotal line {line.strip()!r} (expected '<number> kB')")
        return int(parts[0]) // 1024
    raise ValueError("no MemTotal line")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask), else the CPUs of the system."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 0


def read_host(meminfo: str = MEMINFO, cpus: Callable[[], int] = usable_cpus) -> tuple[HostSample, list[str]]:
    """The host's CPUs (milli-CPUs) and MemTotal (MiB), and what could not be read."""
    errors: list[str] = []
    host = HostSample()
    try:
        n = cpus()
    except OSError as exc:
        n = 0
        errors.append(f"host CPUs: {exc}")
    host.cpu_milli = n * 1000 if n > 0 else None
    try:
        with open(meminfo, encoding="ascii", errors="replace") as handle:
            host.memory_mib = parse_meminfo_total_mib(handle.read())
    except OSError as exc:
        errors.append(f"{meminfo}: cannot read: {exc.strerror or exc}")
    except ValueError as exc:
        errors.append(f"{meminfo}: {exc}")
    return host, errors
