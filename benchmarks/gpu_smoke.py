"""The lent GPU's smoke run (one H200, no network, no vLLM, 10 minutes a command): the paths CPU tests only stand
in for, each stage a killed-on-time process group; a JSON summary and one log tarball.

    python benchmarks/gpu_wheels.py                # here: the carried wheel folder .whl/ (< 64 MiB)
    python benchmarks/gpu_smoke.py --dry-run       # here: wheel folder, model configs, stage plan
    python benchmarks/gpu_smoke.py --rehearse      # here: the device command below, on this CPU, from a clean copy
    OUT=DIR bash benchmarks/gpu_smoke.sh           # there: the one device command (installs .whl/, runs this)

Stages (480 s of limits in all; each runs ``gpu_smoke.py --worker NAME`` in its own process group, killed at its
limit, from a work folder outside the tree with ``PYTHONSAFEPATH=1``: every import is the installed wheel's):

1. ``gpu-tests``: the tests marked ``gpu`` (a copy of ``tests/`` in the work folder, ``pytest -m gpu --run-gpu``);
2. ``rl-tiny``: two RL updates of ``abc train`` on the tiny model on CUDA in bf16 with KL;
3. ``fsdp1``: FSDP2 at world size 1 over NCCL with the trainer's mixed precision (bf16 gathers, fp32 reduce): one
   PPO update, weights gathered one parameter at a time, saved and loaded back, compared exactly;
4. ``paper-probe``: random-init Qwen2.5-1.5B (the real config), one PPO epoch of 16 x (2048 + 512) tokens in two
   mini-batches at the preset's micro-batch: peak allocated / reserved memory, seconds per micro-batch, ratio max /
   min (the second mini-batch runs on moved weights, so the bf16 ratio check means something);
5. ``vl-generate``: HF generation of 256 Sokoban prompts on a random-init Qwen2.5-VL-3B;
6. ``hf-tokens``: tokens per second of HF text generation on the random-init 1.5B;
7. ``vl-train``: ``abc train`` of the tiny Qwen2.5-VL on pixel Sokoban (the VL preset's pipeline) on CUDA in bf16,
   2 updates, a resume that adds a third, and the export: RUN/model holds fp32 tensors equal to the last checkpoint's;
8. ``lora-guard``: 2 RL updates of LoRA adapters with the KL guard on (approx_kl_end and the guard's lr logged,
   RUN/model the adapter).

With ``ABC_SMOKE_CPU=1`` (what ``--rehearse`` sets) each stage runs its CPU stand-in: the same code on the CPU with
gloo instead of NCCL, tiny models instead of the 1.5B / 3B ones, and ``--collect-only`` for the GPU tests.
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
#: (the limits are kill switches, not measurements: on one H200 each stage took 13-40 s, 2026-12-04; on the CPU
#: stand-ins each is CPU_LIMIT_FACTOR times longer, for a loaded machine)
STAGES: tuple[tuple[str, int], ...] = (("gpu-tests", 80), ("rl-tiny", 50), ("fsdp1", 50), ("paper-probe", 80),
                                       ("vl-generate", 70), ("hf-tokens", 40), ("vl-train", 70), ("lora-guard", 40))
TOTAL_LIMIT_S = 480
CPU_LIMIT_FACTOR = 3
#: set to 1 for the CPU stand-ins of every stage (``--rehearse`` does)
CPU_ENV = "ABC_SMOKE_CPU"


def on_cpu() -> bool:
    return os.environ.get(CPU_ENV, "") == "1"


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
def _device() -> Any:
    """torch, on CUDA (its peak counters reset), or the CPU for the stand-ins."""
    import torch

    if on_cpu():
        torch.set_num_threads(1)
        return torch
    if not torch.cuda.is_available():
        raise SystemExit(f"no CUDA device ({CPU_ENV}=1 runs the CPU stand-ins)")
    torch.cuda.reset_peak_memory_stats()
    return torch


def _dev() -> str:
    return "cpu" if on_cpu() else "cuda"


def _sync(torch: Any) -> None:
    if not on_cpu():
        torch.cuda.synchronize()


def _memory(torch: Any) -> dict[str, float]:
    if on_cpu():
        return {}
    return {"peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
            "peak_reserved_gib": torch.cuda.max_memory_reserved() / 2**30}


def _suite(source: Path, work: Path) -> tuple[Path, list[str]]:
    """A copy of the source tree's ``tests/`` (and the pytest settings of pyproject.toml) in the work folder, and
    the test files that hold ``gpu`` tests: pytest then puts the copy's folder, not the tree, on ``sys.path``."""
    import shutil

    suite = work / "suite"
    shutil.rmtree(suite, ignore_errors=True)
    shutil.copytree(source / "tests", suite / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(source / "pyproject.toml", suite / "pyproject.toml")
    files = sorted(str(f.relative_to(suite)) for f in (suite / "tests").rglob("test_*.py")
                   if "pytest.mark.gpu" in f.read_text(encoding="utf-8"))
    return suite, files


def w_gpu_tests(out: Path, work: Path, source: Path) -> dict[str, Any]:
    suite, files = _suite(source, work)
    if not files:
        raise RuntimeError("no test file holds a gpu-marked test")
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "--run-gpu", "-p", "no:cacheprovider", *files]
    if on_cpu():
        cmd.append("--collect-only")  # the stand-in: every import, plugin and marker resolves from outside the tree
    r = subprocess.run(cmd, cwd=suite, capture_output=True, text=True)
    (out / "gpu-tests.pytest.txt").write_text(r.stdout + r.stderr)
    last = (r.stdout.strip().splitlines() or [""])[-1]
    if r.returncode != 0:
        raise RuntimeError(f"pytest -m gpu exited {r.returncode}: {last}")
    if not on_cpu() and ("passed" not in last or "skipped" in last):  # a skipped GPU test checked nothing
        raise RuntimeError(f"pytest -m gpu: {last}")
    return {"pytest_rc": r.returncode, "files": files, "last_line": last}


#: ``abc train --set`` values of the rl-tiny stage (checked by the dry run; the CPU stand-in swaps the device)
RL_TINY_SETS = ("updates=2", "sft.steps=0", "device=cuda", "model.dtype=bf16", "optim.kl_coef=0.05",
                "rollout.groups=2", "eval.episodes=2", "progress=false")


def w_rl_tiny(out: Path, work: Path, source: Path) -> dict[str, Any]:
    run = work / "rl-tiny-runs"
    sets = [*(f"device={_dev()}" if s.startswith("device=") else s for s in RL_TINY_SETS), f"out_dir={run}"]
    if on_cpu():
        sets += ["rollout.max_response_tokens=8", "env.max_steps=4", "eval.greedy=false"]
    cmd = [sys.executable, "-m", "agentbench_crbc", "train", *[a for s in sets for a in ("--set", s)]]
    r = subprocess.run(cmd, cwd=work, capture_output=True, text=True)
    (out / "rl-tiny.train.txt").write_text(r.stdout + r.stderr)
    if r.returncode:
        raise RuntimeError(f"abc train exited {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")
    (folder,) = list(run.iterdir())
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    (out / "rl-tiny.metrics.jsonl").write_text((folder / "metrics.jsonl").read_text())
    rl = [x for x in rows if x.get("stage") == "rl"]
    if len(rl) != 2:
        raise RuntimeError(f"{len(rl)} RL updates logged, want 2")
    return {"updates": len(rl), "kl": [x.get("kl") for x in rl], "ratio_max": [x.get("ratio_max") for x in rl]}


def w_fsdp1(out: Path, work: Path, source: Path) -> dict[str, Any]:
    torch = _device()
    import numpy as np

    from agentbench_crbc.rollout.engines import models
    from agentbench_crbc.trainer.config import OptimConfig
    from agentbench_crbc.trainer.distributed import shard_model
    from agentbench_crbc.trainer.policy import copy_weights_into, full_state
    from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update

    dev = torch.device(_dev())
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0")
    if on_cpu():
        torch.distributed.init_process_group("gloo")
    else:
        torch.distributed.init_process_group("nccl", device_id=torch.device("cuda", 0))
    try:
        tok = models.tiny_tokenizer()
        model = models.tiny_qwen2(tok).to(dev)
        amp = torch.bfloat16  # the trainer's setting on a GPU: bf16 gathers, fp32 master weights and reduce
        shard_model(model, compute_dtype=amp)
        samples = [StepSample((1, 2, 3), (4, 5), 1.0, 0, 0), StepSample((1, 6), (7, 8, 9), -1.0, 0, 1)]
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        logs = ppo_update(model, opt, samples, OptimConfig(kl_coef=0.0, micro_batch=2, mini_batch_size=2),
                          UpdateContext(pad_id=0, device=dev, autocast_dtype=amp), rng=np.random.default_rng(0))
        dtypes = sorted({str(p.dtype) for p in model.parameters()})
        state = full_state(model)
        torch.save(state, work / "fsdp1-state.pt")
        back = torch.load(work / "fsdp1-state.pt", weights_only=True)
        fresh = models.tiny_qwen2(tok, seed=7).to(dev)
        copy_weights_into(fresh, model)
        exact = all(torch.equal(back[k], v.cpu()) for k, v in fresh.state_dict().items())
        (work / "fsdp1-state.pt").unlink()
        if not exact:
            raise RuntimeError("the saved FSDP2 state does not load back exactly")
        if dtypes != ["torch.float32"]:
            raise RuntimeError(f"sharded parameters are {dtypes}, want fp32 master weights")
        return {"exact": exact, "optimizer_steps": logs["optimizer_steps"], "ratio_max": logs["ratio_max"],
                "compute_dtype": str(amp), "param_dtypes": dtypes}
    finally:
        torch.distributed.destroy_process_group()


def w_paper_probe(out: Path, work: Path, source: Path) -> dict[str, Any]:
    torch = _device()
    import numpy as np
    from transformers import Qwen2ForCausalLM

    from agentbench_crbc.rollout.engines import models
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update

    cfg = load_config(preset="alfworld-qwen2.5-1.5b")
    torch.manual_seed(0)
    if on_cpu():  # the stand-in: the tiny model, short sequences
        model, n_prompt, n_resp, vocab = models.tiny_qwen2(models.tiny_tokenizer()).float(), 64, 16, 300
        ref = models.tiny_qwen2(models.tiny_tokenizer()).to(torch.bfloat16).eval()
    else:
        with torch.device("cuda"):  # initialised on the GPU: seconds, not the CPU's minute for 1.5B twice
            model, n_prompt, n_resp, vocab = Qwen2ForCausalLM(text_config()).float(), 2048, 512, 150000
            ref = Qwen2ForCausalLM(text_config()).to(torch.bfloat16).eval()
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ref.load_state_dict(model.state_dict())
    rng = np.random.default_rng(0)
    n = 16
    samples = [StepSample(tuple(rng.integers(10, vocab, n_prompt).tolist()),
                          tuple(rng.integers(10, vocab, n_resp).tolist()), float(rng.normal()), i // 4, i % 4)
               for i in range(n)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    micro = min(cfg.optim.micro_batch, n // 2)
    ocfg = dataclasses.replace(cfg.optim, mini_batch_size=n // 2, ppo_epochs=1, micro_batch=micro)  # 2 mini-batches
    _sync(torch)
    t0 = time.perf_counter()
    logs = ppo_update(model, opt, samples, ocfg, UpdateContext(pad_id=0, ref=ref, device=_dev(),
                      autocast_dtype=torch.bfloat16), rng=rng)
    _sync(torch)
    if logs["optimizer_steps"] < 2:
        raise RuntimeError(f"{logs['optimizer_steps']} optimizer steps, want 2 mini-batches")
    n_micro = 2 * -(-(n // 2) // micro)
    return {**_memory(torch), "micro_batch": micro, "mini_batches": logs["optimizer_steps"],
            "seconds_per_micro_batch": logs["time_ppo"] / n_micro, "seconds_total": time.perf_counter() - t0,
            "ratio_max": logs["ratio_max"], "ratio_min": logs["ratio_min"], "kl": logs["kl"],
            "gradient_checkpointing": cfg.model.gradient_checkpointing}


def w_vl_generate(out: Path, work: Path, source: Path) -> dict[str, Any]:
    torch = _device()
    import gymnasium as gym
    from transformers import Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    import agentbench_crbc.envs  # noqa: F401 - registers abc/* ids
    from agentbench_crbc.rollout.engines import models
    from agentbench_crbc.rollout.engines.hf import HFEngine
    from agentbench_crbc.rollout.episodes.base import SamplingParams
    from agentbench_crbc.rollout.episodes.prompts import PromptBuilder

    tok = models.tiny_tokenizer()
    torch.manual_seed(0)
    if on_cpu():
        model, n_prompts, n_tokens = models.tiny_qwen2_5_vl(tok)[0].to(torch.bfloat16), 4, 8
    else:
        with torch.device("cuda"):
            model = Qwen2_5_VLForConditionalGeneration(vl_config(tok)).to(torch.bfloat16).eval()
        n_prompts, n_tokens = 256, 32
    proc = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112, patch_size=14, merge_size=2,
                                    temporal_patch_size=2)
    pb = PromptBuilder(tok, "abc/Sokoban-v0", image_processor=proc)
    env = gym.make("abc/Sokoban-v0")
    prompts = []
    for s in range(n_prompts):
        obs, info = env.reset(seed=s)
        prompts.append(pb.build(obs, info, [], s, "task"))
    eng = HFEngine(model, tok, image_processor=proc)
    t0 = time.perf_counter()
    res = eng.generate([p.ids for p in prompts], SamplingParams(temperature=1.0, max_tokens=n_tokens, seed=0),
                       images=[list(p.images) for p in prompts])
    _sync(torch)
    sec = time.perf_counter() - t0
    return {**_memory(torch), "prompts": len(res), "seconds": sec,
            "tokens_per_s": sum(len(c.token_ids) for c in res) / sec}


def w_hf_tokens(out: Path, work: Path, source: Path) -> dict[str, Any]:
    torch = _device()
    from transformers import Qwen2ForCausalLM

    from agentbench_crbc.rollout.engines import models
    from agentbench_crbc.rollout.engines.hf import HFEngine
    from agentbench_crbc.rollout.episodes.base import SamplingParams

    tok = models.tiny_tokenizer()
    torch.manual_seed(0)
    if on_cpu():
        model, n_seq, n_tokens = models.tiny_qwen2(tok).to(torch.bfloat16), 4, 16
    else:
        with torch.device("cuda"):
            model, n_seq, n_tokens = Qwen2ForCausalLM(text_config()).to(torch.bfloat16).eval(), 64, 128
    eng = HFEngine(model, tok)
    prompts = [[(7 * i + j) % 300 + 3 for j in range(512)] for i in range(n_seq)]
    eng.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=4, seed=0))  # warm-up
    _sync(torch)
    t0 = time.perf_counter()
    res = eng.generate(prompts, SamplingParams(temperature=1.0, max_tokens=n_tokens, seed=0))
    _sync(torch)
    sec = time.perf_counter() - t0
    return {**_memory(torch), "sequences": n_seq, "seconds": sec,
            "tokens_per_s": sum(len(c.token_ids) for c in res) / sec}


def _train(argv: list[str], out: Path, work: Path, log: str) -> None:
    """``abc train ARGV`` from ``work``, its output in ``out/LOG``; one line naming the exit when it fails."""
    r = subprocess.run([sys.executable, "-m", "agentbench_crbc", "train", *argv], cwd=work, capture_output=True,
                       text=True)
    with (out / log).open("a") as fh:
        fh.write(f"$ abc train {' '.join(argv)}\n{r.stdout}{r.stderr}")
    if r.returncode:
        raise RuntimeError(f"abc train exited {r.returncode}: {(r.stderr.strip().splitlines() or [''])[-1]}")


def _sets(sets: list[str]) -> list[str]:
    return [a for kv in sets for a in ("--set", kv)]


def _rl_rows(run: Path) -> list[dict[str, Any]]:
    return [x for x in (json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines())
            if x.get("stage") == "rl"]


def _weights(folder: Path) -> dict[str, Any]:
    """The tensors of a model folder (safetensors files) or an FSDP2 checkpoint (``state.pt``)."""
    import torch
    from safetensors.torch import load_file

    if (folder / "state.pt").exists():
        return torch.load(folder / "state.pt", weights_only=True)
    out: dict[str, Any] = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(load_file(f))
    return out


def _vl_in_memory(name: str) -> str:
    """A Qwen2.5-VL checkpoint-format name (``save_pretrained``'s) as the model names it in memory."""
    if name.startswith("visual."):
        return "model." + name
    if name.startswith("model.") and not name.startswith(("model.language_model.", "model.visual.")):
        return "model.language_model." + name.removeprefix("model.")
    return name


#: ``abc train --set`` values of the vl-train stage: the VL preset's pipeline (pixel Sokoban, images in every
#: forward) with the tiny Qwen2.5-VL, bf16 on CUDA, a checkpoint per update (then one resumed update)
VL_TRAIN_SETS = ("sft.steps=0", "updates=2", "rollout.groups=1", "rollout.group_size=4",
                 "rollout.max_response_tokens=8", "eval.episodes=2", "eval.samples=1", "eval.greedy=false",
                 "env.max_steps=3", "max_minutes=0", "progress=false", "tensorboard=false", "optim.micro_batch=4",
                 "device=cuda", "model.dtype=bf16", "checkpoint_every=1")


def w_vl_train(out: Path, work: Path, source: Path) -> dict[str, Any]:
    """Tiny Qwen2.5-VL: 2 RL updates on CUDA in bf16, a resume that adds a third, and the fp32 export: RUN/model
    holds fp32 tensors equal, tensor by tensor, to the last checkpoint's (the bf16 rollout copy was exported once)."""
    import torch

    root = work / "vl-train-runs"
    sets = [*(f"device={_dev()}" if s.startswith("device=") else s for s in VL_TRAIN_SETS), f"out_dir={root}"]
    first = 2
    if on_cpu():  # the pipeline is the stand-in's point: fp32 (bf16 on a CPU without bf16 units took minutes), and
        first = 1  # one update before the resume (an update of 1024-token image prompts took 30 s on 2 loaded cores)
        sets += ["model.dtype=fp32", "updates=1", "env.max_steps=2"]
    _train(["--credit", "crbc", "--preset", "sokoban-qwen2.5-vl-3b", "--model", "tiny-vl", *_sets(sets)], out, work,
           "vl-train.train.txt")
    (run,) = list(root.iterdir())
    _train(["--resume", str(run), *_sets([f"updates={first + 1}"])], out, work, "vl-train.train.txt")
    steps = [x["step"] for x in _rl_rows(run)]
    if steps != list(range(1, first + 2)):
        raise RuntimeError(f"RL updates logged {steps}, want {first}, then 1 after the resume")
    latest = (run / "checkpoints" / "latest").read_text().strip()
    exported = {_vl_in_memory(k): v for k, v in _weights(run / "model").items()}
    saved = _weights(run / "checkpoints" / latest / "model")
    common = sorted(set(exported) & set(saved))
    if not common or len(common) < 0.9 * len(exported):
        raise RuntimeError(f"the export and {latest} share {len(common)} of {len(exported)} tensor names")
    floats = {str(v.dtype) for v in exported.values() if v.is_floating_point()}
    if floats != {"torch.float32"}:
        raise RuntimeError(f"RUN/model holds {sorted(floats)} tensors, want the fp32 master weights")
    differ = [k for k in common if not torch.equal(exported[k].float(), saved[k].float())]
    if differ:
        raise RuntimeError(f"{len(differ)} exported tensors differ from {latest}'s, e.g. {differ[0]}")
    return {"rl_steps": steps, "checkpoint": latest, "tensors_compared": len(common), "export_dtypes": sorted(floats)}


#: ``abc train --set`` values of the lora-guard stage: LoRA adapters with the KL guard on, bf16 on CUDA
LORA_GUARD_SETS = ("updates=2", "sft.steps=0", "device=cuda", "model.dtype=bf16", "model.lora=true",
                   "model.lora_rank=4", "optim.target_kl=0.02", "optim.kl_coef=0.05", "rollout.groups=2",
                   "eval.episodes=2", "eval.greedy=false", "progress=false", "tensorboard=false")


def w_lora_guard(out: Path, work: Path, source: Path) -> dict[str, Any]:
    """Two RL updates of LoRA adapters with the KL guard on: the guard measures every update (approx_kl_end and
    its lr logged), and RUN/model is the adapter."""
    root = work / "lora-guard-runs"
    sets = [*(f"device={_dev()}" if s.startswith("device=") else s for s in LORA_GUARD_SETS), f"out_dir={root}"]
    if on_cpu():
        sets += ["rollout.max_response_tokens=8", "env.max_steps=4"]
    _train(_sets(sets), out, work, "lora-guard.train.txt")
    (run,) = list(root.iterdir())
    rl = _rl_rows(run)
    if len(rl) != 2 or any(x.get("approx_kl_end") is None or x.get("lr") is None for x in rl):
        raise RuntimeError(f"{len(rl)} RL updates logged, want 2 with approx_kl_end and the guard's lr")
    if not (run / "model" / "adapter_model.safetensors").exists():
        raise RuntimeError(f"RUN/model holds {sorted(p.name for p in (run / 'model').iterdir())}, want the adapter")
    return {"updates": len(rl), "approx_kl_end": [x["approx_kl_end"] for x in rl], "lr": [x["lr"] for x in rl],
            "kl_stops": sum(int(x.get("kl_stop", 0)) for x in rl)}


WORKERS = {"gpu-tests": w_gpu_tests, "rl-tiny": w_rl_tiny, "fsdp1": w_fsdp1, "paper-probe": w_paper_probe,
           "vl-generate": w_vl_generate, "hf-tokens": w_hf_tokens, "vl-train": w_vl_train,
           "lora-guard": w_lora_guard}


# -- the orchestrator -------------------------------------------------------------------------------------------------
def run_stage(name: str, limit: int, out: Path, work: Path, source: Path) -> dict[str, Any]:
    """``--worker name`` in a new process group from ``work``, killed (the whole group) at ``limit`` seconds."""
    log = out / f"{name}.log"
    t0 = time.perf_counter()
    with log.open("w") as fh:
        p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", name, "--out", str(out),
                              "--work", str(work), "--source", str(source)],
                             cwd=work, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            rc = p.wait(timeout=limit * (CPU_LIMIT_FACTOR if on_cpu() else 1))
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


def environment(source: Path) -> dict[str, Any]:
    """What the stages ran on, and where ``agentbench_crbc`` was imported from (never the source tree)."""
    info: dict[str, Any] = {"python": sys.version.split()[0], "cpu_stand_ins": on_cpu()}
    try:
        import agentbench_crbc

        where = Path(agentbench_crbc.__file__).resolve().parent
        info["package"] = str(where)
        info["package_from_source_tree"] = where.is_relative_to(source.resolve())
    except ImportError as exc:
        info["package"] = f"not importable: {exc}"
        info["package_from_source_tree"] = None
    for mod in ("torch", "transformers", "peft", "gymnasium", "scipy"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    try:
        import torch

        info["cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info


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
        load_config(overrides=LORA_GUARD_SETS)
        load_config(preset="sokoban-qwen2.5-vl-3b", model="tiny-vl", overrides=VL_TRAIN_SETS)
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


#: What the GPU image has installed (with their dependencies): the rehearsal's interpreter sees only these
GPU_IMAGE = ("torch", "transformers", "peft", "pluggy", "tensorboard", "tqdm", "pandas", "matplotlib", "pytest",
             "hypothesis", "pip")


def _closure(names: tuple[str, ...]) -> list[Any]:
    """The installed distributions of ``names`` and everything they require (extras left out)."""
    import importlib.metadata as md

    from packaging.requirements import Requirement

    seen: dict[str, Any] = {}
    todo = list(names)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue
        seen[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def _top_level(dist: Any) -> set[str]:
    """The site-packages entries of an installed distribution (packages, modules, its dist-info)."""
    return {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}


def _wheel_top_level(wheel: Path) -> set[str]:
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        return {n.split("/")[0] for n in z.namelist() if not n.split("/")[0].endswith((".dist-info", ".data"))}


def _installable(wheel: Path) -> bool:
    """Whether this interpreter can install ``wheel`` (pure, or built for this CPython)."""
    tag = wheel.stem.split("-")[-3]
    return tag.startswith("py3") or tag == f"cp{sys.version_info.major}{sys.version_info.minor}"


def rehearse(wheels: Path, *, keep: bool = False) -> int:
    """Run the device command (``OUT=... bash benchmarks/gpu_smoke.sh``) on this CPU, exactly as written, in a
    clean copy of the tracked files with an interpreter that has the GPU image's packages and nothing of the
    project but the carried wheels; CUDA stages run their CPU stand-ins (``ABC_SMOKE_CPU=1``). A cp312 wheel this
    interpreter cannot install is left out and the local copy of that package stands in (said in the output)."""
    import shutil
    import tempfile

    from gpu_wheels import check

    problems = check(wheels)
    if problems:
        for p in problems:
            print(f"rehearse: {p}")
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="abc-rehearse-"))
    try:
        clone = tmp / "clone"
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        for name in filter(None, listed.decode().split("\0")):
            src = ROOT / name
            if src.is_file():
                (clone / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, clone / name)
        (clone / ".whl").mkdir()
        standing_in: list[Path] = []
        for w in sorted(wheels.glob("*.whl")):
            if _installable(w):
                shutil.copy2(w, clone / ".whl" / w.name)
            else:
                standing_in.append(w)
        # the GPU image: its packages (from this interpreter), linked into a folder its own venv puts on sys.path
        import importlib.metadata as md

        image = tmp / "image"
        image.mkdir()
        site = Path(next(p for p in sys.path if p.endswith("site-packages")))
        entries: set[str] = set()
        for dist in _closure(GPU_IMAGE):
            entries |= _top_level(dist)
        for w in standing_in:  # e.g. scipy's cp312 build: the local scipy stands in
            entries |= _wheel_top_level(w) | _top_level(md.distribution(w.name.split("-")[0]))
        for e in sorted(entries):
            if (site / e).exists() and not e.startswith(("agentbench_crbc", "__editable__")):
                (image / e).symlink_to(site / e)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "py")], check=True)
        (venv_site,) = (tmp / "py").glob("lib/python*/site-packages")
        (venv_site / "gpu_image.pth").write_text(f"{image}\n")
        out = tmp / "out"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env.update({"PATH": f"{tmp / 'py' / 'bin'}{os.pathsep}{env.get('PATH', '')}", "OUT": str(out), CPU_ENV: "1"})
        cmd = "OUT=$OUT bash benchmarks/gpu_smoke.sh"
        print(f"rehearse: in {clone}: {cmd}  ({CPU_ENV}=1; python3 = GPU-image packages + {len(entries)} entries)")
        for w in standing_in:
            print(f"rehearse: {w.name} is not for this interpreter; the local {w.name.split('-')[0]} stands in")
        t0 = time.perf_counter()
        r = subprocess.run(["bash", "-c", cmd], cwd=clone, env=env)
        left = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
        problems = []
        if r.returncode:
            problems.append(f"the device command exited {r.returncode}")
        if left != ["gpu-smoke-logs.tar.gz", "summary.json"]:
            problems.append(f"$OUT holds {left}, want summary.json and gpu-smoke-logs.tar.gz only")
        if summary.get("environment", {}).get("package_from_source_tree") is not False:
            problems.append(f"agentbench_crbc came from {summary.get('environment', {}).get('package')}")
        print(f"rehearse: {time.perf_counter() - t0:.0f} s; $OUT: {left}")
        for p in problems:
            print(f"rehearse: {p}")
        print(f"rehearse: {'ok' if not problems else 'FAILED'}")
        return 1 if problems else 0
    finally:
        if keep:
            print(f"rehearse: kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run", action="store_true", help="check wheels, configs and the plan; run nothing")
    ap.add_argument("--rehearse", action="store_true",
                    help="run the device command (benchmarks/gpu_smoke.sh) here, on CPU stand-ins, from a clean copy")
    ap.add_argument("--keep", action="store_true", help="--rehearse: keep its temporary folder")
    ap.add_argument("--wheels", type=Path, default=ROOT / ".whl", help="the carried wheel folder")
    ap.add_argument("--only", nargs="*", default=None, help="run only these stages")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help="stage logs and results (default $OUT, else a temp folder)")
    ap.add_argument("--work", type=Path, default=None, help="where stages run and keep run folders (default --out)")
    ap.add_argument("--summary", type=Path, default=None, help="the summary file (default OUT/summary.json)")
    ap.add_argument("--source", type=Path, default=ROOT, help="the source tree (its tests/ are copied out of it)")
    args = ap.parse_args(argv)
    if args.dry_run:
        return dry_run(args.wheels)
    if args.rehearse:
        return rehearse(args.wheels, keep=args.keep)
    out = args.out or Path(os.environ.get("OUT") or f"/tmp/abc-gpu-smoke-{os.getpid()}")
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or out
    work.mkdir(parents=True, exist_ok=True)
    if args.worker:
        result = WORKERS[args.worker](out, work, args.source)
        (out / f"{args.worker}.json").write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps(result, default=str))
        return 0
    summary_path = args.summary or out / "summary.json"
    stages = [(n, t) for n, t in STAGES if args.only is None or n in args.only]
    env = environment(args.source)
    summary: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "ok": False,
                               "environment": env, "stages": []}
    print(f"gpu smoke: agentbench_crbc from {env['package']}; torch {env.get('torch')}, cuda {env.get('cuda')}, "
          f"{env.get('gpu', 'no GPU')}{' (CPU stand-ins)' if on_cpu() else ''}", flush=True)
    if env["package_from_source_tree"] is not False:
        summary["error"] = f"agentbench_crbc imported from {env['package']}, not the installed wheel"
        summary_path.write_text(json.dumps(summary, indent=1, default=str))
        print(f"gpu smoke: {summary['error']}", flush=True)
        return 1
    for name, limit in stages:
        res = run_stage(name, limit, out, work, args.source)
        summary["stages"].append(res)
        print(f"[{res['status']:7s}] {name:12s} {res['seconds']:6.1f} s  {json.dumps(res['result'], default=str)}",
              flush=True)
        summary_path.write_text(json.dumps(summary, indent=1, default=str))
    failed = [s["stage"] for s in summary["stages"] if s["status"] != "pass"]
    summary["ok"] = not failed
    summary_path.write_text(json.dumps(summary, indent=1, default=str))
    print(f"gpu smoke: {len(stages) - len(failed)} of {len(stages)} passed; summary in {summary_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
