"""Deterministic mode: the pins set before torch loads, the ISA torch then runs, the refusal when torch chose its
kernels first, the config hash of runs without the key, and ``abc bench``'s default."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentbench_crbc.bench.learning import pinned
from agentbench_crbc.trainer.config import config_hash, load_config
from agentbench_crbc.trainer.kernels import PINNED_ENV, mkl_version, pin_kernels

AVX2 = " avx2" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False
AVX512 = " avx512f" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False


def test_pin_kernels_sets_every_pin_once_and_says_which_it_changed():
    env = {"MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx512", "PATH": "/bin"}
    assert pin_kernels(env) == ["ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "CUBLAS_WORKSPACE_CONFIG"]
    assert env == {**PINNED_ENV, "PATH": "/bin"}
    assert pin_kernels(env) == []


def test_themkl_version_is_read_from_torchs_build_summary():
    line = "  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64"
    assert mkl_version(line) == "2024.2" and mkl_version("no MKL here") is None


def _py(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in __import__("os").environ.items() if k not in PINNED_ENV}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.skipif(not AVX2, reason="needs a CPU with AVX2")
def test_pinned_before_torch_runs_avx2_kernels_and_the_record_names_them():
    got = _py("from agentbench_crbc.trainer.kernels import check_pinned, kernel_info, pin_kernels\n"
              "pin_kernels()\nimport torch\ntorch.ones(4).softmax(0)\nprint(check_pinned(), kernel_info(True))")
    assert got.returncode == 0, got.stderr
    isa, _, info = got.stdout.partition(" ")
    assert isa == "AVX2"
    record = eval(info)  # a dict literal
    assert record["isa"] == "AVX2" and record["mkl_cbwr"] == "AVX2" and record["deterministic"] is True
    assert record["torch"] and record["threads"] >= 1 and record["cpu"]


@pytest.mark.skipif(not AVX512, reason="needs a CPU whose best kernels are not AVX2")
def test_a_process_whose_torch_already_chose_its_kernels_is_refused_in_one_line():
    got = _py("import torch\ntorch.ones(4).softmax(0)\nfrom agentbench_crbc.trainer.kernels import check_pinned\n"
              "check_pinned()")
    assert got.returncode == 1
    assert "deterministic = true: torch already chose AVX512 kernels in this process" in got.stderr


def test_deterministic_off_keeps_the_hash_runs_had_before_the_key_and_on_changes_it():
    import hashlib
    import json

    from agentbench_crbc.trainer.config import to_dict

    cfg = load_config()
    d = to_dict(cfg)
    for k in ("out_dir", "progress", "tensorboard", "wandb", "wandb_mode", "wandb_project", "exp_name",
              "deterministic"):
        d.pop(k)
    for key in ("rollout.env_backend", "rollout.remote_urls", "rollout.ray_address", "rollout.env_workers"):
        d["rollout"].pop(key.split(".")[1])
    before_the_key = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]
    assert cfg.deterministic is False and config_hash(cfg) == before_the_key
    assert config_hash(load_config(overrides=["deterministic=true"])) != before_the_key


def test_abc_bench_pins_unless_the_last_set_turns_it_off():
    assert pinned([]) and pinned(["seed=1"]) and pinned(["deterministic=false", "deterministic=true"])
    assert not pinned(["deterministic=false"]) and not pinned(["deterministic = 0"])
