"""PPO mini-batches, the Eq. 15 aggregations, fp32 master weights, the group gate and step-identity alignment."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc import hookimpl  # noqa: E402
from agentbench_crbc.errors import AlignmentError  # noqa: E402
from agentbench_crbc.host import Host, get_plugin_manager, reset_host  # noqa: E402
from agentbench_crbc.rollout.engines import models  # noqa: E402
from agentbench_crbc.rollout.episodes.base import RolloutGroup, RolloutStep, RolloutTrajectory  # noqa: E402
from agentbench_crbc.trainer.config import OptimConfig, load_config  # noqa: E402
from agentbench_crbc.trainer.loss import LossConfig, policy_loss, token_logprobs  # noqa: E402
from agentbench_crbc.trainer.update import (  # noqa: E402
    StepSample,
    UpdateContext,
    build_samples,
    compute_advantages,
    ppo_update,
    samples_from_groups,
    step_weights,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return models.tiny_tokenizer()


def _model(tok, seed: int = 0):
    return models.tiny_qwen2(tok, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                             seed=seed).float()


def _samples() -> list[StepSample]:
    """Two groups: 'a' with three steps (responses of 1, 2 and 1 tokens; two in its trajectory 0, one in its
    trajectory 1), 'b' with one step of 4 tokens."""
    return [StepSample((1, 2, 3), (4,), 1.0, "a", 0), StepSample((1, 2, 5), (6, 7), -0.5, "a", 0),
            StepSample((1, 9, 3), (4,), 2.0, "a", 1), StepSample((8, 2), (4, 5, 6, 7), -1.0, "b", 0)]


# -- Eq. 15 aggregation: a hand-computed two-group example ---------------------------------------------------------
@pytest.mark.parametrize(("agg", "want"), [
    ("step-mean", [1 / 4, 1 / 4, 1 / 4, 1 / 4]),
    ("token-mean", [1 / 8, 2 / 8, 1 / 8, 4 / 8]),
    ("group-mean", [1 / 6, 1 / 6, 1 / 6, 1 / 2]),  # 1 / (K * sum_i T_i): K = 2 groups, T_a = 3, T_b = 1
    ("traj-mean", [1 / 6, 1 / 6, 1 / 3, 1 / 3]),  # 1 / (M * T_i): M = 3 trajectories of 2, 1 and 1 steps
])
def test_step_weights_two_groups(agg, want):
    np.testing.assert_allclose(step_weights(_samples(), agg), want)


@pytest.mark.parametrize(("agg", "want"), [
    # at ratio 1 each step's surrogate is -A (token mean of -A over its tokens): loss = -sum_i w_i A_i
    ("step-mean", -(1.0 - 0.5 + 2.0 - 1.0) / 4),
    ("token-mean", -(1.0 * 1 - 0.5 * 2 + 2.0 * 1 - 1.0 * 4) / 8),
    ("group-mean", -((1.0 - 0.5 + 2.0) / 3 + (-1.0) / 1) / 2),
    ("traj-mean", -((1.0 - 0.5) / 2 + 2.0 / 1 + (-1.0) / 1) / 3),
])
@pytest.mark.parametrize("ratio", ["token", "sequence"])
def test_eq15_loss_value_for_every_aggregation(agg, want, ratio):
    s = _samples()
    mask = torch.zeros(4, 4, dtype=torch.bool)
    for i, x in enumerate(s):
        mask[i, :len(x.response_ids)] = True
    logp = torch.full((4, 4), -0.7, dtype=torch.float64)
    adv = torch.tensor([x.advantage for x in s], dtype=torch.float64)
    w = torch.tensor(step_weights(s, agg))
    out = policy_loss(logp, logp, adv, mask, w, LossConfig(kl_coef=0.0, ratio=ratio))
    assert float(out.loss) == pytest.approx(want)


def test_sequence_ratio_is_one_per_step_and_clipped_once():
    mask = torch.tensor([[True, True, False]])
    old = torch.zeros(1, 3, dtype=torch.float64)
    # token ratios 1.1 and 1.15 (both inside 0.8..1.2), step ratio 1.265 (outside): only the step ratio clips
    logp = torch.log(torch.tensor([[1.1, 1.15, 9.0]], dtype=torch.float64)).requires_grad_(True)
    adv = torch.tensor([1.0], dtype=torch.float64)
    one = torch.ones(1, dtype=torch.float64)
    tok = policy_loss(logp, old, adv, mask, one, LossConfig(kl_coef=0.0, ratio="token"))
    seq = policy_loss(logp, old, adv, mask, one, LossConfig(kl_coef=0.0, ratio="sequence"))
    assert tok.clip_frac == 0.0 and seq.clip_frac == 1.0
    assert seq.ratio_max == pytest.approx(1.1 * 1.15)
    assert float(seq.loss.detach()) == pytest.approx(-1.2)  # clipped at 1 + eps, A = 1
    (g,) = torch.autograd.grad(seq.loss, logp)
    assert torch.count_nonzero(g) == 0  # clipped with A > 0: no gradient


# -- mini-batches ----------------------------------------------------------------------------------------------------
def _cfg(**kw) -> OptimConfig:
    base = {"lr": 1.0, "kl_coef": 0.0, "grad_clip": 0.0, "clip_ratio": 0.2, "ppo_epochs": 1, "micro_batch": 64,
            "mini_batch_size": 256}
    return OptimConfig(**{**base, **kw})


def _grad_of(model, fn) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    fn().backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


def _sgd_delta(model, samples, cfg, *, rng_seed=0, pad_id=0) -> dict[str, torch.Tensor]:
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    ppo_update(model, opt, samples, cfg, UpdateContext(pad_id=pad_id), rng=np.random.default_rng(rng_seed))
    return {n: before[n] - p.detach() for n, p in model.named_parameters()}


def _manual_loss(model, samples, agg, ratio, pad_id=0):
    """Eq. 15 at ratio 1 written out: -sum_i w_i A_i * (token mean | sum) of log pi(y_i | h_i)."""
    w = step_weights(samples, agg)
    total = 0.0
    for wi, s in zip(w, samples, strict=True):
        ids = torch.tensor([s.prompt_ids + s.response_ids])
        lp, _ = token_logprobs(model, ids, torch.ones_like(ids))
        r = lp[0, len(s.prompt_ids):]
        total = total - wi * s.advantage * (r.sum() if ratio == "sequence" else r.mean())
    return total


@pytest.mark.parametrize("agg", ["step-mean", "token-mean", "group-mean", "traj-mean"])
@pytest.mark.parametrize("ratio", ["token", "sequence"])
def test_one_mini_batch_step_is_the_full_eq15_gradient(tok, agg, ratio):
    samples = _samples()
    ref_model = _model(tok)
    want = _grad_of(ref_model, lambda: _manual_loss(ref_model, samples, agg, ratio))
    for micro in (1, 64):  # micro-batches change memory, not the gradient
        got = _sgd_delta(_model(tok), samples, _cfg(loss_agg=agg, ratio=ratio, micro_batch=micro))
        for n, g in want.items():
            torch.testing.assert_close(got[n], g, rtol=1e-4, atol=1e-6)


class _Recorder(torch.optim.SGD):
    """SGD at lr 0 that keeps the gradient of every step (the policy does not move, so ratios stay 1)."""

    def __init__(self, params):
        self.params_ = list(params)
        super().__init__(self.params_, lr=0.0)
        self.grads: list[list[torch.Tensor]] = []

    def step(self, closure=None):
        self.grads.append([p.grad.detach().clone() for p in self.params_])
        return super().step(closure)


def test_each_mini_batch_step_is_its_own_steps_gradient(tok):
    samples = _samples()
    model = _model(tok)
    opt = _Recorder(model.parameters())
    ppo_update(model, opt, samples, _cfg(loss_agg="group-mean", mini_batch_size=2), UpdateContext(pad_id=0),
               rng=np.random.default_rng(0))
    assert len(opt.grads) == 2
    w = step_weights(samples, "group-mean")
    for mb, got in zip(np.array_split(np.random.default_rng(0).permutation(4), 2), opt.grads, strict=True):
        # the mini-batch's share of Eq. 15: sum_i w_i l_i / sum_i w_i over its steps, w from the whole batch
        def mb_loss(mb=mb):
            total = 0.0
            for i in mb:
                s = samples[int(i)]
                ids = torch.tensor([s.prompt_ids + s.response_ids])
                lp, _ = token_logprobs(model, ids, torch.ones_like(ids))
                total = total - w[i] / w[mb].sum() * s.advantage * lp[0, len(s.prompt_ids):].mean()
            return total

        want = _grad_of(model, mb_loss)
        for (n, _), g in zip(model.named_parameters(), got, strict=True):
            torch.testing.assert_close(g, want[n], rtol=1e-4, atol=1e-7)


def test_second_mini_batch_sees_moved_ratios_and_clips(tok):
    base = _samples()[:2]
    samples = base * 4  # both mini-batches hold the same sequences: the second step runs on a moved policy
    model = _model(tok)
    opt = torch.optim.SGD(model.parameters(), lr=5.0)
    logs = ppo_update(model, opt, samples, _cfg(mini_batch_size=4), UpdateContext(pad_id=0),
                      rng=np.random.default_rng(1))
    assert logs["optimizer_steps"] == 2
    assert logs["ratio_max"] > 1.2 or logs["ratio_min"] < 0.8  # moved beyond the clip range
    assert logs["clip_frac"] > 0 and logs["approx_kl"] > 0
    fresh = _model(tok)
    one = ppo_update(fresh, torch.optim.SGD(fresh.parameters(), lr=5.0), samples, _cfg(mini_batch_size=8),
                     UpdateContext(pad_id=0), rng=np.random.default_rng(1))
    assert one["optimizer_steps"] == 1 and one["clip_frac"] == 0 and one["ratio_max"] == pytest.approx(1.0)


def _k3_by_hand(before, after, samples, agg) -> float:
    """k3 KL(pi_before || pi_after) per step (mean over its response tokens), weighed by Eq. 15's step weights."""
    w = step_weights(samples, agg)
    total = 0.0
    for wi, s in zip(w, samples, strict=True):
        ids = torch.tensor([s.prompt_ids + s.response_ids])
        with torch.no_grad():
            old, _ = token_logprobs(before, ids, torch.ones_like(ids))
            new, _ = token_logprobs(after, ids, torch.ones_like(ids))
        d = (new - old)[0, len(s.prompt_ids):].clamp(-20, 20)
        total += wi * float((d.exp() - 1 - d).clamp(max=10).mean())  # per token, clamped at 10 like the loss
    return total / float(w.sum())


@pytest.mark.parametrize("lr", [0.0, 0.5, 5.0])
def test_approx_kl_end_is_the_whole_updates_move(tok, lr):
    samples = _samples()
    before, model = _model(tok), _model(tok)
    logs = ppo_update(model, torch.optim.SGD(model.parameters(), lr=lr), samples, _cfg(mini_batch_size=2,
                      ppo_epochs=2, loss_agg="traj-mean", kl_end=True), UpdateContext(pad_id=0),
                      rng=np.random.default_rng(0))
    want = _k3_by_hand(before, model, samples, "traj-mean")
    assert logs["approx_kl_end"] == pytest.approx(want, rel=1e-3, abs=1e-7)
    assert (logs["approx_kl_end"] > 1e-3) == (lr > 0)  # measured after the last step, not before the first


@pytest.mark.parametrize(("kl_end", "target_kl", "logged"), [(False, 0.0, False), (True, 0.0, True),
                                                              (False, 5.0, True)])
def test_approx_kl_end_is_measured_only_when_asked_or_guarded(tok, kl_end, target_kl, logged):
    # #50 item 2: without the guard nothing reads it: no pass runs and no number is logged for it
    model = _model(tok)
    forwards = []
    model.register_forward_pre_hook(lambda *_: forwards.append(1))
    logs = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.1), _samples(),
                      _cfg(mini_batch_size=4, kl_end=kl_end, target_kl=target_kl), UpdateContext(pad_id=0))
    assert ("approx_kl_end" in logs) == logged
    guard = 1 if target_kl > 0 else 0  # the guard's own pass after its one step
    assert len(forwards) == 2 + guard + (1 if logged else 0)  # the old pass, the training pass (+ the end pass)


def test_epochs_times_mini_batches_optimizer_steps(tok):
    samples = _samples() * 3  # 12 steps
    model = _model(tok)
    logs = ppo_update(model, torch.optim.SGD(model.parameters(), lr=0.0), samples, _cfg(ppo_epochs=2,
                      mini_batch_size=5), UpdateContext(pad_id=0))
    assert logs["optimizer_steps"] == 2 * 3  # ceil(12 / 5) = 3 per epoch
    assert logs["n_sequences"] == 4  # 12 steps, 4 distinct token sequences: each forwarded once per pass


# -- precision -------------------------------------------------------------------------------------------------------
def test_fp32_master_weights_move_at_lr_1e6_under_bf16_autocast():
    cfg = load_config(overrides=["model.dtype=bf16", "optim.lr=1e-6", "model.tiny_hidden=32", "model.tiny_layers=1"])
    from agentbench_crbc.trainer.loop import build_policy, compute_dtype

    model, tk, _ = build_policy(cfg, torch.device("cpu"))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert compute_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    samples = [StepSample((1, 2, 3, 4), (5, 6), 1.0, "a"), StepSample((1, 2, 7), (8, 9, 10), -1.0, "a"),
               StepSample((3, 2, 7), (8, 5), 0.5, "b")]

    def changed(m, dtype):
        before = [p.detach().clone() for p in m.parameters()]
        opt = torch.optim.AdamW(m.parameters(), lr=1e-6, weight_decay=0.0)
        for _ in range(10):
            ppo_update(m, opt, samples, cfg.optim, UpdateContext(pad_id=tk.pad_token_id, autocast_dtype=dtype))
        n = sum(p.numel() for p in before)
        return sum(int((p.detach() != b).sum()) for p, b in zip(m.parameters(), before, strict=True)) / n

    assert changed(model, torch.bfloat16) >= 0.9
    pure = build_policy(cfg, torch.device("cpu"))[0].to(torch.bfloat16)  # the failure fp32 masters avoid
    assert changed(pure, None) < 0.5


# -- advantages in input order, paired with their own steps ---------------------------------------------------------
def _group(gid: str, lengths, success) -> RolloutGroup:
    trajs = []
    for n, ok in zip(lengths, success, strict=True):
        steps = tuple(RolloutStep(f"s{t}", "a", 0.0, True, prompt_ids=(1, 2, t), response_ids=(4 + t,),
                                  response_text="x") for t in range(n))
        trajs.append(RolloutTrajectory(steps, ok, 1.0 if ok else 0.0))
    return RolloutGroup(gid, tuple(trajs), env_id="toy", seed=0)


def test_advantages_come_back_in_input_order_and_zip_with_the_steps():
    groups = [_group("g0", [2, 3], [True, False]), _group("g1", [1, 2], [False, True])]
    adv = compute_advantages(groups, "grpo", {})
    assert adv.dtype == np.float64 and adv.shape == (8,)
    assert (adv[:2] > 0).all() and (adv[2:5] < 0).all() and (adv[5:6] < 0).all() and (adv[6:] > 0).all()
    samples = samples_from_groups(groups, adv)
    assert [s.advantage for s in samples] == adv.tolist()
    assert [(s.group, s.rollout, s.prompt_ids[2]) for s in samples] == [
        (0, 0, 0), (0, 0, 1), (0, 1, 0), (0, 1, 1), (0, 1, 2), (1, 0, 0), (1, 1, 0), (1, 1, 1)]
    with pytest.raises(AlignmentError, match="7 advantages for 8 steps"):
        samples_from_groups(groups, adv[:-1])
    with pytest.raises(AlignmentError, match="8 advantages for 5 steps"):
        samples_from_groups(groups[:1], adv)


def test_an_advantage_can_only_pair_with_its_step(monkeypatch):
    from agentbench_crbc.credit import batch as batch_mod
    from agentbench_crbc.trainer import update

    groups = [_group("g0", [2, 3], [True, False]), _group("g1", [3, 2], [False, True])]
    real = batch_mod.StepBatch.from_groups
    # same step count, trajectories in another order: a count check alone would pass
    monkeypatch.setattr(update.StepBatch, "from_groups", lambda gs: real(gs[::-1]))
    with pytest.raises(AlignmentError, match="does not match its 2 groups of 4 trajectories"):
        compute_advantages(groups, "grpo", {})
    monkeypatch.setattr(update.StepBatch, "from_groups", real)
    monkeypatch.setattr(update, "assign_batch", lambda method, batch, **o: np.zeros(batch.n_steps - 1))
    with pytest.raises(AlignmentError, match=r"returned \(9,\) advantages for 10 steps"):
        compute_advantages(groups, "grpo", {})


def test_trainer_advantages_equal_the_records_path_for_every_method():
    """The update hands the runner's groups to the credit batch directly; every built-in method gives the numbers
    it gave through credit records (Sokoban's tuple anchors, invalid actions, truncations)."""
    from agentbench_crbc.credit import assign_batch
    from agentbench_crbc.credit.batch import StepBatch
    from agentbench_crbc.host import get_host
    from agentbench_crbc.rollout.engines.baselines import RandomPolicy
    from agentbench_crbc.rollout.episodes.runner import RolloutRunner, RunnerConfig

    with RolloutRunner("abc/SokobanText-v0", RandomPolicy(seed=4, invalid_rate=0.1),
        config=RunnerConfig(group_size=4, max_steps=10, num_workers=0)) as r:
        groups = r.collect([0, 1, 2])
    records = StepBatch.from_records([rec for g in groups for rec in g.to_records()])
    for method in get_host().credit.names():
        np.testing.assert_array_equal(compute_advantages(groups, method, {}), assign_batch(method, records),
                                      err_msg=method)


# -- the group gate in training --------------------------------------------------------------------------------------
class _FirstGroupGate:
    """Fires once, on the first group it is asked about (the runner asks groups in order)."""

    def __init__(self) -> None:
        self.fired = False

    @hookimpl
    def abc_register_group_gates(self, register):
        def first_group(actions, step, **_):
            if self.fired:
                return False
            self.fired = True
            return True

        register.add("first_group", first_group)


def test_gate_reaches_rollouts_and_gated_groups_leave_the_batch():
    from agentbench_crbc.rollout.engines.hf import HFEngine
    from agentbench_crbc.rollout.episodes.base import SamplingParams
    from agentbench_crbc.rollout.episodes.prompts import PromptBuilder
    from agentbench_crbc.trainer.loop import build_policy
    from agentbench_crbc.trainer.rollouts import Rollouts

    pm = get_plugin_manager()
    pm.register(_FirstGroupGate(), name="first-group-gate")
    reset_host(Host(pm))
    try:
        cfg = load_config(overrides=["rollout.gate=first_group", "env.max_steps=3", "model.tiny_hidden=32",
                                     "model.tiny_layers=1"])
        model, tk, _ = build_policy(cfg, torch.device("cpu"))
        builder = PromptBuilder(tk, cfg.env.id, template=cfg.env.template, max_prompt_tokens=128)
        with Rollouts(cfg) as rollouts:
            groups = rollouts.collect(HFEngine(model, tk), builder, [3, 4, 5], group_size=2, gate=cfg.rollout.gate,
                                      sampling=SamplingParams(temperature=1.0, max_tokens=6, seed=0))
        assert [g.gated for g in groups] == [True, False, False]
        samples, adv, counts = build_samples(groups, "grpo", {})
        assert counts["gated_groups"] == 1 and counts["env_error_trajectories"] == 0
        assert len(adv) == len(samples) == sum(len(t.steps) for g in groups[1:] for t in g.trajectories)
        assert {s.group for s in samples} == {0, 1}  # the two groups the gate let through
    finally:
        reset_host(None)


def test_env_failures_leave_the_batch_and_are_counted():
    ok = _group("g0", [2, 3, 1], [True, False, False])
    crashed = _group("g1", [2, 2], [False, True])
    crashed = dataclasses.replace(crashed, trajectories=(
        dataclasses.replace(crashed.trajectories[0], error="worker died"), crashed.trajectories[1]))
    samples, adv, counts = build_samples([ok, crashed], "grpo", {})
    assert counts == {"gated_groups": 0.0, "env_error_trajectories": 1.0, "env_error_groups": 1.0}
    assert adv.shape == (6,) and len(samples) == 6  # g1 kept one healthy rollout: no group left
    assert {s.group for s in samples} == {0} and samples_from_groups([ok], adv) == samples


# -- images in the VL loss -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_vl_steps_carry_their_images_into_every_forward(tok):
    from agentbench_crbc.rollout.engines.hf import HFEngine
    from agentbench_crbc.rollout.engines.models import tiny_qwen2_5_vl
    from agentbench_crbc.rollout.episodes.base import SamplingParams
    from agentbench_crbc.rollout.episodes.prompts import PromptBuilder
    from agentbench_crbc.rollout.episodes.runner import RolloutRunner, RunnerConfig
    from agentbench_crbc.trainer.update import step_logprobs

    model, proc = tiny_qwen2_5_vl(tok)
    pad = tok.convert_tokens_to_ids("<|image_pad|>")
    pb = PromptBuilder(tok, "abc/Sokoban-v0", image_processor=proc)
    with RolloutRunner("abc/Sokoban-v0", HFEngine(model, tok, image_processor=proc), pb,
        RunnerConfig(group_size=4, max_steps=2, num_workers=0, sampling=SamplingParams(max_tokens=4, seed=0))) as r:
        groups = r.collect([0, 1])
    samples, _, _ = build_samples(groups, "crbc", {})
    assert samples and all(len(s.images) == 1 for s in samples)
    s = samples[0]
    other = dataclasses.replace(s, images=(255 - s.images[0],))  # same tokens, another picture
    a, b = step_logprobs(model, [s, other], pad_id=tok.pad_token_id, image_processor=proc, image_pad_id=pad)
    assert not np.allclose(a, b)  # the image reaches the loss's forward (text-only it would not matter)
    with pytest.raises(ValueError, match="image_processor"):
        step_logprobs(model, [s], pad_id=tok.pad_token_id)
    vision = [p for n, p in model.named_parameters() if "visual" in n]
    before = [p.detach().clone() for p in vision]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    logs = ppo_update(model, opt, samples, _cfg(lr=1e-3, mini_batch_size=8), UpdateContext(pad_id=tok.pad_token_id,
                      image_processor=proc, image_pad_id=pad))
    assert logs["optimizer_steps"] >= 1
    assert any(not torch.equal(p, q) for p, q in zip(vision, before, strict=True))  # the vision tower trains too


def test_an_update_without_steps_takes_no_optimizer_step(tok):
    model = _model(tok)
    before = [p.detach().clone() for p in model.parameters()]
    logs = ppo_update(model, torch.optim.SGD(model.parameters(), lr=1.0), [], _cfg(), UpdateContext(pad_id=0))
    assert logs["optimizer_steps"] == 0 and logs["n_steps"] == 0
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))


def test_unchanged_weights_give_ratios_of_exactly_one_under_bf16_with_several_mini_batches():
    """The old log-probs are batched like the training passes (same rows, same padding): in bf16 a differently
    batched pass moved the sequence ratio over a step's tokens off 1 (0.9988 here) before the weights changed."""
    tok = models.tiny_tokenizer()
    m = models.tiny_qwen2(tok, hidden_size=64, num_layers=2, seed=0)
    rng = np.random.default_rng(0)
    samples = [StepSample(tuple(rng.integers(3, 300, int(rng.integers(4, 40))).tolist()),
                          tuple(rng.integers(3, 300, int(rng.integers(20, 60))).tolist()), float(rng.normal()),
                          i // 4, i % 4) for i in range(16)]
    cfg = OptimConfig(lr=0.0, kl_coef=0.0, grad_clip=0.0, ppo_epochs=1, micro_batch=3, mini_batch_size=8,
                      ratio="sequence")
    logs = ppo_update(m, torch.optim.SGD(m.parameters(), lr=0.0), samples, cfg, UpdateContext(pad_id=0,
                      autocast_dtype=torch.bfloat16), rng=np.random.default_rng(1))
    assert logs["optimizer_steps"] == 2  # (a second epoch reshuffles: its passes are batched differently again)
    assert logs["ratio_max"] == 1.0 and logs["ratio_min"] == 1.0 and logs["clip_frac"] == 0.0
