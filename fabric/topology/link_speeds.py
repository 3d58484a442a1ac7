"""InfiniBand link-rate table: the one place that knows what "4xHDR" means.

Data rates are what a link carries after encoding (what the scheduler and the
reports price); ibstat and sysfs print the signalling rate as "Rate" (FDR 56, QDR 40).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Gb/s per lane pair for a 4x link, divided by 4 below to get per lane.
SPEED_DATA_4X_GBPS: dict[str, float] = {
    "SDR": 8.0,
    "DDR": 16.0,
    "QDR": 32.0,
    "FDR10": 40.0,
    "FDR": 54.5,
    "EDR": 100.0,
    "HDR": 200.0,
    "NDR": 400.0,
    "XDR": 800.0,
}
SPEEDS: tuple[str, ...] = tuple(SPEED_DATA_4X_GBPS)
WIDTHS: tuple[int, ...] = (1, 2, 4, 8, 12)

_RATE_RE = re.compile(r"^\s*(?P<width>\d+)x\s*(?P<speed>[A-Za-z0-9?]+)\s*$")


class RateError(ValueError):
    """A link rate string that is not a known width x speed."""


@dataclass(frozen=True, slots=True)
class LinkRate:
    width: int  # lanes: 1, 2, 4, 8, 12
    speed: str  # "QDR", "HDR", ... or "" when the fabric reported "???"

    @property
    def known(self) -> bool:
        return self.speed in SPEED_DATA_4X_GBPS

    @property
    def data_gbps(self) -> float:
        """Usable data rate in Gb/s; 0.0 when the speed is unknown."""
        if not self.known:
            return 0.0
        return SPEED_DATA_4X_GBPS[self.speed] * self.width / 4

    @property
    def label(self) -> str:
        return f"{self.width}x{self.speed or '???'}"

    def __str__(self) -> str:
        return self.label


def parse_rate(text: str) -> LinkRate:
    """Parse "4xQDR", "4x EDR", "4x???" (unknown speed) into a LinkRate.

    Raises RateError naming the text when the width or speed is not one IB defines.
    """
    m = _RATE_RE.match(text)
    if not m:
        raise RateError(f"not a link rate: {text!r} (expected e.g. '4xHDR')")
    width = int(m.group("width"))
    speed = m.group("speed").upper()
    if width not in WIDTHS:
        raise RateError(f"link width {width}x in {text!r} is not one of {', '.join(f'{w}x' for w in WIDTHS)}")
    if set(speed) == {"?"}:
        return LinkRate(width, "")
    if speed not in SPEED_DATA_4X_GBPS:
        raise RateError(f"link speed {speed!r} in {text!r} is not one of {', '.join(SPEEDS)}")
    return LinkRate(width, speed)


def data_rate_gbps(width: int, speed: str) -> float:
    return LinkRate(width, speed).data_gbps
