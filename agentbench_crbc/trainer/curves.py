"""The learning-curve figure of a run folder: success, KL and credit statistics per RL update (matplotlib)."""

from __future__ import annotations

from pathlib import Path

from .metrics import read_metrics

__all__ = ["write_curves"]

#: (panel title, [(metrics key, label)]) of the RL rows; validations go on the success panel.
PANELS = [
    ("success", [("success", "training rollouts (T = 1.0)")]),
    ("KL", [("kl", "to the reference"), ("approx_kl_end", "per update (k3, old -> kept)")]),
    ("credit", [("adv_mean", "advantage mean"), ("adv_std", "advantage std")]),
]


def write_curves(run_dir: str | Path, name: str = "curves.png") -> Path | None:
    """Draw ``run_dir/metrics.jsonl`` into ``run_dir/curves.png``; None when matplotlib is missing (the
    ``[leaderboard]`` extra) or the run has no RL update yet. Written to a temp file, then renamed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir)
    rl = [r for r in rows if r.get("stage") == "rl"]
    if not rl:
        return None
    evals = [r for r in rows if r.get("stage") == "eval"]
    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.2), constrained_layout=True)
    steps = [r["step"] for r in rl]
    for ax, (title, keys) in zip(axes, PANELS, strict=True):
        for key, label in keys:
            if key in rl[0]:
                ax.plot(steps, [r.get(key, float("nan")) for r in rl], label=label, lw=1)
        if title == "success":
            for key in sorted({k for r in evals for k in r if k.startswith("val_") and k.endswith("_success")}):
                pts = [(r["step"], r[key]) for r in evals if key in r]
                ax.plot(*zip(*pts, strict=True), "o-", label=f"held out, {key[4:-8]}", ms=4)
        ax.set_title(title)
        ax.set_xlabel("RL update")
        ax.legend(fontsize=7, loc="best")
    out, tmp = run_dir / name, run_dir / f".{name}.tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(out)
    return out
