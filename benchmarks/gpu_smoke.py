"""One prepared command for the lent GPU (one H200, no network, no vLLM, 10 minutes a command): the paths CPU tests
only stand in for, each stage a killed-on-time process group, logs and one JSON summary under ``$OUT``.

    python benchmarks/gpu_wheels.py                # here: the carried wheel folder .whl/ (< 64 MiB)
    python benchmarks/gpu_smoke.py --dry-run       # here, on a CPU: wheel folder, model configs, stage plan
    python benchmarks/gpu_smoke.py                 # there, after installing .whl/ (see gpu_wheels.py)

Stages (480 s in all; each runs ``gpu_smoke.py --worker NAME`` in its own process group, killed at its limit):

1. ``gpu-tests``: the tests marked ``gpu`` (``pytest -m gpu --run-gpu``);
2. ``rl-tiny``: two RL updates of ``abc train`` on the tiny model on CUDA in bf16 with KL;
3. ``fsdp1``: FSDP2 forced at world size 1 over NCCL: one PPO update, weights gathered one parameter at a time,
   saved and loaded back, compared exactly;
4. ``paper-probe``: random-init Qwen2.5-1.5B (the real config), one PPO mini-batch of 16 x (2048 + 512) tokens at
   the preset's micro-batch: peak allocated / reserved memory, seconds per micro-batch, ratio max / min;
5. ``vl-generate``: HF generation of 256 Sokoban prompts on a random-init Qwen2.5-VL-3B;
6. ``hf-tokens``: tokens per second of HF text generation on the random-init 1.5B.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

#: (name, seconds): the stage plan, 480 s in total (8 of the 10 minutes a command may run)
STAGES: tuple[tuple[str, int], ...] = (("gpu-tests", 90), ("rl-tiny", 60), ("fsdp1", 60), ("paper-probe", 120),
                                       ("vl-generate", 90), ("hf-tokens", 60))
TOTAL_LIMIT_S = 480


# -- models: random init from the real configs ------------------------------------------------------------------------
def text_config(name: str = "Qwen/Qwen2.5-1.5B-Instruct") -> Any:
    """A transformers ``Qwen2Config`` with the architecture of ``name`` (typed in: nothing downloaded)."""
    from transformers import Qwen2Config

    from agentbench_crbc.trainer.memory import ARCHITECTURES

    a = ARCHITECTURES[name]
    return Qwen2Config(hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                       num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                       tie_word_embeddings=a.tied, max_position_embeddings=32768, rope_theta=1000000.0,
                       rms_norm_eps=1e-6)


def vl_config(tok: Any = None) -> Any:
    """``Qwen2_5_VLConfig`` of Qwen2.5-VL-3B-Instruct (vision token ids from ``tok`` when given)."""
    from transformers import Qwen2_5_VLConfig

    from agentbench_crbc.trainer.memory import ARCHITECTURES

    a = ARCHITECTURES["Qwen/Qwen2.5-VL-3B-Instruct"]
    ids = {"image_token_id": 151655, "vision_start_token_id": 151652, "vision_end_token_id": 151653}
    if tok is not None:
        ids = {k: tok.convert_tokens_to_ids(t) for k, t in (("image_token_id", "<|image_pad|>"),
                                                             ("vision_start_token_id", "<|vision_start|>"),
                                                             ("vision_end_token_id", "<|vision_end|>"))}
    text = dict(vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate,
                num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
                max_position_embeddings=128000, tie_word_embeddings=True, rope_theta=1000000.0,
                rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]})
    vision = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=a.hidden,
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                  fullatt_block_indexes=[7, 15, 23, 31])
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True, **ids)


def check_configs() -> list[str]:
    """The typed-in configs build models (on ``meta``: no memory) with exactly the memory model's parameter counts."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen2ForCausalLM

    from agentbench_crbc.trainer.memory import ARCHITECTURES

    problems = []
    with torch.device("meta"):
        for name, cfg, cls in (("Qwen/Qwen2.5-1.5B-Instruct", text_config(), Qwen2ForCausalLM),
                               ("Qwen/Qwen2.5-VL-3B-Instruct", vl_config(), Qwen2_5_VLForConditionalGeneration)):
            n = sum(p.numel() for p in cls(cfg).parameters())
            if n != ARCHITECTURES[name].params:
                problems.append(f"{name}: the config builds {n:,} parameters, the memory model counts "
                                f"{ARCHITECTURES[name].params:,}")
    return problems


# -- workers (one per stage, run in their own process) ----------------------------------------------------------------
def _cuda() -> Any:
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    torch.cuda.reset_peak_memory_stats()
    return torch


def _memory(torch: Any) -> dict[str, float]:
    return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}


def w_gpu_tests(out: Path) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "gpu", "--run-gpu", "-p", "no:cacheprovider",
                        "tests"], cwd=ROOT, capture_output=True, text=True)
    (out / "gpu-tests.pytest.txt").write_text(r.stdout + r.stderr)
    if r.returncode not in (0, 5):
        raise RuntimeError(f"pytest -m gpu exited {r.returncode}: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    return {"pytest_rc": r.returncode, "last_line": (r.stdout.strip().splitlines() or [""])[-1]}


#: ``abc train --set`` values of the rl-tiny stage (checked by the dry run)
RL_TINY_SETS = ("updates=2", "sft.steps=0", "device=cuda", "model.dtype=bf16", "optim.kl_coef=0.05",
                "rollout.groups=2", "eval.episodes=2", "progress=false")


def w_rl_tiny(out: Path) -> dict[str, Any]:
    run = out / "rl-tiny-runs"
    sets = [*RL_TINY_SETS, f"out_dir={run}"]
    cmd = [sys.executable, "-m", "agentbench_crbc", "train", *[a for s in sets for a in ("--set", s)]]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    (out / "rl-tiny.train.txt").write_text(r.stdout + r.stderr)
    if r.returncode:
        raise RuntimeError(f"abc train exited {r.returncode}")
    (folder,) = list(run.iterdir())
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    rl = [x for x in rows if x.get("stage") == "rl"]
    return {"updates": len(rl), "kl": [x.get("kl") for x in rl], "ratio_max": [x.get("ratio_max") for x in rl]}


def w_fsdp1(out: Path) -> dict[str, Any]:
    torch = _cuda()
    import numpy as np
    from torch.distributed.fsdp import fully_shard

    from agentbench_crbc.rollout import models
    from agentbench_crbc.trainer.config import OptimConfig
    from agentbench_crbc.trainer.push import copy_weights_into, full_state
    from agentbench_crbc.trainer.update import StepSample, ppo_update

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29531", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.distributed.init_process_group("nccl", device_id=torch.device("cuda", 0))
    try:
        tok = models.tiny_tokenizer()
        model = models.tiny_qwen2(tok).cuda()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        samples = [StepSample((1, 2, 3), (4, 5), 1.0, 0, 0), StepSample((1, 6), (7, 8, 9), -1.0, 0, 1)]
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        logs = ppo_update(model, opt, samples, OptimConfig(kl_coef=0.0, micro_batch=2, mini_batch_size=2),
                          pad_id=0, device="cuda", autocast_dtype=torch.bfloat16, rng=np.random.default_rng(0))
        state = full_state(model)
        torch.save(state, out / "fsdp1-state.pt")
        back = torch.load(out / "fsdp1-state.pt", weights_only=True)
        fresh = models.tiny_qwen2(tok, seed=7).cuda()
        copy_weights_into(fresh, model)
        exact = all(torch.equal(back[k], v.cpu()) for k, v in fresh.state_dict().items())
        (out / "fsdp1-state.pt").unlink()
        if not exact:
            raise RuntimeError("the saved FSDP2 state does not load back exactly")
        return {"exact": exact, "optimizer_steps": logs["optimizer_steps"], "ratio_max": logs["ratio_max"]}
    finally:
        torch.distributed.destroy_process_group()


def w_paper_probe(out: Path) -> dict[str, Any]:
    torch = _cuda()
    import numpy as np
    from transformers import Qwen2ForCausalLM

    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.update import StepSample, ppo_update

    cfg = load_config(preset="alfworld-qwen2.5-1.5b")
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(text_config()).cuda().float()
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ref = Qwen2ForCausalLM(text_config()).cuda().to(torch.bfloat16).eval()
    ref.load_state_dict(model.state_dict())
    rng = np.random.default_rng(0)
    n_prompt, n_resp = 2048, 512
    samples = [StepSample(tuple(rng.integers(10, 150000, n_prompt).tolist()),
                          tuple(rng.integers(10, 150000, n_resp).tolist()), float(rng.normal()), i // 4, i % 4)
               for i in range(16)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ocfg = dataclasses.replace(cfg.optim, mini_batch_size=16, ppo_epochs=1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    logs = ppo_update(model, opt, samples, ocfg, pad_id=0, ref=ref, device="cuda", autocast_dtype=torch.bfloat16,
                      rng=rng)
    torch.cuda.synchronize()
    n_micro = -(-16 // ocfg.micro_batch)
    return {**_memory(torch), "micro_batch": ocfg.micro_batch, "seconds_per_micro_batch":
            logs["time_ppo"] / n_micro, "seconds_total": time.perf_counter() - t0,
            "ratio_max": logs["ratio_max"], "ratio_min": logs["ratio_min"], "gradient_checkpointing":
            cfg.model.gradient_checkpointing}


def w_vl_generate(out: Path) -> dict[str, Any]:
    torch = _cuda()
    import gymnasium as gym
    from transformers import Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    import agentbench_crbc.envs  # noqa: F401 - registers abc/* ids
    from agentbench_crbc.rollout import models
    from agentbench_crbc.rollout.base import SamplingParams
    from agentbench_crbc.rollout.hf import HFEngine
    from agentbench_crbc.rollout.prompts import PromptBuilder

    tok = models.tiny_tokenizer()
    torch.manual_seed(0)
    model = Qwen2_5_VLForConditionalGeneration(vl_config(tok)).cuda().to(torch.bfloat16).eval()
    proc = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2,
                                    temporal_patch_size=2)
    pb = PromptBuilder(tok, "abc/Sokoban-v0", image_processor=proc)
    env = gym.make("abc/Sokoban-v0")
    prompts = []
    for s in range(256):
        obs, info = env.reset(seed=s)
        prompts.append(pb.build(obs, info, [], s, "task"))
    eng = HFEngine(model, tok, image_processor=proc)
    t0 = time.perf_counter()
    res = eng.generate([p.ids for p in prompts], SamplingParams(temperature=1.0, max_tokens=32, seed=0),
                       images=[list(p.images) for p in prompts])
    torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    return {**_memory(torch), "prompts": len(res), "seconds": sec,
            "tokens_per_s": sum(len(c.token_ids) for c in res) / sec}


def w_hf_tokens(out: Path) -> dict[str, Any]:
    torch = _cuda()
    from transformers import Qwen2ForCausalLM

    from agentbench_crbc.rollout import models
    from agentbench_crbc.rollout.base import SamplingParams
    from agentbench_crbc.rollout.hf import HFEngine

    tok = models.tiny_tokenizer()
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(text_config()).cuda().to(torch.bfloat16).eval()
    eng = HFEngine(model, tok)
    prompts = [[(7 * i + j) % 300 + 3 for j in range(512)] for i in range(64)]
    eng.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=4, seed=0))  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    res = eng.generate(prompts, SamplingParams(temperature=1.0, max_tokens=128, seed=0))
    torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    return {**_memory(torch), "sequences": 64, "seconds": sec,
            "tokens_per_s": sum(len(c.token_ids) for c in res) / sec}


WORKERS = {"gpu-tests": w_gpu_tests, "rl-tiny": w_rl_tiny, "fsdp1": w_fsdp1, "paper-probe": w_paper_probe,
           "vl-generate": w_vl_generate, "hf-tokens": w_hf_tokens}


# -- the orchestrator -------------------------------------------------------------------------------------------------
def run_stage(name: str, limit: int, out: Path) -> dict[str, Any]:
    """``--worker name`` in a new process group, killed (the whole group) at ``limit`` seconds."""
    log = out / f"{name}.log"
    t0 = time.perf_counter()
    with log.open("w") as fh:
        p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", name, "--out", str(out)],
                             cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            rc = p.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = None
    res_file = out / f"{name}.json"
    result = json.loads(res_file.read_text()) if res_file.exists() else {}
    status = "timeout" if rc is None else ("pass" if rc == 0 else "fail")
    tail = log.read_text().strip().splitlines()[-5:]
    return {"stage": name, "status": status, "seconds": round(time.perf_counter() - t0, 1), "limit_s": limit,
            "result": result, "log_tail": tail}


def dry_run(wheels: Path) -> int:
    from gpu_wheels import check

    problems = check(wheels)
    try:
        problems += check_configs()
    except ImportError as exc:
        problems.append(f"configs: {exc}")
    try:
        from agentbench_crbc.trainer.config import load_config

        load_config(overrides=RL_TINY_SETS)
        load_config(preset="alfworld-qwen2.5-1.5b")
    except Exception as exc:  # a renamed config key
        problems.append(f"rl-tiny config: {exc}")
    total = sum(t for _, t in STAGES)
    if total > TOTAL_LIMIT_S:
        problems.append(f"stages take {total} s, over {TOTAL_LIMIT_S}")
    if set(WORKERS) != {n for n, _ in STAGES}:
        problems.append("a stage without a worker")
    for name, limit in STAGES:
        print(f"  {name:12s} <= {limit:3d} s: {sys.executable} {Path(__file__).name} --worker {name}")
    print(f"  total <= {total} s; wheels {wheels}; configs: Qwen2.5-1.5B, Qwen2.5-VL-3B (random init)")
    for p in problems:
        print(f"dry run: {p}")
    print(f"dry run: {'ok' if not problems else 'NOT ready'}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="check wheels, configs and the plan; run nothing")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="the carried wheel folder")
    ap.add_argument("--only", nargs="*", default=None, help="run only these stages")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help="logs and summary (default $OUT, else a temp folder)")
    args = ap.parse_args(argv)
    if args.dry_run:
        return dry_run(args.wheels)
    out = args.out or Path(os.environ.get("OUT") or f"/tmp/abc-gpu-smoke-{os.getpid()}")
    out.mkdir(parents=True, exist_ok=True)
    if args.worker:
        result = WORKERS[args.worker](out)
        (out / f"{args.worker}.json").write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps(result, default=str))
        return 0
    stages = [(n, t) for n, t in STAGES if args.only is None or n in args.only]
    summary = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stages": []}
    for name, limit in stages:
        res = run_stage(name, limit, out)
        summary["stages"].append(res)
        print(f"[{res['status']:7s}] {name:12s} {res['seconds']:6.1f} s  {json.dumps(res['result'], default=str)}",
              flush=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    failed = [s["stage"] for s in summary["stages"] if s["status"] != "pass"]
    print(f"gpu smoke: {len(stages) - len(failed)} of {len(stages)} passed; summary in {out / 'summary.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
