"""GPU models the product knows: memory, NVLink bandwidth, MIG support.

NVLink figures are per GPU, bidirectional, in GB/s (vendor data sheets).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GpuModel:
    name: str
    memory_mib: int
    nvlink_generation: int  # 0: no NVLink
    nvlink_gbps: float  # GB/s per GPU, bidirectional
    mig_capable: bool


GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("V100", 32 * 1024, 2, 300.0, False),
        GpuModel("A100", 80 * 1024, 3, 600.0, True),
        GpuModel("A800", 80 * 1024, 3, 400.0, True),
        GpuModel("H100", 80 * 1024, 4, 900.0, True),
        GpuModel("H200", 141 * 1024, 4, 900.0, True),
        GpuModel("B200", 180 * 1024, 5, 1800.0, True),
        GpuModel("L4", 24 * 1024, 0, 0.0, False),
    )
}


def gpu_model(name: str) -> GpuModel:
    """Look a model up by name, case-insensitively; KeyError lists the known ones."""
    key = name.strip().upper()
    if key not in GPU_MODELS:
        raise KeyError(f"unknown GPU model {name!r}; known: {', '.join(GPU_MODELS)}")
    return GPU_MODELS[key]
