"""``optim.dedup_prompts``: one forward per distinct context, every step's log-probs read from it, the same loss and
gradient as one forward per distinct (prompt, response)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from agentbench_crbc.rollout.engines import models  # noqa: E402
from agentbench_crbc.trainer.config import OptimConfig  # noqa: E402
from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update  # noqa: E402

torch.set_num_threads(1)

TOK = models.tiny_tokenizer()
#: constrained answers like the CPU demo's: a forced tag, the move (a choice), a forced closing tag and end token;
#: and a set that branches twice (positions 1 and 2)
MOVES = tuple((7, m, 9, 4) for m in (11, 12, 13, 14))
LATE = ((7, 1, 9, 4), (7, 2, 9, 4), (7, 2, 8, 4))


def _model(seed: int = 0):
    return models.tiny_qwen2(TOK, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                             seed=seed).float()


class _Recorder(torch.optim.SGD):
    """SGD that keeps the gradient of every step."""

    def __init__(self, params, lr: float):
        self.params_ = list(params)
        super().__init__(self.params_, lr=lr)
        self.grads: list[list[torch.Tensor]] = []

    def step(self, closure=None):
        self.grads.append([p.grad.detach().clone() for p in self.params_])
        return super().step(closure)


def _run(samples, dedup: bool, *, lr: float = 0.0, epochs: int = 1, ratio: str = "token", kl: bool = False):
    model = _model()
    ref = _model(seed=1).eval() if kl else None
    opt = _Recorder(model.parameters(), lr)
    cfg = OptimConfig(lr=1.0, kl_coef=0.1 if kl else 0.0, grad_clip=0.0, ppo_epochs=epochs, mini_batch_size=5,
                      micro_batch=64, ratio=ratio, loss_agg="traj-mean", entropy_coef=0.01, kl_end=True,
                      dedup_prompts=dedup)
    logs = ppo_update(model, opt, samples, cfg, UpdateContext(pad_id=0, ref=ref), rng=np.random.default_rng(0))
    return logs, opt.grads, [p.detach().clone() for p in model.parameters()]


def _same(a, b, tol: float = 1e-6):
    (la, ga, wa), (lb, gb, wb) = a, b
    assert len(ga) == len(gb) > 0
    for step_a, step_b in zip(ga, gb, strict=True):
        for x, y in zip(step_a, step_b, strict=True):
            torch.testing.assert_close(x, y, rtol=tol, atol=tol)
    for x, y in zip(wa, wb, strict=True):
        torch.testing.assert_close(x, y, rtol=tol, atol=tol)
    for k in ("loss", "pg_loss", "kl", "entropy", "approx_kl", "approx_kl_end", "clip_frac", "ratio_max",
              "ratio_min"):
        assert la[k] == pytest.approx(lb[k], rel=1e-5, abs=1e-6), k


_prompt = st.lists(st.integers(20, 300), min_size=1, max_size=6).map(tuple)


@st.composite
def _steps(draw):
    """Steps that repeat prompts and whole (prompt, answer) pairs: constrained answers (two choice sets) and free
    text (one in three), in groups of trajectories."""
    prompts = draw(st.lists(_prompt, min_size=1, max_size=4))
    out = []
    for i in range(draw(st.integers(2, 14))):
        p = draw(st.sampled_from(prompts))
        kind = draw(st.sampled_from(("moves", "late", "free")))
        if kind == "free":
            y = tuple(draw(st.lists(st.integers(3, 300), min_size=1, max_size=4)))
            choices = ()
        else:
            choices = MOVES if kind == "moves" else LATE
            y = draw(st.sampled_from(choices))
        out.append(StepSample(p, y, draw(st.floats(-2, 2)), i % 3, i % 2, choices=choices))
    return out


@pytest.mark.slow
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=_steps(), ratio=st.sampled_from(("token", "sequence")))
def test_dedup_gives_the_plain_gradient_of_every_step(samples, ratio):
    # lr 0: both paths see the same weights at every mini-batch; each optimizer step's gradient and the logs agree
    _same(_run(samples, False, ratio=ratio), _run(samples, True, ratio=ratio))


@pytest.mark.slow
def test_dedup_follows_the_plain_path_over_moving_epochs_with_the_kl_term():
    rng = np.random.default_rng(3)
    prompts = [tuple(rng.integers(20, 300, 9).tolist()) for _ in range(3)]
    samples = [StepSample(prompts[i % 3], MOVES[int(rng.integers(4))] if i % 4 else (5, 6, 7), float(rng.normal()),
                          i % 4, i % 2, choices=MOVES if i % 4 else ()) for i in range(16)]
    # the weights move (3 epochs of 4 steps): float rounding of the first step compounds in the later ones, so
    # the match is to 1e-4 here (the steps at equal weights match to 1e-6 above)
    _same(_run(samples, False, lr=0.5, epochs=3, kl=True), _run(samples, True, lr=0.5, epochs=3, kl=True), 1e-4)


def test_every_answer_to_a_prompt_shares_one_forward_row():
    # 8 steps: 2 prompts x the 4 constrained answers (twice each) -> the plain path runs 8 distinct sequences,
    # the dedup path 2 contexts (prompt + the forced <action> tag), in one mini-batch
    samples = [StepSample((30 + k, 40, 50), MOVES[i % 4], 1.0 - i % 3, i % 2, i % 4, choices=MOVES)
               for k in range(2) for i in range(8)]
    rows, grads = {}, {}
    for dedup in (False, True):
        model = _model()
        seen: list[torch.Size] = []
        model.register_forward_pre_hook(lambda _m, _a, kw, seen=seen: seen.append(kw["input_ids"].shape),
                                        with_kwargs=True)
        cfg = OptimConfig(lr=0.0, kl_coef=0.0, grad_clip=0.0, ppo_epochs=1, mini_batch_size=64, micro_batch=64,
                          entropy_coef=0.01, dedup_prompts=dedup)
        opt = _Recorder(model.parameters(), 0.0)
        ppo_update(model, opt, samples, cfg, UpdateContext(pad_id=0))
        rows[dedup], grads[dedup] = seen, opt.grads[0]
    assert [tuple(s) for s in rows[False]] == [(8, 7)] * 2  # the old pass and the training pass: 8 x (3 + 4)
    assert [tuple(s) for s in rows[True]] == [(2, 4)] * 2  # 2 x (3 + the forced tag)
    for a, b in zip(grads[False], grads[True], strict=True):  # and the gradient is the plain one
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
