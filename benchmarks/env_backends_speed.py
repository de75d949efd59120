"""Env steps per second and per-step latency of the three env backends side by side (process, remote, ray).

For each family and each number of concurrent envs, a pool of that many slots plays the family's expert (the same
work on every backend): every round steps all slots in one call, finished episodes are reset with fresh seeds.
``process`` uses ``--workers`` worker processes; ``remote`` one ``abc serve`` server on 127.0.0.1 (one env process
per session); ``ray`` a local Ray cluster with ``--workers`` actors. Memory is the summed proportional set size
(PSS: shared pages counted once) of the processes that hold the envs (worker processes; the server, its fork server
and session processes; the actors).

    python benchmarks/env_backends_speed.py --families sokoban alfworld webshop --envs 8 32 128 --seconds 8
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any


def _pss_mb(pids: list[int]) -> float:
    """Proportional set size: pages shared by several processes (fork copy-on-write) counted once in all."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                total += next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
        except (OSError, StopIteration):
            continue
    return total / 1024


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            pass
    return out


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):  # Linux: the server gets SIGTERM when this script dies
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def start_server(family: str, max_sessions: int) -> tuple[subprocess.Popen[str], str]:
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (lives as long as the server)
    proc = subprocess.Popen([sys.executable, "-m", "agentbench_crbc", "serve", "--env", family, "--port", "0",
                             "--max-sessions", str(max_sessions), "--idle-timeout", "600"],
                            stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True,
                            preexec_fn=_die_with_parent)
    line = proc.stdout.readline()  # type: ignore[union-attr]
    m = re.search(r"(ws://\S+/ws)", line)
    if m is None:
        raise SystemExit(f"abc serve --env {family} did not start: {line!r}")
    return proc, m.group(1)


def play(pool: Any, n: int, seconds: float, seed0: int) -> dict[str, float]:
    """Rounds of the expert on every slot for ``seconds``; returns throughput and latency."""
    next_seed = seed0
    seeds = {s: seed0 + s for s in range(n)}
    next_seed += n
    t0 = time.perf_counter()
    res = pool.reset(seeds)
    reset_s = time.perf_counter() - t0
    state = {s: r for s, r in res.items() if r.error is None}
    kinds: dict[str, int] = {}

    def lost(r: Any) -> None:
        line = r.error.strip().splitlines()[-1][:120] if r.error.strip() else "error"
        kinds[line] = kinds.get(line, 0) + 1

    for r in res.values():
        if r.error is not None:
            lost(r)
    steps, rounds, step_s, resets = 0, 0, 0.0, n
    end = time.perf_counter() + seconds
    while time.perf_counter() < end and state:
        actions = {s: (r.info.get("expert_action") or (r.info.get("admissible_actions") or ["look"])[0])
                   for s, r in state.items()}
        t = time.perf_counter()
        out = pool.step(actions)
        step_s += time.perf_counter() - t
        steps += len(actions)
        rounds += 1
        done = []
        for s, r in out.items():
            if r.error is not None:
                lost(r)
                done.append(s)
            elif r.terminated or r.truncated:
                done.append(s)
            else:
                state[s] = r
        if done:
            again = pool.reset({s: next_seed + i for i, s in enumerate(done)})
            next_seed += len(done)
            resets += len(done)
            for s, r in again.items():
                if r.error is None:
                    state[s] = r
                else:
                    lost(r)
                    state.pop(s, None)
    return {"steps_per_s": steps / step_s if step_s else 0.0, "ms_per_call": 1e3 * step_s / max(rounds, 1),
            "ms_per_env_step": 1e3 * step_s / max(steps, 1), "reset_ms_per_env": 1e3 * reset_s / n,
            "steps": steps, "resets": resets, "errors": sum(kinds.values()), "error_kinds": kinds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", nargs="+", default=["sokoban", "alfworld", "webshop"])
    ap.add_argument("--envs", nargs="+", type=int, default=[8, 32, 128])
    ap.add_argument("--backends", nargs="+", default=["process", "remote", "ray"])
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="worker processes / Ray actors")
    ap.add_argument("--seconds", type=float, default=8.0, help="stepping time per cell")
    ap.add_argument("--max-mem-gb", type=float, default=12.0, help="skip a cell whose envs would need more")
    ap.add_argument("--step-timeout", type=float, default=1800.0,
                    help="seconds one pool call may take (a process worker resets its slots one after another)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")

    from agentbench_crbc.family import resolve_env
    from agentbench_crbc.rollout.hosting.workers import EnvBackend, EnvRecipe

    rows = []
    if "ray" in args.backends:
        from agentbench_crbc.rollout.hosting.ray_pool import ray_init

        ray_init()
    for family in args.families:
        env_id = resolve_env(family).env_id
        server = url = None
        if "remote" in args.backends:
            server, url = start_server(family, max(args.envs))
        per_env_mb: dict[str, float] = {}
        try:
            for n in args.envs:
                for kind in args.backends:
                    guess = per_env_mb.get(kind, 0.0) * n / 1024
                    if guess > args.max_mem_gb:
                        rows.append({"family": family, "envs": n, "backend": kind,
                                     "skipped": f"~{guess:.0f} GB of env processes > --max-mem-gb"})
                        print(json.dumps(rows[-1]), flush=True)
                        continue
                    backend = EnvBackend(kind, urls=(url,) if url else (), workers=args.workers)
                    pool = backend.pool(EnvRecipe(env_id), n, num_workers=args.workers, with_expert=True,
                                        step_timeout=args.step_timeout)
                    try:
                        row = {"family": family, "envs": n, "backend": kind,
                               **play(pool, n, args.seconds, 10_000 * n)}
                        if kind == "process":
                            pids = [p for p in pool.worker_pids() if p]
                        elif kind == "remote":
                            pids = _tree(server.pid)  # type: ignore[union-attr]
                        else:
                            pids = [p for p in pool.actor_pids() if p]
                        row["mem_mb"] = round(_pss_mb(pids))
                        per_env_mb[kind] = row["mem_mb"] / n
                    finally:
                        pool.close()
                    rows.append(row)
                    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}),
                          flush=True)
        finally:
            if server is not None:
                os.killpg(server.pid, signal.SIGTERM)
                server.wait(timeout=30)
    if "ray" in args.backends:
        import ray

        ray.shutdown()
    print("\n| family | envs | backend | steps/s | ms per step call | ms per env step | reset ms/env | memory MB |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['family']} | {r['envs']} | {r['backend']} | skipped: {r['skipped']} | | | | |")
            continue
        print(f"| {r['family']} | {r['envs']} | {r['backend']} | {r['steps_per_s']:.0f} | {r['ms_per_call']:.1f} | "
              f"{r['ms_per_env_step']:.2f} | {r['reset_ms_per_env']:.1f} | {r['mem_mb']} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
