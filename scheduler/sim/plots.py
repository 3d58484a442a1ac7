"""PNG charts of replay results: JCT CDF per policy, GPU utilisation over time (matplotlib, Agg backend).

write_plots(results, "out/")   # -> [out/jct_cdf.png, out/utilisation.png]
"""

from __future__ import annotations

from pathlib import Path

from scheduler.sim.metrics import ReplayResult


def write_plots(results: list[ReplayResult], folder: str | Path, title: str = "") -> list[Path]:
    # Here, not at the top: matplotlib is the optional `plot` extra and takes half a second to import.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after use("Agg"): pyplot picks its backend when first imported

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        jcts = sorted(j.jct for j in r.jobs if j.jct is not None)
        if not jcts:
            continue
        n = len(jcts)
        ax.step(jcts, [(i + 1) / n for i in range(n)], where="post", label=f"{r.policy} (avg {r.avg_jct:.0f} s)")
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.01)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(title or "JCT CDF")
    fig.tight_layout()
    p = out / "jct_cdf.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        if not r.busy_timeline:
            continue
        ts = [t / 3600.0 for t, _ in r.busy_timeline]
        ys = [b / r.n_gpus for _, b in r.busy_timeline]
        ax.step(ts, ys, where="post", label=f"{r.policy} ({r.utilisation:.0%})", linewidth=1)
    ax.set_xlabel("time (h)")
    ax.set_ylabel("GPUs held by jobs (fraction)")
    ax.set_ylim(0, 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    ax.set_title(title or "GPU utilisation over time")
    fig.tight_layout()
    p = out / "utilisation.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    paths.append(p)
    return paths
