"""A second device on a CPU-only machine (test double): tensors that say they live on ``meta`` but compute on the CPU.

The trainer's device bugs (a tensor built with ``torch.tensor(...)`` on the CPU and multiplied with CUDA
log-probs) only show on a GPU. Inside :class:`VirtualDevice`, ``device="meta"`` gives a :class:`VirtualTensor`: a
wrapper subclass that reports ``meta`` as its device and holds a real CPU tensor, so forward, backward, AdamW and
``generate`` compute exactly the CPU numbers, while any op that mixes one with a plain CPU tensor (other than a
0-dim scalar, which CUDA allows too) raises :class:`DeviceMixError`, the way CUDA would raise "Expected all tensors
to be on the same device". Why not the alternatives: real ``meta`` tensors carry no data (``.item()`` and
data-dependent code fail), and ``FakeTensorMode`` with a ``cuda`` device needs a CUDA build of torch.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

__all__ = ["DEVICE", "DeviceMixError", "VirtualDevice", "VirtualTensor"]

DEVICE = torch.device("meta")


class DeviceMixError(RuntimeError):
    """An op mixed a tensor on the virtual device with one on the CPU (a crash on a real GPU)."""


class VirtualTensor(torch.Tensor):
    """A CPU tensor ``elem`` presented as living on :data:`DEVICE`."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> VirtualTensor:
        r = torch.Tensor._make_wrapper_subclass(cls, elem.size(), strides=elem.stride(),
                                                storage_offset=elem.storage_offset(), dtype=elem.dtype,
                                                layout=elem.layout, device=DEVICE, requires_grad=elem.requires_grad)
        r.elem = elem
        return r

    def __repr__(self) -> str:
        return f"VirtualTensor({self.elem!r})"

    # not dispatched to the modes (or dispatched to meta kernels without data): copies to the host, as on CUDA
    def tolist(self) -> Any:
        return self.elem.tolist()

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return _run(func, args, kwargs or {})


def _is_scalar_cpu(t: torch.Tensor) -> bool:
    return t.dim() == 0 and t.device.type == "cpu"


def _wants_virtual(kwargs: dict) -> bool:
    dev = kwargs.get("device")
    return dev is not None and torch.device(dev).type == DEVICE.type


def _run(func: Any, args: Any, kwargs: dict) -> Any:
    name = getattr(func, "__name__", str(func))
    flat_in: list[torch.Tensor] = []
    tree_map(lambda x: flat_in.append(x) if isinstance(x, torch.Tensor) else None, (args, kwargs))
    virtual = [t for t in flat_in if isinstance(t, VirtualTensor)]
    plain = [t for t in flat_in if not isinstance(t, VirtualTensor) and not _is_scalar_cpu(t)]
    to_cpu = func in (torch.ops.aten._to_copy.default,) and kwargs.get("device") is not None and \
        torch.device(kwargs["device"]).type == "cpu"
    if virtual and plain and not to_cpu:
        raise DeviceMixError(f"{name}: tensors on {DEVICE} and on cpu in one op (shapes "
                             f"{[tuple(t.shape) for t in virtual][:2]} and {[tuple(t.shape) for t in plain][:2]}); "
                             "build the cpu tensor with device=")
    unwrapped_kwargs = dict(kwargs)
    make_virtual = bool(virtual)
    if _wants_virtual(kwargs):
        unwrapped_kwargs["device"] = torch.device("cpu")
        make_virtual = True
    if to_cpu:
        make_virtual = False
    a, k = tree_map(lambda x: x.elem if isinstance(x, VirtualTensor) else x, (args, unwrapped_kwargs))
    out = func(*a, **k)
    if not make_virtual:
        return out
    return tree_map(lambda x: VirtualTensor(x) if isinstance(x, torch.Tensor) and not isinstance(x, VirtualTensor)
                    else x, out)



class _Dispatch(TorchDispatchMode):
    """Factory ops with ``device=meta`` (and every op on a :class:`VirtualTensor`) compute on the CPU."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if any(issubclass(t, VirtualTensor) for t in types) or _wants_virtual(kwargs):
            return _run(func, args, kwargs)
        return func(*args, **kwargs)


#: Constructors from data: in C++ they build a real (data-less) meta tensor without dispatching the copy, so they
#: are caught one level up, where the data still exists.
_FROM_DATA = {torch.tensor, torch.as_tensor, torch.Tensor.new_tensor}


class _Functions(TorchFunctionMode):
    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _FROM_DATA and _wants_virtual(kwargs):
            data = tree_map(lambda x: x.elem if isinstance(x, VirtualTensor) else x, args)  # (a list of 0-dim ones)
            with torch._C.DisableTorchFunctionSubclass():
                out = func(*data, **{**kwargs, "device": "cpu"})
            return VirtualTensor(out.elem if isinstance(out, VirtualTensor) else out)
        return func(*args, **kwargs)


class VirtualDevice:
    """Inside this context, ``device="meta"`` means a CPU-backed :class:`VirtualTensor`: ops compute for real, and
    an op that mixes one with a plain (non-scalar) CPU tensor raises :class:`DeviceMixError`."""

    def __enter__(self) -> VirtualDevice:
        # module.to(meta) swaps each parameter in place, so tied weights (embedding = LM head) stay one Parameter
        self._swap = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        self._modes = (_Functions(), _Dispatch())
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)
        torch.__future__.set_swap_module_params_on_conversion(self._swap)
