"""The CPU demo computes in fp32 on every CPU, and a run says which precision ran and why."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer.config import load_config  # noqa: E402
from agentbench_crbc.trainer.eval import precision  # noqa: E402
from agentbench_crbc.trainer.policy import compute_dtype  # noqa: E402


def test_cpu_demo_is_fp32_whatever_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config()
    assert cfg.preset == "cpu-demo" and cfg.model.dtype == "fp32"
    # even on a CPU that computes bf16 natively, the demo stays on the fp32 path
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)
    assert compute_dtype(cfg.model.dtype, torch.device("cpu")) is None
    assert compute_dtype("auto", torch.device("cpu")) is torch.bfloat16  # the opt-in still probes


@pytest.mark.parametrize(("dtype", "autocast", "says"), [
    ("fp32", None, "fp32 (model.dtype=fp32)"),
    ("auto", None, "fp32 (model.dtype=auto: the device lacks native bf16)"),
    ("auto", torch.bfloat16, "bf16 autocast (model.dtype=auto: the device computes bf16 natively)"),
    ("bf16", torch.bfloat16, "bf16 autocast (model.dtype=bf16)"),
])
def test_precision_names_what_ran_and_why(dtype: str, autocast: object, says: str) -> None:
    assert precision(load_config(overrides=[f"model.dtype={dtype}"]), autocast) == says
