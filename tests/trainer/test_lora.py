"""LoRA via peft: only adapters train, the reference is the base (adapters off), save and reload give equal outputs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentbench_crbc.trainer.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint  # noqa: E402
from agentbench_crbc.trainer.config import load_config  # noqa: E402
from agentbench_crbc.trainer.loop import build_policy  # noqa: E402
from agentbench_crbc.trainer.update import StepSample, UpdateContext, ppo_update  # noqa: E402

torch.set_num_threads(1)


def _lora_model(seed=0):
    cfg = load_config(overrides=["model.lora=true", "model.lora_rank=4", f"seed={seed}", "optim.lr=1e-2",
                                 "optim.kl_coef=0.01", "optim.target_kl=0"])  # LoRA here, not the KL guard
    model, tok, _ = build_policy(cfg, torch.device("cpu"))
    return cfg, model, tok


def test_lora_trains_adapters_only_and_reloads(tmp_path):
    cfg, model, tok = _lora_model()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    frozen_before = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    samples = [StepSample((1, 2, 3, 4), (5, 6), 1.0), StepSample((1, 2, 7), (8, 9, 10), -1.0)]
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)

    def ref():
        return model, model.disable_adapter()

    for _ in range(3):
        logs = ppo_update(model, opt, samples, cfg.optim, UpdateContext(pad_id=tok.pad_token_id, ref=ref))
    assert logs["kl"] > 0  # adapters moved the policy away from the base model
    for n, p in model.named_parameters():
        if not p.requires_grad:
            assert torch.equal(p, frozen_before[n])
    x = torch.tensor([[1, 2, 3, 4, 5, 6]])
    want = model(input_ids=x).logits
    save_checkpoint(tmp_path, 3, model=model, optimizer=opt, state={"update": 3})
    ckpt = latest_checkpoint(tmp_path)
    assert (ckpt / "model" / "adapter_model.safetensors").exists()
    assert not (ckpt / "model" / "model.safetensors").exists()  # the adapter only

    _, fresh, _ = _lora_model()
    assert not torch.allclose(fresh(input_ids=x).logits, want)
    opt2 = torch.optim.AdamW([p for p in fresh.parameters() if p.requires_grad], lr=1e-2)
    state = load_checkpoint(ckpt, model=fresh, optimizer=opt2)
    assert state["update"] == 3
    torch.testing.assert_close(fresh(input_ids=x).logits, want)
    assert len(opt2.state_dict()["state"]) == len(opt.state_dict()["state"])
