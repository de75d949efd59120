"""A test double for the ``vllm`` module that records how ``vllm.LLM`` was built, for engine-construction tests
(the full stand-in that generates is ``tests/standins/vllm``)."""

from __future__ import annotations

import sys
import types
from typing import Any

__all__ = ["fake_vllm"]


def fake_vllm(monkeypatch: Any) -> list[dict[str, Any]]:
    """Install a ``vllm`` whose ``LLM(model, **kw)`` appends ``kw`` to the returned list (extras' check off)."""
    from agentbench_crbc.rollout.engines import models

    made: list[dict[str, Any]] = []

    class FakeLLM:
        def __init__(self, model: str | None = None, **kw: Any) -> None:
            made.append(kw)
            self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(dtype=kw.get("dtype", "auto")))

        def get_tokenizer(self) -> Any:
            return models.tiny_tokenizer()

    fake = types.ModuleType("vllm")
    fake.LLM = FakeLLM  # type: ignore[attr-defined]
    fake.__version__ = "0.33.0"  # type: ignore[attr-defined]  (the extra's floor is 0.32)
    monkeypatch.setitem(sys.modules, "vllm", fake)
    import agentbench_crbc.extras as extras

    monkeypatch.setattr(extras, "require", lambda *a, **k: None)
    return made
