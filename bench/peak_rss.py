"""The peak resident memory of a bench, printed on one line at its end (issue 16: every bench says what it held).

`ru_maxrss` is the kernel's high-water mark, so the figure covers the whole run, setup included, not a sample taken
at the end. Linux carries the mark across fork and exec, so a bench started from a large process reports at least
that process's size (start benches from a shell); for the same reason children are not reported: a `uname` that
platform.processor() forks would show the bench's own size again. Servers a bench starts are measured by the bench.
"""

from __future__ import annotations

import resource
import sys


def peak_rss_mib() -> float:
    """The largest resident set this process has had, in MiB."""
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Linux reports KiB, macOS bytes.
    return maxrss / (1024 * 1024) if sys.platform == "darwin" else maxrss / 1024


def peak_rss_line() -> str:
    """`peak RSS: 123.4 MiB (this process)`."""
    return f"peak RSS: {peak_rss_mib():.1f} MiB (this process)"
