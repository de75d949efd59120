"""The KL guard's snapshot in memory: counted by ``--print-memory``, never two at once, and released (with the old
and reference log-probs and the batch) before the update returns the allocator's cached blocks."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.memory import GIB, memory_plan


def _train_peak(capsys, *extra: str) -> tuple[str, float]:
    assert main(["train", "--preset", "alfworld-qwen2.5-1.5b", "--print-memory", *extra]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "peak while training" in x)
    return out, float(line.split()[-2])


@pytest.mark.parametrize("world", [1, 4])
def test_print_memory_counts_the_kl_guards_snapshot_of_weights_and_adam_moments(capsys, world):
    base = ["--world-size", str(world)]
    out_off, off = _train_peak(capsys, *base, "--set", "optim.target_kl=0")
    out_on, on = _train_peak(capsys, *base, "--set", "optim.target_kl=0.1")
    assert "KL guard snapshot" in out_on and "KL guard snapshot" not in out_off
    cfg = load_config(preset="alfworld-qwen2.5-1.5b")
    params = memory_plan(cfg).params
    want = 12 * params / world / GIB * 1.1  # fp32 weight + exp_avg + exp_avg_sq, FSDP2's shard, 10% fragmentation
    assert on - off == pytest.approx(want, abs=0.06)
    if world == 1:
        assert want > 15  # the "about 17 GiB short" at 1.5B on one GPU


def test_the_guard_snapshot_the_old_and_reference_logprobs_are_gone_before_the_cache_is_emptied(monkeypatch):
    torch = pytest.importorskip("torch")
    from agentbench_crbc.rollout.engines import models
    from agentbench_crbc.trainer import lockstep, update
    from agentbench_crbc.trainer.config import OptimConfig
    from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update

    torch.set_num_threads(1)
    tok = models.tiny_tokenizer()
    model = models.tiny_qwen2(tok, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                              seed=0).float()
    ref = models.tiny_qwen2(tok, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64,
                            seed=1).float()
    held: list[weakref.ref] = []
    previous: list[weakref.ref] = []  # the last snapshot's tensors
    alive_while_cloning: list[int] = []
    real_before, real_local = lockstep.KLGuard.before_step, lockstep.local

    def before_step(self):
        self._cloning = True
        real_before(self)
        self._cloning = False
        new = [weakref.ref(t) for t in self._saved[0]]
        new += [weakref.ref(v) for st in self._saved[1] if st for v in st.values() if torch.is_tensor(v)]
        held.extend(new)
        previous[:] = new

    def local(t):  # each clone of before_step: is the previous snapshot still held?
        alive_while_cloning.append(sum(r() is not None for r in previous))
        return real_local(t)

    for name in ("_old_pass", "_ref_logprobs"):
        real = getattr(update, name)

        def keep(*a, _real=real, **k):
            out = _real(*a, **k)
            held.append(weakref.ref(out))
            return out

        monkeypatch.setattr(update, name, keep)
    alive_at_free: list[int] = []
    monkeypatch.setattr(lockstep.KLGuard, "before_step", before_step)
    monkeypatch.setattr(lockstep, "local", local)
    monkeypatch.setattr(update, "_free_cached", lambda dev: alive_at_free.append(sum(r() is not None for r in held)),
                        raising=False)  # (1bcf722 had no such hook: nothing is released)
    samples = [StepSample((1, 2, 3), (4,), 1.0, "a", 0), StepSample((1, 2, 5), (6, 7), -0.5, "a", 0),
               StepSample((1, 9, 3), (4,), 2.0, "a", 1), StepSample((8, 2), (4, 5, 6, 7), -1.0, "b", 0)]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    cfg = OptimConfig(lr=1e-3, kl_coef=0.1, target_kl=10.0, ppo_epochs=2, mini_batch_size=2, micro_batch=64)
    gc.disable()  # only plain references count: empty_cache cannot free what a cycle still holds
    try:
        logs = ppo_update(model, opt, samples, cfg, UpdateContext(pad_id=0, ref=ref), rng=np.random.default_rng(0))
    finally:
        gc.enable()
    assert logs["optimizer_steps"] == 4 and len(alive_while_cloning) > 4  # 2 epochs x 2 mini-batches, all kept
    assert max(alive_while_cloning) == 0  # one snapshot at a time, never two
    assert held and alive_at_free == [0]
