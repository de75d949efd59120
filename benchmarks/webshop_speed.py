"""WebShop speed and memory: text mode (in process) and browser mode (headless Chromium), one run.

Measured, for ``abc/WebShop-v0`` with the default 1,000-product generated catalogue:

* start-up: catalogue + goals, the shared BM25 index and the app (once per process);
* step latency (median, p90) over oracle episodes and uniformly random admissible-action episodes, per mode;
  resets are timed separately;
* memory: bytes per extra text env (tracemalloc over ``--envs`` live envs, each reset), the process RSS, and in
  browser mode the memory of Chromium and its driver (USS and RSS summed over their processes, psutil);
* optionally a PNG of an item page from the real browser (``--screenshot docs/img/webshop_item.png``).

The original WebShop (pyserini + Java 21 + spaCy + Google-Drive data) cannot run offline, so no peer runs here;
verl-agent starts one WebShop server, product table and Lucene JVM per env (see docs/webshop.md).

Usage::

    python benchmarks/webshop_speed.py [--episodes 200] [--browser-episodes 8] [--envs 100] [--markdown]
                                       [--screenshot docs/img/webshop_item.png] [--no-browser]

Targets (issue 6): text-mode step median <= 2 ms; browser step median <= 300 ms; small memory per text env.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _rss_mb(pid: int | None = None) -> float:
    import psutil

    return psutil.Process(pid or os.getpid()).memory_info().rss / 2**20


def _episodes(env: Any, n: int, policy_name: str, first_seed: int = 0) -> dict[str, list[float]]:
    from agentbench_crbc.envs.webshop import oracle_policy, random_policy

    steps: list[float] = []
    resets: list[float] = []
    scores: list[float] = []
    for seed in range(first_seed, first_seed + n):
        policy = oracle_policy(env) if policy_name == "oracle" else random_policy(env, seed=seed)
        t = time.perf_counter()
        obs, info = env.reset(seed=seed)
        resets.append(time.perf_counter() - t)
        for _ in range(15):
            action = policy(obs, info)
            t = time.perf_counter()
            obs, _, terminated, truncated, info = env.step(action)
            steps.append(time.perf_counter() - t)
            if terminated or truncated:
                break
        scores.append(info["score"])
    return {"steps": steps, "resets": resets, "scores": scores}


def _summary(run: dict[str, list[float]]) -> dict[str, float]:
    steps = sorted(run["steps"])
    return {
        "n_steps": len(steps),
        "step_median_ms": 1e3 * statistics.median(steps),
        "step_p90_ms": 1e3 * steps[int(0.9 * (len(steps) - 1))],
        "reset_median_ms": 1e3 * statistics.median(run["resets"]),
        "mean_score": statistics.mean(run["scores"]),
        "success": sum(s == 1.0 for s in run["scores"]) / len(run["scores"]),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import gymnasium as gym

    import agentbench_crbc.envs  # noqa: F401
    from agentbench_crbc.envs.webshop.catalogue import get_catalogue
    from agentbench_crbc.envs.webshop.env import get_shop

    out: dict[str, Any] = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    rss0 = _rss_mb()
    t = time.perf_counter()
    catalogue = get_catalogue()
    out["catalogue_s"] = time.perf_counter() - t
    t = time.perf_counter()
    get_shop(catalogue)
    out["index_and_app_s"] = time.perf_counter() - t
    out["n_products"], out["n_goals"] = len(catalogue.products), len(catalogue.goals)

    env = gym.make("abc/WebShop-v0")
    _episodes(env, 20, "oracle", 10_000)  # warm-up: imports, template compilation
    out["text_oracle"] = _summary(_episodes(env, args.episodes, "oracle"))
    out["text_random"] = _summary(_episodes(env, args.episodes, "random"))
    out["process_rss_mb_one_text_env"] = _rss_mb()
    out["rss_shared_state_mb"] = _rss_mb() - rss0

    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    envs = [gym.make("abc/WebShop-v0") for _ in range(args.envs)]
    for i, e in enumerate(envs):
        e.reset(seed=i)
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename"))
    tracemalloc.stop()
    out["text_env_kb_each"] = grown / len(envs) / 1024
    out["process_rss_mb_after_envs"] = _rss_mb()
    for e in envs:
        e.close()

    if args.no_browser:
        return out
    from agentbench_crbc.envs.webshop.browser import browser_available

    reason = browser_available()
    if reason is not None:
        out["browser"] = f"skipped: {reason}"
        return out
    import psutil

    benv = gym.make("abc/WebShop-v0", mode="browser")
    t = time.perf_counter()
    benv.reset(seed=0)
    out["browser_start_s"] = time.perf_counter() - t
    _episodes(benv, 2, "oracle", 10_000)
    out["browser_oracle"] = _summary(_episodes(benv, args.browser_episodes, "oracle"))
    out["browser_random"] = _summary(_episodes(benv, args.browser_episodes, "random"))
    driver_pid = benv.unwrapped._browser.driver.service.process.pid
    procs = [psutil.Process(driver_pid), *psutil.Process(driver_pid).children(recursive=True)]
    out["chromium_rss_mb"] = sum(p.memory_info().rss for p in procs) / 2**20  # counts shared pages per process
    out["chromium_uss_mb"] = sum(p.memory_full_info().uss for p in procs) / 2**20  # memory only Chromium holds
    if args.screenshot:  # the oracle's item page with its options chosen, just before Buy Now
        from agentbench_crbc.envs.webshop import oracle_policy

        policy = oracle_policy(benv)
        obs, info = benv.reset(seed=3)
        while (action := policy(obs, info)) != "click[buy now]":
            obs, _, _, _, info = benv.step(action)
        benv.unwrapped._browser.screenshot(args.screenshot)
        out["screenshot"] = str(args.screenshot)
    benv.close()
    return out


def markdown(r: dict[str, Any]) -> str:
    rows = ["| mode / policy | steps | step median | step p90 | reset median | mean score | success |",
            "|---|---:|---:|---:|---:|---:|---:|"]
    for key in ("text_oracle", "text_random", "browser_oracle", "browser_random"):
        s = r.get(key)
        if isinstance(s, dict):
            rows.append(f"| {key.replace('_', ' / ')} | {s['n_steps']} | {s['step_median_ms']:.2f} ms | "
                        f"{s['step_p90_ms']:.2f} ms | {s['reset_median_ms']:.2f} ms | {s['mean_score']:.3f} | "
                        f"{s['success']:.0%} |")
    rows += ["", f"- start-up: catalogue + goals {r['catalogue_s']:.2f} s ({r['n_products']} products, "
                 f"{r['n_goals']} goals), shared BM25 index + app {r['index_and_app_s']:.2f} s",
             f"- memory: {r['text_env_kb_each']:.1f} KB per extra text env ({r.get('envs', '?')} envs); process "
             f"RSS {r['process_rss_mb_after_envs']:.0f} MB with them"]
    if "chromium_rss_mb" in r:
        rows.append(f"- browser: first reset (Chromium start) {r['browser_start_s']:.2f} s; Chromium + driver "
                    f"{r['chromium_uss_mb']:.0f} MB unique memory ({r['chromium_rss_mb']:.0f} MB summed RSS) "
                    "per browser env")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--episodes", type=int, default=200, help="text-mode episodes per policy")
    p.add_argument("--browser-episodes", type=int, default=8, help="browser-mode episodes per policy")
    p.add_argument("--envs", type=int, default=100, help="live text envs for the memory measurement")
    p.add_argument("--no-browser", action="store_true", help="skip browser mode")
    p.add_argument("--screenshot", type=Path, default=None, help="save an item-page PNG from Chromium here")
    p.add_argument("--markdown", action="store_true", help="print a markdown table instead of JSON")
    args = p.parse_args(argv)
    result = measure(args)
    result["envs"] = args.envs
    print(markdown(result) if args.markdown else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
