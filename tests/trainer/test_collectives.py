"""The device of collective tensors follows the process group's backend (NCCL refuses CPU tensors)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from agentbench_crbc.trainer.distributed import collective_device  # noqa: E402


@pytest.mark.parametrize(("backend", "kind"), [("gloo", "cpu"), ("nccl", "cuda"), ("cpu:gloo,cuda:nccl", "cpu"),
                                               ("cuda:nccl", "cuda"), ("xccl", "xpu"), ("mpi", "cpu")])
def test_backend_picks_the_device(backend, kind):
    assert collective_device(backend).type == kind


def test_a_real_gloo_group_reduces_on_the_device_it_names(tmp_path):
    from agentbench_crbc.trainer.distributed import Dist
    from agentbench_crbc.trainer.loop import Trainer

    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        assert collective_device() == torch.device("cpu")
        # the trainer's stop vote and micro-batch count take this path under torchrun (world 2 as far as they know)
        t = object.__new__(Trainer)
        t.dist = Dist(rank=0, world=2)
        assert t._max_int(7) == 7 and t._agree(True) is True and t._agree(False) is False
    finally:
        torch.distributed.destroy_process_group()
