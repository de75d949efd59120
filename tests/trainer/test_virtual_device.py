"""The virtual device test double: real CPU numbers behind a ``meta`` device, and a mix of devices caught."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.rollout.engines import models  # noqa: E402

from .virtual_device import DEVICE, DeviceMixError, VirtualDevice, VirtualTensor  # noqa: E402

torch.set_num_threads(1)


def _model(seed: int = 0):
    tok = models.tiny_tokenizer()
    return tok, models.tiny_qwen2(tok, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                                  intermediate_size=64, seed=seed).float()


def test_forward_backward_step_and_generate_give_the_cpu_numbers() -> None:
    _, cpu = _model()
    _, virt = _model()
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    opt_c = torch.optim.SGD(cpu.parameters(), lr=1e-2)  # SGD: Adam's first step is sign(g), ill-conditioned at g ~ 0
    cpu(ids).logits.logsumexp(-1).mean().backward()
    opt_c.step()
    with VirtualDevice():
        virt = virt.to(DEVICE)
        assert next(virt.parameters()).device == DEVICE
        opt_v = torch.optim.SGD(virt.parameters(), lr=1e-2)
        loss = virt(ids.to(DEVICE)).logits.logsumexp(-1).mean()
        assert isinstance(loss, VirtualTensor) and loss.device == DEVICE
        loss.backward()
        opt_v.step()
        gen = virt.generate(ids.to(DEVICE), max_new_tokens=3, do_sample=False, pad_token_id=0)
        gen_cpu = gen.cpu()
        after_step = [q.detach().cpu().clone() for q in virt.parameters()]
        adam = torch.optim.AdamW(virt.parameters(), lr=1e-3)  # the trainer's optimizer runs on the device too
        virt(ids.to(DEVICE)).logits.mean().backward()
        adam.step()
        assert all(p.device == DEVICE for p in virt.parameters())
    assert type(gen_cpu) is torch.Tensor
    # SDPA and matmul take other kernels for another device type: equal to float32 rounding, not bit for bit
    for (name, p), q in zip(cpu.named_parameters(), after_step, strict=True):
        torch.testing.assert_close(q, p.detach(), rtol=1e-6, atol=1e-8, msg=name)
    assert torch.equal(gen_cpu, cpu.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0))


def test_mixing_a_cpu_tensor_with_a_virtual_one_raises() -> None:
    with VirtualDevice():
        x = torch.ones(3, device=DEVICE)
        with pytest.raises(DeviceMixError, match=r"mul\.Tensor: tensors on meta and on cpu"):
            x * torch.tensor([1.0, 2.0, 3.0])
        with pytest.raises(DeviceMixError, match="index"):
            x[torch.tensor([0, 1])]
        # what CUDA allows, this allows: device-matched tensors, 0-dim CPU scalars, python numbers, explicit moves
        assert torch.equal((x * torch.tensor([1.0, 2.0, 3.0], device=DEVICE)).cpu(), torch.tensor([1.0, 2.0, 3.0]))
        assert float((x * torch.tensor(2.0)).sum()) == 6.0
        assert torch.equal((x + torch.arange(3).to(DEVICE)).cpu(), torch.tensor([1.0, 2.0, 3.0]))
