"""Eq. 15 loss: gradient at ratio 1, clipping bounds, KL >= 0, step and token weights, micro-batch sums."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer.loss import LossConfig, kl_low_var, policy_loss  # noqa: E402

torch.set_num_threads(1)


def _batch(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 6, generator=g, dtype=torch.float64)
    mask = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]], dtype=torch.bool)
    adv = torch.tensor([1.5, -0.7, 2.0], dtype=torch.float64)
    return logits, mask, adv


NO_KL = LossConfig(kl_coef=0.0)


def _step_mean(mask: torch.Tensor) -> torch.Tensor:
    """Every step alike: ``1 / B`` each."""
    return torch.full((mask.shape[0],), 1.0 / mask.shape[0], dtype=torch.float64)


def test_gradient_at_ratio_one_is_advantage_weighted_logprob_gradient():
    theta, mask, adv = _batch()
    theta = theta.clone().requires_grad_(True)
    logp = torch.nn.functional.logsigmoid(theta)  # any differentiable log-prob
    out = policy_loss(logp, logp.detach(), adv, mask, _step_mean(mask), NO_KL)
    (g_loss,) = torch.autograd.grad(out.loss, theta, retain_graph=True)
    # reference: -(1/N) sum_steps (1/|y_i|) sum_tokens A_i * grad log p
    m = mask.double()
    target = -(adv[:, None] * logp * m).sum(-1) / m.sum(-1)
    (g_ref,) = torch.autograd.grad(target.mean(), theta)
    torch.testing.assert_close(g_loss, g_ref)
    assert out.clip_frac == 0.0 and out.ratio_max == pytest.approx(1.0)


def test_token_mean_weights_every_token_equally():
    theta, mask, adv = _batch(1)
    theta.requires_grad_(True)
    logp = torch.nn.functional.logsigmoid(theta)
    tokens = mask.sum(-1).double()
    out = policy_loss(logp, logp.detach(), adv, mask, tokens / tokens.sum(), NO_KL)
    (g,) = torch.autograd.grad(out.loss, theta, retain_graph=True)
    (g_ref,) = torch.autograd.grad(-(adv[:, None] * logp * mask).sum() / mask.sum(), theta)
    torch.testing.assert_close(g, g_ref)


@pytest.mark.parametrize("adv_sign", [1.0, -1.0])
def test_clipping_bounds_the_objective_and_zeroes_the_gradient(adv_sign):
    old = torch.zeros(1, 4, dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    adv = torch.tensor([adv_sign], dtype=torch.float64)
    # ratios 0.5, 0.9, 1.1, 2.0 with eps = 0.2
    logp = torch.log(torch.tensor([[0.5, 0.9, 1.1, 2.0]], dtype=torch.float64)).requires_grad_(True)
    out = policy_loss(logp, old, adv, mask, torch.ones(1, dtype=torch.float64), LossConfig(clip_ratio=0.2, kl_coef=0.0))
    (g,) = torch.autograd.grad(out.loss, logp)
    obj = -out.pg * 4  # summed surrogate over the 4 tokens
    r = torch.tensor([0.5, 0.9, 1.1, 2.0], dtype=torch.float64)
    expect = torch.minimum(r * adv_sign, r.clamp(0.8, 1.2) * adv_sign).sum()
    assert obj == pytest.approx(float(expect))
    if adv_sign > 0:  # A > 0: ratio 2.0 is clipped (no gradient), 0.5 is not (pessimistic bound)
        assert g[0, 3] == 0 and g[0, 0] != 0
    else:  # A < 0: ratio 0.5 is clipped, 2.0 keeps its gradient
        assert g[0, 0] == 0 and g[0, 3] != 0
    assert g[0, 1] != 0 and g[0, 2] != 0
    assert out.clip_frac == pytest.approx(0.5)


def test_kl_low_variance_is_nonnegative_and_zero_at_equality():
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(1000, generator=g) * 3, torch.randn(1000, generator=g) * 3
    kl = kl_low_var(a, b)
    assert (kl >= 0).all()
    assert torch.allclose(kl_low_var(a, a), torch.zeros_like(a))
    # unbiased for KL(p||q) when sampling from p: two Bernoulli-like checks on a categorical
    p = torch.tensor([0.7, 0.2, 0.1])
    q = torch.tensor([0.4, 0.4, 0.2])
    est = (p * kl_low_var(p.log(), q.log())).sum()
    assert float(est) == pytest.approx(float((p * (p / q).log()).sum()), rel=1e-5)


def test_kl_term_pulls_towards_reference():
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    ref = torch.tensor([[-1.5, -1.0]])
    out = policy_loss(logp, logp.detach(), torch.zeros(1), torch.ones(1, 2, dtype=torch.bool), torch.ones(1),
                      LossConfig(kl_coef=0.5), ref_logp=ref)
    assert out.kl > 0
    out.loss.backward()
    # gradient descent moves logp towards ref: d/dlogp of k3 = 1 - exp(ref - logp)
    assert logp.grad[0, 0] > 0 and logp.grad[0, 1] < 0


def test_micro_batches_with_the_batch_weights_sum_to_full_batch():
    theta, mask, adv = _batch(2)
    theta.requires_grad_(True)
    logp = torch.nn.functional.logsigmoid(theta)
    w = _step_mean(mask)
    full = policy_loss(logp, logp.detach(), adv, mask, w, NO_KL).loss.detach()
    parts = sum(policy_loss(logp[i:i + 1], logp[i:i + 1].detach(), adv[i:i + 1], mask[i:i + 1], w[i:i + 1],
                            NO_KL).loss for i in range(3))
    torch.testing.assert_close(full, parts)
