"""A rough time estimate of a run on this machine, for the warning when a GPU-sized run starts on a CPU."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from .config import TrainConfig

__all__ = ["cpu_warning", "matmul_flops", "run_flops"]

#: Runs whose estimate on the CPU is longer than this get the warning even with the CPU preset. The estimate is an
#: upper bound (every episode at its step cap, every prompt at its token cap): the CPU demo's 60 updates estimate
#: to about 75 minutes on a 29 GFLOP/s CPU and take about 10.
LONG_S = 3 * 3600.0


def matmul_flops(dtype: torch.dtype = torch.float32, seconds: float = 0.2, n: int = 256) -> float:
    """This machine's dense matmul speed in FLOP/s (``n x n`` products for about ``seconds``)."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)  # warm-up
    reps, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        torch.mm(a, b)
        reps += 1
    return 2.0 * n**3 * reps / elapsed


def run_flops(cfg: TrainConfig, n_params: int) -> float:
    """FLOPs of the whole run with every episode at its step cap and every prompt at its token cap: 2 per parameter
    per token to generate or score, 6 to train (forward and backward)."""
    tokens = cfg.rollout.max_prompt_tokens + cfg.rollout.max_response_tokens
    samples = cfg.updates * cfg.rollout.groups * cfg.rollout.group_size * cfg.env.max_steps
    rl = samples * tokens * n_params * (2 + 2 * 2 + 6 * cfg.optim.ppo_epochs)  # generate, old+ref log-probs, train
    sft = cfg.sft.steps * cfg.sft.batch_size * tokens * n_params * 6
    from .eval import eval_modes

    modes = eval_modes(cfg)  # sampled episodes per sampling mode, and one greedy
    per_level = sum(1 if t <= 0 else max(cfg.eval.samples, 1) for _, t in modes)
    evals = 3 + (cfg.updates // cfg.eval.every if cfg.eval.every else 0)
    val = evals * per_level * cfg.eval.episodes * cfg.env.max_steps * tokens * n_params * 2
    return float(rl + sft + val)


def _human(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} days"


def cpu_warning(cfg: TrainConfig, model: torch.nn.Module, device: torch.device,
                say: Callable[[str], None] = print) -> float | None:
    """On a CPU, when the preset is sized for a GPU (not ``cpu-demo``) or the estimate exceeds an hour: say so,
    with the estimate; returns the estimate in seconds (``None`` on a GPU).

    The estimate divides :func:`run_flops` by the measured matmul speed. Token-by-token decoding reaches far less
    than that speed, while episodes that end before their cap need less work, so it is an order of magnitude.
    """
    if device.type != "cpu":
        return None
    n_params = sum(p.numel() for p in model.parameters())
    dtype = next(model.parameters()).dtype
    speed = matmul_flops(dtype)
    seconds = run_flops(cfg, n_params) / speed
    if cfg.preset == "cpu-demo" and seconds < LONG_S:
        return seconds
    what = f"preset {cfg.preset!r} is sized for a GPU" if cfg.preset != "cpu-demo" else "a long run"
    r = cfg.rollout
    cap = (f" max_minutes={cfg.max_minutes:g} stops RL after {cfg.max_minutes:g} min and the summary says so."
           if cfg.max_minutes > 0 else "")
    line = (f"warning: {what} and runs on the CPU here: up to roughly {_human(seconds)} "
            f"({n_params / 1e6:,.0f}M parameters, "
            f"{cfg.updates} updates x {r.groups} groups x G={r.group_size}, up to {cfg.env.max_steps} steps of "
            f"{r.max_prompt_tokens}+{r.max_response_tokens} tokens; this CPU multiplies at {speed / 1e9:.1f} "
            f"GFLOP/s now).{cap} Ctrl-C saves a checkpoint and stops; `abc train` with no --preset is the CPU demo.")
    say(line)
    return seconds
