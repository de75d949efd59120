"""ALFWorld speed: reset/step latency of ``abc/ALFWorld-v0`` beside the bare engine, and worker-process scaling.

Run: ``python benchmarks/alfworld_speed.py [--games 4] [--steps 40] [--workers 1 2]``. The bare engine is the
stack ``AlfredTWEnv`` builds (TextWorld ``PddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos``) playing the same
games with the same commands; the wrapper's overhead is the difference. Scaling steps ``AsyncVectorEnv`` copies
(one worker process each) with random admissible commands and reports steps per second.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

import gymnasium as gym

import agentbench_crbc.envs  # noqa: F401  (registers abc/ALFWorld-v0)
from agentbench_crbc.envs.alfworld.engine import make_engine
from agentbench_crbc.envs.alfworld.generate import ensure_game
from agentbench_crbc.envs.alfworld.layouts import TASK_TYPES


def _games(root: str, n: int) -> list[str]:
    return [str(ensure_game("train", TASK_TYPES[i % 6], i // 6, root=root)) for i in range(n)]


def _script(path: str, steps: int, seed: int) -> list[str]:
    """A fixed command list for one game: random admissible commands (from a bare-engine run)."""
    rng = random.Random(seed)
    engine = make_engine()
    engine.load(json.loads(Path(path).read_text()))
    state = engine.reset()
    out = []
    for _ in range(steps):
        cmd = rng.choice([c for c in state["admissible_commands"] if c != "help"])
        out.append(cmd)
        state, _, done = engine.step(cmd)
        if done:
            break
    return out


class _TimedEngine:
    """Forwards to the engine and adds up the seconds spent in its ``step``."""

    def __init__(self, engine: object) -> None:
        self.engine, self.spent = engine, 0.0

    def step(self, command: str):
        t = time.perf_counter()
        out = self.engine.step(command)
        self.spent += time.perf_counter() - t
        return out

    def __getattr__(self, name: str):
        return getattr(self.engine, name)


def latency(games: list[str], steps: int) -> dict[str, float]:
    scripts = {g: _script(g, steps, i) for i, g in enumerate(games)}
    raw_reset, raw_step, our_reset, our_step = [], [], [], []
    engine = make_engine()
    env = gym.make("abc/ALFWorld-v0", game_files=games)
    for _ in range(2):  # alternate to share the machine's noise fairly
        for i, g in enumerate(games):
            data = json.loads(Path(g).read_text())
            t = time.perf_counter()
            engine.load(data)
            engine.reset()
            raw_reset.append(time.perf_counter() - t)
            for cmd in scripts[g]:
                t = time.perf_counter()
                engine.step(cmd)
                raw_step.append(time.perf_counter() - t)
            t = time.perf_counter()
            env.reset(options={"index": i})
            our_reset.append(time.perf_counter() - t)
            env.unwrapped._loaded = None  # force a load next time too, like the bare engine
            for cmd in scripts[g]:
                t = time.perf_counter()
                env.step(cmd)
                our_step.append(time.perf_counter() - t)
    # the wrapper's own time, measured inside the same calls (robust to a busy machine)
    proxy = _TimedEngine(env.unwrapped._engine)
    env.unwrapped._engine = proxy
    in_env = 0.0
    for i, g in enumerate(games):
        env.reset(options={"index": i})
        t = time.perf_counter()
        for cmd in scripts[g]:
            env.step(cmd)
        in_env += time.perf_counter() - t
    wrapper_self, engine_total = in_env - proxy.spent, proxy.spent
    env.close()
    return {"wrapper_self_pct": 100 * wrapper_self / engine_total, "engine_reset_s": statistics.mean(raw_reset),
            "env_reset_s": statistics.mean(our_reset),
            "engine_step_ms": 1000 * statistics.mean(raw_step), "env_step_ms": 1000 * statistics.mean(our_step),
            "engine_step_median_ms": 1000 * statistics.median(raw_step),
            "env_step_median_ms": 1000 * statistics.median(our_step),
            "step_overhead_pct": 100 * (sum(our_step) / sum(raw_step) - 1), "n_steps": len(raw_step)}


def scaling(games: list[str], workers: int, steps: int) -> float:
    """Steps per second of ``workers`` copies in ``AsyncVectorEnv`` (one process each), random admissible play."""
    fns = [lambda: gym.make("abc/ALFWorld-v0", game_files=games) for _ in range(workers)]
    venv = gym.vector.AsyncVectorEnv(fns, shared_memory=False)
    rng = random.Random(0)
    _, infos = venv.reset(seed=list(range(workers)))
    t = time.perf_counter()
    for _ in range(steps):
        actions = tuple(rng.choice(list(a)) for a in infos["admissible_actions"])
        _, _, _, _, infos = venv.step(actions)
    rate = steps * workers / (time.perf_counter() - t)
    venv.close()
    return rate


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--games", type=int, default=4)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--cache", default=None, help="game folder (default: a temporary one)")
    args = p.parse_args()
    root = args.cache or tempfile.mkdtemp(prefix="abc-alfworld-bench-")
    t = time.perf_counter()
    games = _games(root, args.games)
    print(f"generated+checked {len(games)} games in {time.perf_counter() - t:.1f} s "
          f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    res = latency(games, args.steps)
    print(json.dumps({k: round(v, 3) for k, v in res.items()}))
    base = None
    for w in args.workers:
        rate = scaling(games, w, args.steps)
        base = base or rate / w
        print(f"workers={w}: {rate:.2f} steps/s ({rate / base:.2f}x one worker)")


if __name__ == "__main__":
    main()
