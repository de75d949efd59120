"""Which part of the PPO update loses CRBC's credit advantage: `abc train` cells x seeds, paired by (seed, level).

Each cell is a credit method plus `--set` overrides of the CPU demo (the default's budget: 60 updates, 128 held-out
levels x 4 episodes at T = 0.4). Runs go two at a time, one torch thread each (budgets in updates, so a loaded
machine gives the same numbers later); each finished run appends one line to ``OUT/results.jsonl`` and a rerun
skips the (cell, seed) pairs already there. ``summary`` prints, per cell, the gain of RL and the difference to a
reference cell, both paired by (seed, level) with a two-stage bootstrap (seeds, then levels within a seed).

    python benchmarks/update_ablation.py run --cell crbc --cell grpo --seed 0 --seed 1 --seed 2
    python benchmarks/update_ablation.py summary --reference grpo
    python benchmarks/update_ablation.py pairs --pair crbc-noguard-lr3e-4:grpo-noguard-lr3e-4
    python benchmarks/update_ablation.py seeds --cell crbc-noguard-sigma1

Only the T = 0.4 validation runs (`eval.greedy`, `eval.train_temperature` and `eval.references` off: they do not
change training, only the run's time); ``--abc`` picks the `abc` executable, and ``--at REV`` runs every cell on the
code of one commit (a clean ``git worktree`` of it under ``OUT/code-SHA``, imported ahead of any installed copy), so
a grid that outlives a day of commits still has one revision in its records:

    python benchmarks/update_ablation.py run --at HEAD --cell crbc --cell grpo --seed 0 --seed 1 --out runs/grid
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

#: cell name -> (credit method, --set overrides)
CELLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "crbc": ("crbc", ()),
    "grpo": ("grpo", ()),
    "gigpo": ("gigpo", ()),
    "graphgpo": ("graphgpo", ()),
    "g2po": ("g2po", ()),
    "crbc-wstep1": ("crbc", ("credit.options.w_step=1.0",)),
    "crbc-step-only": ("crbc", ("credit.options.w_traj=0.0",)),
    "crbc-noguard-lr3e-4": ("crbc", ("optim.target_kl=0", "optim.lr=3e-4")),
    "grpo-noguard-lr3e-4": ("grpo", ("optim.target_kl=0", "optim.lr=3e-4")),
    "crbc-advnorm-none": ("crbc", ("optim.adv_norm=none",)),
    "crbc-epochs1": ("crbc", ("optim.ppo_epochs=1",)),
    "grpo-epochs1": ("grpo", ("optim.ppo_epochs=1",)),
    "crbc-ent0.01": ("crbc", ("optim.entropy_coef=0.01",)),
    "grpo-ent0.01": ("grpo", ("optim.entropy_coef=0.01",)),
    "crbc-stepmean": ("crbc", ("optim.loss_agg=step-mean",)),
    # the step credit in value units (Eq. 13's per-anchor scale off: sigma <= 1 for success probabilities)
    "crbc-sigma1": ("crbc", ("credit.options.sigma_min=1.0",)),
    "crbc-sigma1-wstep1": ("crbc", ("credit.options.sigma_min=1.0", "credit.options.w_step=1.0")),
    # the guard-off setting (lr 3e-4) with CRBC's step part in value units, or weighed like the trajectory part
    "crbc-noguard-sigma1": ("crbc", ("optim.target_kl=0", "optim.lr=3e-4", "credit.options.sigma_min=1.0")),
    "crbc-noguard-wstep1": ("crbc", ("optim.target_kl=0", "optim.lr=3e-4", "credit.options.w_step=1.0")),
}

#: The regime probe's cells (docs/benchmarks.md, "The regime probe"): the default with one or more of the paper's
#: Sokoban ingredients, named ``METHOD@CELL`` so every method runs the same cell.
PROBE: dict[str, tuple[str, ...]] = {
    # the paper's 15-step limit with plan lengths 2-6 (the default: 8 steps, plan lengths 1-4)
    "long": ("env.kwargs.min_moves=2", "env.kwargs.max_moves=6", "env.max_steps=15"),
    # ... and longer plans still (2-8 moves)
    "long8": ("env.kwargs.min_moves=2", "env.kwargs.max_moves=8", "env.max_steps=15"),
    # ... and the paper's 32 groups an update
    "long-g32": ("env.kwargs.min_moves=2", "env.kwargs.max_moves=6", "env.max_steps=15", "rollout.groups=32"),
    # the paper's 15-step limit on plan lengths 2-4: the updates spent where `long` had levels with signal
    "mid": ("env.kwargs.min_moves=2", "env.kwargs.max_moves=4", "env.max_steps=15"),
    # `long` with the paper's 150 updates
    "long-u150": ("env.kwargs.min_moves=2", "env.kwargs.max_moves=6", "env.max_steps=15", "updates=150"),
}
CELLS.update({f"{m}@{c}": (m, sets) for c, sets in PROBE.items()
              for m in ("grpo", "gigpo", "graphgpo", "g2po", "crbc")})

EVAL_SETS = ("eval.greedy=false", "eval.train_temperature=false", "eval.references=false", "progress=false")


def _levels(path: Path, mode: str = "t0.4") -> dict[str, float]:
    """Per held-out level (its seed), the mean success of its episodes in one validation file."""
    eps = json.loads(path.read_text(encoding="utf-8"))[mode]["episodes"]
    by: dict[str, list[float]] = {}
    for e in eps:
        by.setdefault(str(e["seed"]), []).append(float(e["success"]))
    return {k: sum(v) / len(v) for k, v in by.items()}


def _one(abc: list[str], cwd: Path | None, out: Path, cell: str, seed: int, extra: list[str]) -> dict[str, Any]:
    method, sets = CELLS[cell]
    folder = out.resolve() / cell
    name = f"{cell}-s{seed}"
    cmd = [*abc, "train", "--credit", method, "--set", f"seed={seed}", "--set", f"out_dir={folder}",
           "--set", f"exp_name={name}", *(a for s in (*sets, *EVAL_SETS, *extra) for a in ("--set", s))]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.time()
    log = out / "logs" / f"{name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        # the run's own CPU seconds (user + system): with one thread, about its wall time on an idle core
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = rc = os.waitstatus_to_exitcode(status)
    wall = time.time() - t0
    row = _row(cell, method, list(sets) + extra, seed, rc, wall, log)
    row["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 1)
    row["revision"] = _run_revision(row.get("run")) or _revision(cwd)
    return row


def frozen_code(rev: str, out: Path, repo: Path | None = None) -> Path:
    """A clean detached ``git worktree`` of commit ``rev`` at ``OUT/code-SHA`` (made once, reused by a rerun): the code
    every cell of ``--at REV`` imports. Exits naming the problem when ``rev`` is no commit of ``repo`` (this script's
    checkout by default) or the folder holds other or changed code."""
    repo = repo or Path(__file__).resolve().parent

    def git(*a: str, at: Path = repo) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(at), *a], capture_output=True, text=True)

    got = git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if got.returncode != 0:
        sys.exit(f"update_ablation: --at {rev}: not a commit of {repo}; give a commit, tag or branch it has")
    sha = got.stdout.strip()
    code = out.resolve() / f"code-{sha[:12]}"
    if not code.exists():
        made = git("worktree", "add", "--detach", str(code), sha)
        if made.returncode != 0:
            sys.exit(f"update_ablation: --at {rev}: git worktree add {code} failed: {made.stderr.strip()}")
    head = git("rev-parse", "HEAD", at=code).stdout.strip()
    changed = git("status", "--porcelain", "--untracked-files=no", at=code).stdout.strip()
    if head != sha or changed or git("rev-parse", "--show-toplevel", at=code).stdout.strip() != str(code):
        sys.exit(f"update_ablation: --at {rev}: {code} is not a clean worktree of {sha[:12]}; move it away and rerun")
    return code


#: What a ``--at`` cell runs (``python -c BOOT train ...`` in the frozen worktree): the working folder is first on
#: ``sys.path`` (so ``agentbench_crbc`` is the worktree's), and a finder put ahead of every other maps the
#: subpackages that live elsewhere in the tree (pyproject's ``package-dir``: ``plugins/``, ``envs/``) to the
#: worktree's folders; an editable install's own finder would otherwise map them to its checkout's.
BOOT = """\
import importlib.machinery, importlib.util, os, runpy, sys, tomllib
with open('pyproject.toml', 'rb') as fh:
    dirs = tomllib.load(fh).get('tool', {}).get('setuptools', {}).get('package-dir', {})
dirs = {k: os.path.abspath(v) for k, v in dirs.items() if '.' in k and os.path.isdir(v)}
class FrozenTree:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in dirs:
            return None
        init = os.path.join(dirs[name], '__init__.py')
        if os.path.isfile(init):
            return importlib.util.spec_from_file_location(name, init, submodule_search_locations=[dirs[name]])
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [dirs[name]]
        return spec
sys.meta_path.insert(0, FrozenTree)
sys.argv[0] = 'abc'
runpy.run_module('agentbench_crbc', run_name='__main__', alter_sys=True)
"""


def _runner(args: argparse.Namespace, out: Path) -> tuple[list[str], Path | None]:
    """The command that starts `abc` and the folder it runs in: ``--abc`` as given, or with ``--at`` this Python on
    the frozen worktree (:data:`BOOT`: the worktree's ``agentbench_crbc`` and its ``plugins/`` and ``envs/``, ahead
    of any installed package)."""
    if args.at is None:
        return [args.abc], None
    return [sys.executable, "-c", BOOT], frozen_code(args.at, out)


def _run_revision(run: str | None) -> str | None:
    """The revision the run's trainer read when it started (its leaderboard records say it): the checkout may have
    changed while the run went on, so the script's own reading at the end can name a later tree."""
    path = Path(run) / "eval" / "records.jsonl" if run else None
    if path is None or not path.is_file():
        return None
    first = next((ln for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()), None)
    return json.loads(first).get("revision") if first else None


def _revision(code: Path | None = None) -> str:
    """The commit of the code the run started on (``--at``'s worktree, else the checkout this script runs from;
    ``+dirty`` with uncommitted changes), for a run that wrote no records."""
    here = code or Path(__file__).resolve().parent
    try:
        rev = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def _row(cell: str, method: str, sets: list[str], seed: int, rc: int, wall: float, log: Path) -> dict[str, Any]:
    """One result line from a finished run's log (it names the run folder) and the folder's files."""
    row: dict[str, Any] = {"cell": cell, "method": method, "sets": sets, "seed": seed, "rc": rc,
                           "wall_s": round(wall, 1)}
    found = [ln.split(": ", 1)[1].strip() for ln in log.read_text(encoding="utf-8").split("\n")
             if ln.startswith("run folder: ")]
    if rc != 0 or not found:
        return row
    run = Path(found[-1])
    evals = sorted((run / "eval").glob("update-*.json"))
    if len(evals) < 2:
        return row
    metrics = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text(encoding="utf-8").split("\n") if ln]
    upd = [m for m in metrics if "time_update" in m]  # one line per update (eval lines have no time_update)
    row.update(run=str(run), before=_levels(evals[0]), after=_levels(evals[-1]),
               kl_stops=int(sum(m.get("kl_stop", 0.0) for m in upd)),
               # the guard logs the lr it lowered to; without it the run's resolved lr (the default's, when not set)
               final_lr=upd[-1].get("lr", json.loads((run / "config.json").read_text(encoding="utf-8"))["optim"]["lr"])
               if upd else None,
               entropy_first=upd[0].get("entropy") if upd else None,
               entropy_last=upd[-1].get("entropy") if upd else None,
               train_success=[round(float(m.get("success", 0.0)), 4) for m in upd],  # per update, for curves
               train_success_last10=(sum(m.get("success", 0.0) for m in upd[-10:]) / len(upd[-10:]))
               if upd else None,
               # k3 KL over the whole update under the weights it kept (approx_kl_end; older runs: the guard's
               # after its last kept step, else the mean over the passes before each step)
               approx_kl_max=max((m.get("approx_kl_end", m.get("approx_kl_after", m.get("approx_kl", 0.0)))
                                  for m in upd), default=None),
               approx_kl_end_max=max((m["approx_kl_end"] for m in upd if "approx_kl_end" in m), default=None),
               cpu=_cpu(),
               # torch and MKL versions, the kernel ISA, the threads and whether deterministic mode pinned them
               kernels=json.loads((run / "kernels.json").read_text(encoding="utf-8"))
               if (run / "kernels.json").is_file() else None,
               invalid_max=max((m.get("invalid", 0.0) for m in upd), default=None),
               # held-out success at every validation (eval.every > 0 gives a curve): [[update, success], ...]
               curve=[[int(e.stem.split("-")[1]), round(sum(v := list(_levels(e).values())) / len(v), 6)]
                      for e in evals],
               time_ppo=sum(m.get("time_ppo", 0.0) for m in upd),
               time_rollout=sum(m.get("time_rollout", 0.0) for m in upd))
    return row


def _cpu() -> str:
    """The CPU model and whether it has AVX-512 (numbers differ across CPUs: say which one ran)."""
    try:
        info = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        import platform

        return platform.processor() or platform.machine()
    name = next((ln.split(":", 1)[1].strip() for ln in info.splitlines() if ln.startswith("model name")), "?")
    return f"{name}, {'AVX-512' if ' avx512f' in info else 'no AVX-512'}"


def _flag(sets: list[str], key: str, default: str) -> str:
    """The value ``--set KEY=...`` gave in ``sets`` (the last one), else ``default``."""
    vals = [x.split("=", 1)[1] for x in sets if x.startswith(f"{key}=")]
    return vals[-1] if vals else default


def _done(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    if not path.exists():
        return {}
    rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()]
    return {(r["cell"], int(r["seed"])): r for r in rows if r.get("rc") == 0 and "after" in r}


def run(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = out / "results.jsonl"
    done = _done(res)
    unknown = [c for c in args.cell if c not in CELLS]
    if unknown:
        sys.exit(f"update_ablation: unknown cell(s) {', '.join(unknown)}; known: {', '.join(CELLS)}")
    todo = [(c, s) for s in args.seed for c in args.cell if (c, s) not in done]
    abc, cwd = _runner(args, out)
    print(f"{len(todo)} runs to go ({len(done)} done) in {out}" + (f", on the code of {cwd}" if cwd else ""),
          flush=True)

    def job(cs: tuple[str, int]) -> None:
        row = _one(abc, cwd, out, cs[0], cs[1], list(args.set))
        with res.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        gain = (sum(row["after"].values()) - sum(row["before"].values())) / len(row["after"]) if "after" in row \
            else None
        print(f"{cs[0]} seed {cs[1]}: rc {row['rc']}, {row['wall_s']} s, gain "
              f"{'-' if gain is None else f'{100 * gain:+.1f}'} points", flush=True)

    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(job, todo))


def summary(args: argparse.Namespace) -> None:
    from agentbench_crbc.bench.learning import paired_levels

    rows = _done(Path(args.out) / "results.jsonl")
    cells = sorted({c for c, _ in rows}, key=list(CELLS).index)
    print("| cell | seeds | before | after | gain of RL (95% CI) | minus "
          f"{args.reference} (95% CI) | guard stops | final lr | entropy first -> last | max approx_kl * |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for c in cells:
        rs = {s: r for (cc, s), r in rows.items() if cc == c}
        after = {s: r["after"] for s, r in rs.items()}
        before = {s: r["before"] for s, r in rs.items()}
        g = paired_levels(after, before)
        vs = "-"
        ref = {s: r["after"] for (cc, s), r in rows.items() if cc == args.reference and s in rs}
        if c != args.reference and ref:
            d = paired_levels({s: after[s] for s in ref}, ref)
            vs = f"{100 * d.mean:+.1f} ({100 * d.boot_ci[0]:+.1f} .. {100 * d.boot_ci[1]:+.1f}), {d.n_seeds} seeds"
        def mean(k: str, rs: dict[int, dict[str, Any]] = rs) -> float:
            return sum(r[k] or 0.0 for r in rs.values()) / len(rs)

        b = sum(sum(v.values()) / len(v) for v in before.values()) / len(before)
        a = sum(sum(v.values()) / len(v) for v in after.values()) / len(after)
        print(f"| {c} | {','.join(str(s) for s in sorted(rs))} | {100 * b:.1f}% | {100 * a:.1f}% | "
              f"{100 * g.mean:+.1f} ({100 * g.boot_ci[0]:+.1f} .. {100 * g.boot_ci[1]:+.1f}) | {vs} | "
              f"{mean('kl_stops'):.1f} | {mean('final_lr'):.2g} | {mean('entropy_first'):.2f} -> "
              f"{mean('entropy_last'):.2f} | {max(r['approx_kl_max'] or 0 for r in rs.values()):.3f} |")


def rescan(args: argparse.Namespace) -> None:
    """Rebuild result lines from the logs of finished runs (a line the run wrote without its numbers is replaced)."""
    out = Path(args.out)
    res = out / "results.jsonl"
    rows = [json.loads(ln) for ln in res.read_text(encoding="utf-8").split("\n") if ln.strip()] if res.exists() \
        else []
    kept = {(r["cell"], int(r["seed"])): r for r in rows}
    for (cell, seed), r in list(kept.items()):
        if r.get("rc") == 0 and ("after" not in r or args.all):
            kept[(cell, seed)] = _row(cell, r["method"], r["sets"], seed, 0, r["wall_s"],
                                      out / "logs" / f"{cell}-s{seed}.log")
    tmp = res.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in kept.values()), encoding="utf-8")
    tmp.replace(res)
    print(f"{sum('after' in r for r in kept.values())} of {len(kept)} runs have their numbers")


def pairs(args: argparse.Namespace) -> None:
    """Paired differences ``A - B`` (held-out success after RL) for each ``--pair A:B``, on the seeds both ran."""
    from agentbench_crbc.bench.learning import paired_levels

    rows = _done(Path(args.out) / "results.jsonl")
    print("| comparison | seeds | difference after RL, points (95% CI, paired by seed and level) | per seed |")
    print("|---|---|---|---|")
    for spec in args.pair:
        a, _, b = spec.partition(":")
        sa = {s: r["after"] for (c, s), r in rows.items() if c == a}
        sb = {s: r["after"] for (c, s), r in rows.items() if c == b}
        both = sorted(set(sa) & set(sb))
        if not both:
            print(f"| {a} - {b} | none | - | - |")
            continue
        d = paired_levels({s: sa[s] for s in both}, {s: sb[s] for s in both})
        per = ", ".join(f"{100 * (sum(sa[s].values()) / len(sa[s]) - sum(sb[s].values()) / len(sb[s])):+.1f}"
                        for s in both)
        print(f"| {a} - {b} | {','.join(map(str, both))} | {100 * d.mean:+.1f} ({100 * d.boot_ci[0]:+.1f} .. "
              f"{100 * d.boot_ci[1]:+.1f}) | {per} |")


def seeds(args: argparse.Namespace) -> None:
    """Per seed of one cell: held-out success before and after RL, the gain with its interval over levels, the
    largest move of an update, and the run's CPU seconds (one thread: about its wall time on an idle core)."""
    from agentbench_crbc.bench.learning import paired_levels

    rows = {s: r for (c, s), r in _done(Path(args.out) / "results.jsonl").items() if c == args.cell}
    print(f"| {args.cell}: seed | before | after | gain of RL, points (95% CI over levels) | largest approx_kl_end "
          "| CPU s | CPU |")
    print("|---|---|---|---|---|---|---|")
    for s in sorted(rows):
        r = rows[s]
        g = paired_levels({s: r["after"]}, {s: r["before"]})
        b, a = (sum(r[k].values()) / len(r[k]) for k in ("before", "after"))
        kl = r.get("approx_kl_end_max")
        print(f"| {s} | {100 * b:.1f}% | {100 * a:.1f}% | {100 * g.mean:+.1f} ({100 * g.boot_ci[0]:+.1f} .. "
              f"{100 * g.boot_ci[1]:+.1f}) | {'-' if kl is None else f'{kl:.3f}'} | "
              f"{r.get('cpu_s', '-')} | {r.get('cpu', '-')} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--cell", action="append", required=True, help=f"one of {', '.join(CELLS)} (repeatable)")
    r.add_argument("--seed", action="append", type=int, required=True)
    r.add_argument("--set", action="append", default=[], help="extra override for every run")
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--abc", default="abc")
    r.add_argument("--at", metavar="REV", help="run every cell on the code of this commit (a frozen git worktree)")
    r.add_argument("--out", default="runs/ablation")
    s = sub.add_parser("summary")
    s.add_argument("--out", default="runs/ablation")
    s.add_argument("--reference", default="grpo")
    rs = sub.add_parser("rescan")
    rs.add_argument("--out", default="runs/ablation")
    rs.add_argument("--all", action="store_true", help="recompute every line, not only those without numbers")
    q = sub.add_parser("pairs")
    q.add_argument("--out", default="runs/ablation")
    q.add_argument("--pair", action="append", required=True, help="A:B, two cells (repeatable)")
    t = sub.add_parser("seeds")
    t.add_argument("--out", default="runs/ablation")
    t.add_argument("--cell", required=True)
    args = p.parse_args()
    {"run": run, "summary": summary, "rescan": rescan, "pairs": pairs, "seeds": seeds}[args.cmd](args)


if __name__ == "__main__":
    main()
