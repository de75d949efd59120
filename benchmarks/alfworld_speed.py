"""ALFWorld speed: reset/step latency of ``abc/ALFWorld-v0`` and the bare engine, each with the exact text-generation
speedups (``envs/alfworld/fastparse.py``) on and off, side by side; group resets with the PDDL translation cache
(``envs/alfworld/resetcache.py``) off and on; and worker-process scaling.

Run: ``python benchmarks/alfworld_speed.py [--games 4] [--steps 30] [--workers 1 2] [--passes 2] [--group 8]
[--reset-only]``. Group resets: for each game, ``--group`` env copies in one process reset to it one after the
other (the first one loads a game this process has not translated, the others the same game again, as a training
group's copies do), then each copy resets again (no load); translation cache off and on take turns game by game,
and the run checks that both give identical observations and infos. The bare engine
is the stack ``AlfredTWEnv`` builds (TextWorld ``PddlEnv`` + ``AlfredDemangler`` + ``AlfredInfos``); all four
contestants (engine off/on, env off/on) play the same games with the same commands (random admissible commands
fixed in advance), taking turns game by game so that the machine's load is shared fairly, and the run checks that
the speedup changes no observation, admissible list, reward, done flag or anchor. The wrapper's own time is measured
inside the same calls. Scaling steps ``AsyncVectorEnv`` copies (one worker process each) with random admissible
commands, with the speedup on and off, and reports steps per second.
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
from agentbench_crbc.envs.alfworld import fastparse, resetcache
from agentbench_crbc.envs.alfworld.engine import make_engine, uses_fast_parse
from agentbench_crbc.envs.alfworld.generate import ensure_game
from agentbench_crbc.envs.alfworld.layouts import TASK_TYPES

MODES = {"off": False, "on": True}


def _games(root: str, n: int) -> list[str]:
    engine = make_engine(fast_parse=False)  # games are checked by the plain engine
    return [str(ensure_game("train", TASK_TYPES[i % 6], i // 6, root=root, engine=engine)) for i in range(n)]


def _script(path: str, steps: int, seed: int) -> list[str]:
    """A fixed command list for one game: random admissible commands (from a plain-engine run)."""
    rng = random.Random(seed)
    engine = make_engine(fast_parse=False)
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


def latency(games: list[str], steps: int, passes: int = 2) -> dict[str, dict[str, float]]:
    """Per mode (speedup ``off``/``on``): reset and step times of the bare engine and of the env, wrapper self time."""
    scripts = {g: _script(g, steps, i) for i, g in enumerate(games)}
    engines = {m: make_engine(fast_parse=f) for m, f in MODES.items()}
    envs = {m: gym.make("abc/ALFWorld-v0", game_files=games, fast_parse=f) for m, f in MODES.items()}
    for m, f in MODES.items():
        assert uses_fast_parse(engines[m]) is f and uses_fast_parse(envs[m].unwrapped.engine) is f, \
            f"speedup unavailable: {fastparse.unavailable_reason()}"
    t_reset: dict[tuple[str, str], list[float]] = {(k, m): [] for k in ("engine", "env") for m in MODES}
    t_step: dict[tuple[str, str], list[float]] = {(k, m): [] for k in ("engine", "env") for m in MODES}
    seen: dict[str, list] = {m: [] for m in MODES}
    for p in range(passes):  # take turns game by game to share the machine's noise fairly
        for i, g in enumerate(games):
            data = json.loads(Path(g).read_text())
            order = list(MODES) if (p + i) % 2 == 0 else list(MODES)[::-1]
            for m in order:
                engine = engines[m]
                t = time.perf_counter()
                engine.load(data)
                engine.reset()
                t_reset["engine", m].append(time.perf_counter() - t)
                for cmd in scripts[g]:
                    t = time.perf_counter()
                    engine.step(cmd)
                    t_step["engine", m].append(time.perf_counter() - t)
            for m in order:
                env = envs[m]
                t = time.perf_counter()
                obs, info = env.reset(options={"index": i})
                t_reset["env", m].append(time.perf_counter() - t)
                env.unwrapped._loaded = None  # force a load next time too, like the bare engine
                record = [(obs, info)]
                for cmd in scripts[g]:
                    t = time.perf_counter()
                    out = env.step(cmd)
                    t_step["env", m].append(time.perf_counter() - t)
                    record.append(out)
                seen[m].append(record)
    identical = seen["off"] == seen["on"]
    # the wrapper's own time, measured inside the same calls (robust to a busy machine)
    self_pct = {}
    for m in MODES:
        env = envs[m]
        proxy = _TimedEngine(env.unwrapped._engine)
        env.unwrapped._engine = proxy
        in_env = 0.0
        for i, g in enumerate(games):
            env.reset(options={"index": i})
            t = time.perf_counter()
            for cmd in scripts[g]:
                env.step(cmd)
            in_env += time.perf_counter() - t
        self_pct[m] = 100 * (in_env - proxy.spent) / proxy.spent
        env.close()
    out: dict[str, dict[str, float]] = {}
    for m in MODES:
        out[m] = {"engine_reset_s": statistics.mean(t_reset["engine", m]),
                  "env_reset_s": statistics.mean(t_reset["env", m]),
                  "engine_step_ms": 1000 * statistics.mean(t_step["engine", m]),
                  "engine_step_median_ms": 1000 * statistics.median(t_step["engine", m]),
                  "env_step_ms": 1000 * statistics.mean(t_step["env", m]),
                  "env_step_median_ms": 1000 * statistics.median(t_step["env", m]),
                  "env_step_p90_ms": 1000 * statistics.quantiles(t_step["env", m], n=10)[-1],
                  "wrapper_self_pct": self_pct[m], "n_steps": len(t_step["env", m])}
    out["speedup"] = {"engine_step_mean_x": out["off"]["engine_step_ms"] / out["on"]["engine_step_ms"],
                      "env_step_mean_x": out["off"]["env_step_ms"] / out["on"]["env_step_ms"],
                      "env_step_median_x": out["off"]["env_step_median_ms"] / out["on"]["env_step_median_ms"],
                      "identical_output": float(identical)}
    return out


def group_resets(games: list[str], group: int) -> dict[str, dict[str, float]]:
    """Per mode (translation cache ``off``/``on``, text speedups on in both): seconds for the first copy's load +
    reset of a game, for each further copy's load + reset of the same game, and for a copy's repeated reset."""
    times: dict[str, dict[str, list[float]]] = {m: {"first": [], "same_game": [], "again": []} for m in MODES}
    seen: dict[str, list] = {m: [] for m in MODES}
    hits = misses = 0
    saved = os.environ.get(resetcache.ENV_VAR)
    try:
        for i, g in enumerate(games):
            for m in (list(MODES) if i % 2 == 0 else list(MODES)[::-1]):
                os.environ[resetcache.ENV_VAR] = "1" if MODES[m] else "0"
                resetcache.clear()  # the first copy meets a game this process has not translated
                envs = [gym.make("abc/ALFWorld-v0", game_files=[g]) for _ in range(group)]
                for k, env in enumerate(envs):
                    t = time.perf_counter()
                    out = env.reset(seed=0)
                    times[m]["first" if k == 0 else "same_game"].append(time.perf_counter() - t)
                    seen[m].append(out)
                for env in envs:
                    t = time.perf_counter()
                    out = env.reset(seed=0)
                    times[m]["again"].append(time.perf_counter() - t)
                    seen[m].append(out)
                    env.close()
                hits, misses = hits + resetcache.TRANSLATIONS.hits, misses + resetcache.TRANSLATIONS.misses
    finally:
        if saved is None:
            os.environ.pop(resetcache.ENV_VAR, None)
        else:
            os.environ[resetcache.ENV_VAR] = saved
    out: dict[str, dict[str, float]] = {}
    for m in MODES:
        t = times[m]
        out[m] = {"first_load_reset_s": statistics.mean(t["first"]),
                  "same_game_load_reset_s": statistics.mean(t["same_game"]),
                  "same_game_load_reset_median_s": statistics.median(t["same_game"]),
                  "repeat_reset_s": statistics.mean(t["again"]),
                  "group_total_s": (sum(t["first"]) + sum(t["same_game"])) / len(games),
                  "n_resets": len(t["first"]) + len(t["same_game"]) + len(t["again"])}
    out["cache"] = {"same_game_x": out["off"]["same_game_load_reset_s"] / out["on"]["same_game_load_reset_s"],
                    "repeat_reset_x": out["off"]["repeat_reset_s"] / out["on"]["repeat_reset_s"],
                    "group_total_x": out["off"]["group_total_s"] / out["on"]["group_total_s"],
                    "identical_output": float(seen["off"] == seen["on"]), "hits": hits, "misses": misses}
    return out


def scaling(games: list[str], workers: int, steps: int, fast: bool) -> float:
    """Steps per second of ``workers`` copies in ``AsyncVectorEnv`` (one process each), random admissible play."""
    fns = [lambda: gym.make("abc/ALFWorld-v0", game_files=games, fast_parse=fast) for _ in range(workers)]
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
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--passes", type=int, default=2, help="times each game is played per contestant")
    p.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    p.add_argument("--group", type=int, default=8, help="env copies resetting one game (a training group)")
    p.add_argument("--reset-only", action="store_true", help="only the group resets (no step latency, no scaling)")
    p.add_argument("--cache", default=None, help="game folder (default: a temporary one)")
    args = p.parse_args()
    root = args.cache or tempfile.mkdtemp(prefix="abc-alfworld-bench-")
    t = time.perf_counter()
    games = _games(root, args.games)
    print(f"generated+checked {len(games)} games in {time.perf_counter() - t:.1f} s "
          f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    res = group_resets(games, args.group)
    print(f"group resets (G={args.group}, translation cache off/on, text speedups on)")
    for key, row in res.items():
        print("reset", key, json.dumps({k: round(v, 4) for k, v in row.items()}))
    if args.reset_only:
        print(f"load at the end {os.getloadavg()[0]:.1f}")
        return
    res = latency(games, args.steps, args.passes)
    for key, row in res.items():
        print(key, json.dumps({k: round(v, 3) for k, v in row.items()}))
    print("caches", json.dumps(fastparse.cache_info()))
    for fast in (False, True):
        base = None
        for w in args.workers:
            rate = scaling(games, w, args.steps, fast)
            base = base or rate / w
            print(f"speedup {'on ' if fast else 'off'} workers={w}: {rate:.2f} steps/s ({rate / base:.2f}x one worker)")
    print(f"load at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
