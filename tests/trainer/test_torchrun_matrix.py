"""The trainer under torchrun on CPUs, end to end through ``abc train``: 2 gloo processes, tiny random-init models,
2 updates, a resume that adds one, the final export, for each combination a GPU user runs: DDP and FSDP2, each with
the ``hf`` engine and with the ``vllm`` engine on the vLLM stand-in (``tests/standins/vllm``: names checked as vLLM
checks them, dtypes recorded), with and without LoRA, and a tiny Qwen2.5-VL. All runs share one torchrun launch
(``torchrun_matrix.py``), so the suite pays for torchrun's start once."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from ._util import TINY  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gpu_smoke import _vl_in_memory as _in_memory  # noqa: E402  (the GPU smoke's checks, shared)
from gpu_smoke import _weights  # noqa: E402

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TEXT = [(s, e, lora) for s in ("ddp", "fsdp") for e in ("hf", "vllm") for lora in (False, True)]
VL = [("ddp", "vllm"), ("fsdp", "hf")]


def _sets(kvs: list[str]) -> list[str]:
    return [a for kv in kvs for a in ("--set", kv)]


def _runs(root: Path) -> list[dict]:
    runs = []
    for strategy, engine, lora in TEXT:
        name = f"{strategy}-{engine}{'-lora' if lora else ''}"
        out = root / name
        sets = [*TINY, "updates=2", "sft.steps=0", f"strategy={strategy}", f"rollout.engine={engine}",
                f"model.lora={str(lora).lower()}", "model.lora_rank=4", "optim.kl_coef=0.05", "optim.micro_batch=4",
                "device=cpu", "model.dtype=fp32", "eval.episodes=2", f"out_dir={out}",
                # vLLM cannot restrict decoding (its record says constrains=False): free text, as on a GPU with vLLM;
                # the hf runs keep the CPU demo's constrained answers, so both paths run under torchrun
                f"rollout.constrain={str(engine != 'vllm').lower()}"]
        runs.append({"name": name, "out_dir": str(out), "argv": ["train", "--credit", "crbc", *_sets(sets)]})
        runs.append({"name": f"{name}+resume", "out_dir": str(out), "resume": True, "argv": _sets(["updates=3"])})
    for strategy, engine in VL:
        name = f"vl-{strategy}-{engine}"
        out = root / name
        sets = ["sft.steps=0", "updates=2", "rollout.groups=2", "rollout.group_size=4", "rollout.max_response_tokens=8",
                "eval.episodes=2", "eval.samples=1", "eval.greedy=false", "env.max_steps=3", "max_minutes=0",
                "progress=false", "tensorboard=false", "optim.micro_batch=4", "device=cpu", "model.dtype=fp32",
                f"strategy={strategy}", f"rollout.engine={engine}", "checkpoint_every=1", f"out_dir={out}"]
        runs.append({"name": name, "out_dir": str(out), "argv": ["train", "--credit", "crbc", "--preset",
                                                                 "sokoban-qwen2.5-vl-3b", "--model", "tiny-vl",
                                                                 *_sets(sets)]})
        runs.append({"name": f"{name}+resume", "out_dir": str(out), "resume": True, "argv": _sets(["updates=3"])})
    return runs


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not installed")
    root = tmp_path_factory.mktemp("torchrun-matrix")
    runs = _runs(root)
    spec = root / "spec.json"
    spec.write_text(json.dumps({"runs": runs, "results": str(root / "results.json")}))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "ABC_DIST_TIMEOUT_MINUTES": "3"}
    r = subprocess.run([torchrun, "--standalone", "--nproc_per_node", "2", str(HERE / "torchrun_matrix.py"),
                        str(spec)], cwd=root, env=env, capture_output=True, text=True, timeout=900)
    results = json.loads((root / "results.json").read_text()) if (root / "results.json").exists() else {}
    return root, runs, results, r


def _run_dir(out: Path) -> Path:
    (run,) = [p for p in out.iterdir() if p.is_dir() and p.name != "vllm-log"]
    return run


def _events(out: Path, rank: int) -> list[dict]:
    path = out / "vllm-log" / f"rank{rank}.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _names(runs: list[dict]) -> list[str]:
    return [r["name"] for r in runs if not r.get("resume")]


@pytest.mark.parametrize("name", _names(_runs(Path("/nonexistent"))))
def test_torchrun_combination_trains_resumes_and_exports(matrix, name):
    root, _, results, r = matrix
    for key in (name, f"{name}+resume"):
        assert results.get(key) == 0, (key, results, r.stdout[-3000:], r.stderr[-5000:])
    out = root / name
    run = _run_dir(out)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in rows if x["stage"] == "rl"] == [1, 2, 3]
    ckpt = run / "checkpoints" / "ckpt-000003"
    assert (run / "checkpoints" / "latest").read_text().strip() == ckpt.name
    # the final export is the final policy: equal, tensor by tensor, to the last checkpoint's weights
    exported, saved = _weights(run / "model"), _weights(ckpt / "model")
    lora = "lora" in name
    assert (run / "model" / ("adapter_model.safetensors" if lora else "model.safetensors")).exists()
    if lora:  # adapter only; the checkpoint's (FSDP2: full peft state) names carry ".default"
        saved = {k.replace(".default", ""): v for k, v in saved.items() if "lora_" in k}
    if name.startswith("vl-"):
        exported = {_in_memory(k): v for k, v in exported.items()}
    common = sorted(set(exported) & set(saved))
    assert len(common) >= 0.9 * len(exported) and common, (sorted(exported)[:4], sorted(saved)[:4])
    assert all(torch.equal(exported[k].float(), saved[k].float()) for k in common)
    if "vllm" not in name:
        return
    for rank in (0, 1):
        ev = _events(out, rank)
        inits = [i for i, e in enumerate(ev) if e["event"] == "init"]
        assert len(inits) == 2, ev  # the run, then its resume
        first, resumed = ev[:inits[1]], ev[inits[1]:]
        pushes = [e for e in first if e["event"] == "reload"]
        again = [e for e in resumed if e["event"] == "reload"]
        assert first[0]["backend"] == "external_launcher" and first[0]["dtype"] == "torch.bfloat16"
        # once at the start, once per update: all in the serving dtype (bf16), whatever the trainer's dtype
        assert len(pushes) == 1 + 2 and all(p["dtypes"] == ["torch.bfloat16"] for p in pushes + again)
        # the resume pushes the checkpoint's weights before it generates: the last weights of the first run
        assert len(again) == 1 + 1 + 1 and again[1]["fingerprint"] == pushes[-1]["fingerprint"]
        gen = [i for i, e in enumerate(resumed) if e["event"] == "generate"]
        assert gen and gen[0] > resumed.index(again[1])
