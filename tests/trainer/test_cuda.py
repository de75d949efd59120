"""On a real CUDA device (marked gpu: the smoke run collects them): the PPO update with KL in bf16, the log-probs
and the hf engine, all on the GPU; the first mini-batch's ratio is 1."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.rollout.engines import models  # noqa: E402
from agentbench_crbc.rollout.engines.hf import HFEngine  # noqa: E402
from agentbench_crbc.rollout.episodes.base import SamplingParams  # noqa: E402
from agentbench_crbc.trainer.config import OptimConfig  # noqa: E402
from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update, step_logprobs  # noqa: E402

pytestmark = pytest.mark.gpu


def test_ppo_update_with_kl_on_cuda_in_bf16():
    tok = models.tiny_tokenizer()
    model = models.tiny_qwen2(tok).cuda()
    ref = models.tiny_qwen2(tok).cuda().to(torch.bfloat16).eval()
    samples = [StepSample((1, 2, 3), (4, 5), 1.0, 0, 0), StepSample((1, 6), (7, 8, 9), -1.0, 0, 1)]
    cfg = OptimConfig(kl_coef=0.05, micro_batch=2, mini_batch_size=2, ppo_epochs=1)
    logs = ppo_update(model, torch.optim.AdamW(model.parameters(), lr=1e-5), samples, cfg, UpdateContext(pad_id=0,
                      ref=ref, device="cuda", autocast_dtype=torch.bfloat16), rng=np.random.default_rng(0))
    assert logs["optimizer_steps"] == 1 and np.isfinite(logs["loss"])
    assert abs(logs["ratio_max"] - 1.0) < 1e-2 and abs(logs["ratio_min"] - 1.0) < 1e-2
    assert all(p.grad is None for p in model.parameters())
    lps = step_logprobs(model, samples, pad_id=0, device="cuda")
    assert [len(x) for x in lps] == [2, 3]


def test_hf_engine_generates_on_cuda():
    tok = models.tiny_tokenizer()
    eng = HFEngine(models.tiny_qwen2(tok).cuda(), tok, autocast_dtype=torch.bfloat16)
    out = eng.generate([[1, 2, 3], [4, 5]], SamplingParams(temperature=1.0, max_tokens=4, seed=0))
    assert all(len(c.token_ids) == len(c.logprobs) > 0 for c in out)
