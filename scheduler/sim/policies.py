"""Policy names the replay knows, and how to make one. PURE.

make_policy("tiresias-l")            # a Tiresias baseline (scheduler.sim.baselines)
make_policy("default", round_s=10)   # the production engine (scheduler.sim.engine_policy)
"""

from __future__ import annotations

from scheduler.sim.baselines import BASELINES, make_baseline
from scheduler.sim.engine_policy import DEFAULT_ROUND_S, EnginePolicy

ENGINE_POLICIES = ("default", "default-blind")
POLICY_NAMES = (*BASELINES, *ENGINE_POLICIES)
PLACEMENT_VARIANTS = ("fifo@count", "fjf@count", "fifo@yarn", "fjf@yarn")


def make_policy(name: str, round_s: float = DEFAULT_ROUND_S, seed: int = 0):
    """A fresh policy object (one per replay); ValueError lists the known names."""
    key = name.strip().lower()
    if key == "default":
        return EnginePolicy(round_s=round_s)
    if key == "default-blind":
        return EnginePolicy(round_s=round_s, blind=True, seed=seed)
    try:
        return make_baseline(key)
    except KeyError:
        raise ValueError(
            f"unknown policy {name!r}; known: {', '.join(POLICY_NAMES)} (and {', '.join(PLACEMENT_VARIANTS)})"
        ) from None


def parse_policies(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("no policy given")
    for n in names:
        make_policy(n)  # validates
    return names
