"""Device placement without a GPU: the PPO update, the loss and the log-prob paths on a virtual device (``meta``
backed by the CPU), so any tensor built on the CPU and mixed in raises."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.rollout.engines import models  # noqa: E402
from agentbench_crbc.trainer.config import OptimConfig  # noqa: E402
from agentbench_crbc.trainer.loss import (  # noqa: E402
    LossConfig,
    policy_loss,
    response_logprobs,
    token_logprobs,
)
from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update, step_logprobs  # noqa: E402

from .virtual_device import DEVICE, VirtualDevice  # noqa: E402

torch.set_num_threads(1)


def _model(tok, seed: int = 0):
    return models.tiny_qwen2(tok, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                             seed=seed).float().eval()


def _samples() -> list[StepSample]:
    return [StepSample((1, 2, 3), (4, 5), 1.0, 0, 0), StepSample((1, 2, 3), (4, 5), -0.5, 0, 1),
            StepSample((1, 6), (7, 8, 9), 0.25, 1, 0), StepSample((2, 6, 3, 3), (5,), -1.0, 1, 1)]


@pytest.fixture(scope="module")
def tok():
    return models.tiny_tokenizer()


@pytest.mark.parametrize("ratio", ["token", "sequence"])
def test_ppo_update_with_kl_runs_on_the_device_and_gives_the_cpu_numbers(tok, ratio):
    cfg = OptimConfig(lr=1e-2, kl_coef=0.05, entropy_coef=0.01, grad_clip=1.0, ppo_epochs=2, micro_batch=2,
                      mini_batch_size=2, ratio=ratio)
    cpu, ref_cpu = _model(tok), _model(tok)  # SGD: AdamW's first step is sign(g), ill-conditioned near g = 0
    logs_cpu = ppo_update(cpu, torch.optim.SGD(cpu.parameters(), lr=1e-2), _samples(), cfg, UpdateContext(pad_id=0,
                          ref=ref_cpu), rng=np.random.default_rng(0))
    virt, ref_v = _model(tok), _model(tok)
    with VirtualDevice():
        virt, ref_v = virt.to(DEVICE), ref_v.to(DEVICE)
        logs = ppo_update(virt, torch.optim.SGD(virt.parameters(), lr=1e-2), _samples(), cfg, UpdateContext(pad_id=0,
                          ref=ref_v, device=DEVICE), rng=np.random.default_rng(0))
        lps = step_logprobs(virt, _samples(), pad_id=0, device=DEVICE, micro_batch=3)
        after = {n: p.detach().cpu().clone() for n, p in virt.named_parameters()}
        assert all(p.grad is None for p in virt.parameters())  # gradients freed before an engine wakes
    for n, p in cpu.named_parameters():
        torch.testing.assert_close(after[n], p.detach(), rtol=1e-4, atol=1e-6, msg=n)
    assert logs["optimizer_steps"] == logs_cpu["optimizer_steps"] == 4
    assert abs(logs["loss"] - logs_cpu["loss"]) < 1e-4
    assert [len(x) for x in lps] == [2, 2, 3, 1] and all(isinstance(x, np.ndarray) for x in lps)


def test_loss_and_logprob_paths_on_the_device(tok):
    model = _model(tok)
    ids = torch.tensor([[1, 2, 3, 4, 5, 0], [1, 6, 7, 8, 9, 2]])
    att = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    resp = torch.zeros_like(ids, dtype=torch.bool)
    resp[:, 3:5] = True
    with torch.no_grad():  # (a parameter with a grad graph alive cannot be swapped onto the device)
        want, _ = response_logprobs(model, ids, att, resp, entropy=True)
    with VirtualDevice():
        m = model.to(DEVICE)
        lp, ent = response_logprobs(m, ids.to(DEVICE), att.to(DEVICE), resp.to(DEVICE), entropy=True)
        tl, _ = token_logprobs(m, ids.to(DEVICE), att.to(DEVICE), entropy=True)
        assert lp.device == DEVICE and ent is not None and ent.device == DEVICE and tl.device == DEVICE
        out = policy_loss(lp, lp.detach(), torch.tensor([1.0, -1.0]).to(DEVICE), resp.to(DEVICE),
                          torch.full((2,), 0.5, device=DEVICE), LossConfig(entropy_coef=0.01),
                          ref_logp=lp.detach(), entropy=ent)
        out.loss.backward()
        got = lp.detach().cpu()
    torch.testing.assert_close(got, want.detach(), rtol=1e-5, atol=1e-6)
    assert out.ratio_max == out.ratio_min == 1.0


def test_policy_loss_moves_cpu_advantages_to_the_log_probs_device():
    with VirtualDevice():
        lp = torch.zeros((2, 3), device=DEVICE, requires_grad=True)
        mask = torch.ones((2, 3), dtype=torch.bool, device=DEVICE)
        out = policy_loss(lp, lp.detach(), torch.tensor([1.0, -1.0]), mask, torch.tensor([0.5, 0.5]), LossConfig())
        out.loss.backward()
    assert out.pg == 0.0

