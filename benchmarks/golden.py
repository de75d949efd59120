"""The golden run: a 2-update run of the default (`abc train --credit crbc`) in deterministic mode, its weights and
result line pinned in ``benchmarks/results/golden.json``; ``check`` reruns it and says whether this machine agrees.

    python benchmarks/golden.py make     # (re)write the file, with the CPU and kernels it was made on
    python benchmarks/golden.py check    # prints `match` (exit 0) or `differs: ...` with the first differing tensor

The run is small (2 updates, 8 held-out levels, one sampled episode each, no greedy or reference pass), one torch
thread, kernels pinned to AVX2 (``--set deterministic=true``: ATen, MKL and oneDNN). The result line is every
update's metrics but the timings, and the held-out success before and after RL; the weights are compared tensor by
tensor (sha256 of each tensor's bytes, in the order of ``model/model.safetensors``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parent / "results" / "golden.json"
#: The run's overrides of the default (the CPU demo with CRBC).
SETS = ("updates=2", "deterministic=true", "threads=1", "eval.episodes=8", "eval.samples=1", "eval.greedy=false",
        "eval.train_temperature=false", "eval.references=false", "progress=false", "tensorboard=false",
        "checkpoint_every=1000")


def _command(out_dir: Path) -> list[str]:
    sets = [a for s in (*SETS, f"out_dir={out_dir}") for a in ("--set", s)]
    return [sys.executable, "-m", "agentbench_crbc", "train", "--credit", "crbc", *sets]


def tensor_hashes(weights: Path) -> dict[str, str]:
    """``{tensor name: sha256 of its bytes}`` in the file's order (safetensors' numpy reader: no torch needed)."""
    from safetensors import safe_open

    out: dict[str, str] = {}
    with safe_open(str(weights), framework="numpy") as fh:
        for name in fh.keys():  # noqa: SIM118 (safe_open is no mapping)
            arr = fh.get_tensor(name)
            out[name] = hashlib.sha256(arr.tobytes() + str((arr.dtype, arr.shape)).encode()).hexdigest()
    return out


def result_line(run: Path) -> dict[str, Any]:
    """Every update's metrics without the timings, and held-out success before and after RL per mode."""
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if ln]
    updates = [{k: v for k, v in r.items() if not k.startswith("time")} for r in rows if r.get("stage") == "rl"]
    res = json.loads((run / "results.json").read_text(encoding="utf-8"))
    return {"updates": updates, "modes": {m: {"before": r["before"], "after": r["after"]}
                                          for m, r in res["modes"].items()}}


def run_golden(work: Path) -> dict[str, Any]:
    """Run the golden run under ``work``; its kernels, weights' hashes and result line."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    log = work / "log.txt"
    with log.open("w", encoding="utf-8") as fh:
        rc = subprocess.run(_command(work / "runs"), stdout=fh, stderr=subprocess.STDOUT, env=env,
                            cwd=work).returncode
    runs = sorted((work / "runs").glob("*/results.json"))
    if rc != 0 or not runs:
        tail = log.read_text(encoding="utf-8").splitlines()[-5:]
        sys.exit(f"golden: the run failed (exit {rc}): {' | '.join(tail)}")
    run = runs[-1].parent
    kernels = json.loads((run / "kernels.json").read_text(encoding="utf-8"))
    tensors = tensor_hashes(run / "model" / "model.safetensors")
    whole = hashlib.sha256("".join(f"{k}:{v}\n" for k, v in tensors.items()).encode()).hexdigest()
    return {"kernels": kernels, "weights_sha256": whole, "tensors": tensors, "result": result_line(run)}


def first_difference(golden: dict[str, Any], now: dict[str, Any]) -> str | None:
    """``None`` when ``now`` is ``golden``'s run bit for bit, else one line: the first differing tensor (the file's
    order), else the first differing field of the result line."""
    a, b = golden["tensors"], now["tensors"]
    for name in list(a) + [n for n in b if n not in a]:
        if a.get(name) != b.get(name):
            return f"tensor {name}" + ("" if name in a and name in b else " (present in one run only)")
    ga, gb = golden["result"], now["result"]
    for i, (ua, ub) in enumerate(zip(ga["updates"], gb["updates"], strict=False)):
        for key in sorted(ua.keys() | ub.keys()):
            if ua.get(key) != ub.get(key):
                return f"update {i + 1} metric {key}: {ua.get(key)} != {ub.get(key)}"
    if len(ga["updates"]) != len(gb["updates"]) or ga["modes"] != gb["modes"]:
        return f"held-out success: {ga['modes']} != {gb['modes']}"
    return None


def make(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="abc-golden-") as tmp:
        got = run_golden(Path(tmp))
    made_on = {"cpu": got["kernels"]["cpu"], "isa": got["kernels"]["isa"], "torch": got["kernels"]["torch"],
               "mkl": got["kernels"]["mkl"]}
    doc = {"command": "abc train --credit crbc " + " ".join(f"--set {s}" for s in SETS), "made_on": made_on, **got}
    path = Path(args.file)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path}: weights sha256 {got['weights_sha256'][:16]}, made on {made_on['cpu']} ({made_on['isa']} "
          f"kernels, torch {made_on['torch']}, MKL {made_on['mkl']})")
    return 0


def check(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        sys.exit(f"golden: no {path}; make it with `python benchmarks/golden.py make`")
    golden = json.loads(path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="abc-golden-") as tmp:
        now = run_golden(Path(tmp))
    diff = first_difference(golden, now)
    here = now["kernels"]
    where = (f"(made on {golden['made_on']['cpu']}, {golden['made_on']['isa']}, torch {golden['made_on']['torch']}, "
             f"MKL {golden['made_on']['mkl']}; here {here['cpu']}, {here['isa']}, torch {here['torch']}, MKL "
             f"{here['mkl']})")
    if diff is None:
        print(f"match {where}")
        return 0
    print(f"differs: {diff} {where}")
    return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("make", "check"))
    p.add_argument("--file", default=str(GOLDEN), help="the golden file (default benchmarks/results/golden.json)")
    args = p.parse_args(argv)
    return make(args) if args.what == "make" else check(args)


if __name__ == "__main__":
    sys.exit(main())
