"""A resume loads ``optimizer.pt`` and a ``state.pt`` (the KL reference's, a DDP checkpoint's) to the CPU first: saved
from CUDA, a plain ``torch.load`` puts every rank's copy on cuda:0 (here, on a CPU-only torch, it refuses)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer.checkpoint import load_optimizer_state, load_weights  # noqa: E402


def _save_as_if_on_cuda(obj, path, monkeypatch) -> None:
    """``torch.save`` with every storage tagged ``cuda:0``, as a GPU run writes it."""
    with monkeypatch.context() as m:
        m.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
        torch.save(obj, path)


def _cuda_tagged(path) -> bool:
    try:
        torch.load(path, weights_only=True)
    except RuntimeError as exc:
        return "CUDA" in str(exc)
    return torch.cuda.is_available()


def test_the_optimizer_state_saved_on_cuda_loads_to_the_cpu(tmp_path, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("needs a torch without CUDA: a CUDA-tagged file must not load as saved")
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    _save_as_if_on_cuda(opt.state_dict(), tmp_path / "optimizer.pt", monkeypatch)
    assert _cuda_tagged(tmp_path / "optimizer.pt")  # the file really says cuda:0
    osd = load_optimizer_state(tmp_path)
    assert osd is not None
    tensors = [v for st in osd["state"].values() for v in st.values() if torch.is_tensor(v)]
    assert tensors and all(t.device.type == "cpu" for t in tensors)
    fresh = torch.optim.AdamW(model.parameters())
    fresh.load_state_dict(osd)  # then placed on the parameters' device by the optimizer
    torch.testing.assert_close(fresh.state[model.weight]["exp_avg"], opt.state[model.weight]["exp_avg"])


def test_a_state_pt_saved_on_cuda_loads_into_the_model(tmp_path, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("needs a torch without CUDA: a CUDA-tagged file must not load as saved")
    src, dst = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    (tmp_path / "model").mkdir()
    _save_as_if_on_cuda(src.state_dict(), tmp_path / "model" / "state.pt", monkeypatch)
    assert _cuda_tagged(tmp_path / "model" / "state.pt")
    load_weights(dst, tmp_path / "model")  # the KL reference's state.pt and DDP checkpoints load this way
    assert torch.equal(dst.weight, src.weight) and torch.equal(dst.bias, src.bias)
