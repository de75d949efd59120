"""Sokoban speed, side by side with gym-sokoban in one run: level generation and steps per second.

gym-sokoban needs the old ``gym``, numpy < 2 and setuptools < 81 (for ``pkg_resources``), so this script
builds it a venv of its own (once, under ``--venv``, by default ``~/.cache/agentbench-crbc/gym-sokoban-venv``)
and runs the peer's half of the measurements there in a subprocess; ours run here. Measured:

* generation: ``reset()`` to a new playable level (gym-sokoban: generate + first frame; ours: seeded generate
  + first observation and info) at 6x6/1 box and 10x10/4 boxes, plus ours ``generate_level`` alone;
* steps per second with an RGB observation (both 16-pixel sprites) and with a text observation (ours: the
  symbol grid; gym-sokoban has none, so its cheapest ``tiny_rgb_array`` step plus the room-to-text join that
  verl-agent does);
  resets between episodes are not timed;
* difficulty: the mean optimal plan length of the generated levels (our solver on both sides' levels).

Usage::

    python benchmarks/sokoban_speed.py [--large-levels 5] [--steps 3000] [--venv DIR] [--markdown]

Targets (issue 4): >= 20x gym-sokoban's RGB steps/s, >= 20x faster 10x10/4-box generation, no slower at 6x6.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PEER_REQUIREMENTS = ["gym-sokoban==0.0.6", "gym==0.26.2", "numpy<2", "setuptools<81"]

PEER_WORKER = r"""
import json, random, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
random.seed(0); np.random.seed(0)
from gym_sokoban.envs.sokoban_env import SokobanEnv
n_small, n_large, n_steps = (int(x) for x in sys.argv[1:4])
out = {}
def gen(dim, boxes, n):
    env = SokobanEnv(dim_room=dim, num_boxes=boxes, max_steps=10**9, reset=False)
    times, levels = [], []
    for _ in range(n):
        t = time.perf_counter(); env.reset(); times.append(time.perf_counter() - t)
        grid = env.room_state.copy(); grid[(grid == 5) & (env.room_fixed == 2)] = 6
        levels.append(grid.astype(int).tolist())
    return env, times, levels
env, out["gen_small"], out["levels_small"] = gen((6, 6), 1, n_small)
_, out["gen_large"], out["levels_large"] = gen((10, 10), 4, n_large)
LOOKUP = {0: "#", 1: "_", 2: "O", 3: "\u221a", 4: "X", 5: "P", 6: "S"}
def steps(mode, text):
    env.reset(); rng = np.random.default_rng(0); acts = rng.integers(1, 5, size=n_steps); total = 0.0
    for a in acts:
        t = time.perf_counter()
        obs, r, done, info = env.step(int(a), observation_mode=mode)
        if text:
            grid = env.room_state.copy(); grid[(grid == 5) & (env.room_fixed == 2)] = 6
            s = "\n".join("".join(LOOKUP[c] for c in row) for row in grid.tolist())
        total += time.perf_counter() - t
        if done:
            env.reset()
    return n_steps / total
out["steps_rgb"] = steps("rgb_array", False)
out["steps_text"] = steps("tiny_rgb_array", True)
import gym, gym_sokoban
out["versions"] = {"gym": gym.__version__, "numpy": np.__version__, "gym_sokoban": "0.0.6",
                   "python": sys.version.split()[0]}
print(json.dumps(out))
"""


def ensure_peer_venv(path: Path) -> Path:
    """Create (once) a venv with gym-sokoban and the old stack it needs; returns its python."""
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    marker = path / ".abc-ready"
    if marker.exists() and python.exists():
        return python
    print(f"building the gym-sokoban venv in {path} ({' '.join(PEER_REQUIREMENTS)}) ...", flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PEER_REQUIREMENTS],
        check=True,
        capture_output=True,
        text=True,
    )
    marker.write_text(" ".join(PEER_REQUIREMENTS))
    return python


def run_peer(python: Path, n_small: int, n_large: int, n_steps: int) -> dict:
    done = subprocess.run(
        [str(python), "-c", PEER_WORKER, str(n_small), str(n_large), str(n_steps)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_ours(n_small: int, n_large: int, n_steps: int) -> dict:
    import gymnasium as gym
    import numpy as np

    import agentbench_crbc.envs  # noqa: F401
    from agentbench_crbc.envs.sokoban import generate_level

    out: dict = {}
    for key, env_id, n in (
        ("small", "abc/Sokoban-v0", n_small),
        ("large", "abc/Sokoban-10x10-4b-v0", n_large),
    ):
        env = gym.make(env_id)
        env.reset(seed=0)
        times, levels = [], []
        for seed in range(n):
            t = time.perf_counter()
            env.reset(seed=seed)
            times.append(time.perf_counter() - t)
            levels.append(env.unwrapped.codes().tolist())
        out[f"gen_{key}"], out[f"levels_{key}"] = times, levels
        u = env.unwrapped
        t = time.perf_counter()
        for seed in range(n):
            generate_level(seed, size=u.shape, num_boxes=u.num_boxes, max_moves=u.max_steps)
        out[f"generate_level_{key}"] = (time.perf_counter() - t) / n
    for mode in ("rgb", "text"):
        env = gym.make("abc/Sokoban-v0", obs_mode=mode)
        env.reset(seed=0)
        actions = [("up", "down", "left", "right")[a] for a in np.random.default_rng(0).integers(0, 4, n_steps)]
        total = 0.0
        for a in actions:
            t = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(a)
            total += time.perf_counter() - t
            if terminated or truncated:
                env.reset()
        out[f"steps_{mode}"] = n_steps / total
    return out


def mean_plan_length(levels: list) -> tuple[float, int]:
    import numpy as np

    from agentbench_crbc.envs.sokoban import Level, solve

    lengths = []
    for grid in levels:
        try:
            plan = solve(Level.from_codes(np.array(grid)), max_nodes=300_000)
        except Exception:
            continue
        if plan is not None:
            lengths.append(len(plan))
    return (statistics.fmean(lengths) if lengths else float("nan")), len(lengths)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small-levels", type=int, default=100, help="6x6/1-box levels generated per side")
    parser.add_argument("--large-levels", type=int, default=5, help="10x10/4-box levels (gym-sokoban: ~6 s each)")
    parser.add_argument("--steps", type=int, default=3000, help="timed steps per observation mode")
    parser.add_argument(
        "--venv",
        type=Path,
        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentbench-crbc" / "gym-sokoban-venv",
        help="where gym-sokoban's venv lives",
    )
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args()

    ours = run_ours(args.small_levels, args.large_levels, args.steps)
    peer, failure = None, None
    try:
        peer = run_peer(ensure_peer_venv(args.venv), args.small_levels, args.large_levels, args.steps)
    except (subprocess.CalledProcessError, RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        failure = getattr(e, "stderr", None) or str(e)
    if peer is None:
        print(
            "=" * 78
            + "\n!!! gym-sokoban COULD NOT BE INSTALLED OR RUN: only our numbers below; no comparison !!!\n"
            + str(failure)[-1500:]
            + "\n"
            + "=" * 78,
            file=sys.stderr,
        )

    med = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    rows = [
        (
            "reset to a new 6x6/1-box level (ms, median)",
            med(ours["gen_small"]),
            peer and med(peer["gen_small"]),
            -1,
        ),
        (
            "reset to a new 10x10/4-box level (ms, median)",
            med(ours["gen_large"]),
            peer and med(peer["gen_large"]),
            -1,
        ),
        ("steps/s, RGB observation", ours["steps_rgb"], peer and peer["steps_rgb"], 1),
        ("steps/s, text observation", ours["steps_text"], peer and peer["steps_text"], 1),
    ]
    solved = {}
    for key, label in (("small", "6x6/1 box"), ("large", "10x10/4 boxes")):
        mine, n_mine = mean_plan_length(ours[f"levels_{key}"])
        theirs, n_theirs = mean_plan_length(peer[f"levels_{key}"]) if peer else (None, 0)
        rows.append((f"mean optimal moves, {label}", mine, theirs, 0))
        solved[label] = (
            n_mine,
            len(ours[f"levels_{key}"]),
            n_theirs,
            len(peer[f"levels_{key}"]) if peer else 0,
        )
    sep = " | " if args.markdown else "  "
    print(f"{'measure':<48}{sep}{'agentbench-crbc':>16}{sep}{'gym-sokoban':>12}{sep}{'ratio':>8}")
    if args.markdown:
        print("|".join(["---"] * 4))
    ratios = {}
    for name, a, b, better in rows:
        ratio = "" if not b or better == 0 else f"{(a / b if better > 0 else b / a):.1f}x"
        ratios[name] = ratio
        peer_txt = f"{b:>12.2f}" if b else f"{'n/a':>12}"
        print(f"{name:<48}{sep}{a:>16.2f}{sep}{peer_txt}{sep}{ratio:>8}")
    for label, (a, n_a, b, n_b) in solved.items():
        print(f"levels the bounded solver finished ({label}): ours {a}/{n_a}, gym-sokoban {b}/{n_b}")
    print(
        f"ours: generate_level alone (mean) {ours['generate_level_small'] * 1000:.2f} ms (6x6/1), "
        f"{ours['generate_level_large'] * 1000:.2f} ms (10x10/4)"
    )
    if peer:
        print(f"gym-sokoban stack: {peer['versions']}")
        checks = {
            ">= 20x RGB steps/s": ours["steps_rgb"] >= 20 * peer["steps_rgb"],
            ">= 20x faster 10x10/4 generation": med(peer["gen_large"]) >= 20 * med(ours["gen_large"]),
            "6x6 generation no slower": med(ours["gen_small"]) <= med(peer["gen_small"]),
        }
        for name, ok in checks.items():
            print(f"target {name}: {'met' if ok else 'MISSED'}")
        return 0 if all(checks.values()) else 1
    return 3


if __name__ == "__main__":
    sys.exit(main())
