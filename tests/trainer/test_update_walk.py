"""docs/architecture.md's walk of one RL update names the files that run: a 1-update tiny run is traced from
``training_seeds()`` (the update's tasks) to the return of the first ``optimizer.step()``, and the shipped files
it ran (``agentbench_crbc/``, ``plugins/``, ``envs/``) are the ones the doc's table lists."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.shipped import REPO, SOURCE_ROOTS

DOC = REPO / "docs" / "architecture.md"
SECTION = "### One RL update, file by file"


def documented_files(text: str) -> set[str]:
    """The files in the first column of the section's table (``trainer/loop.py``, ``plugins/crbc.py``)."""
    section = text.split(SECTION, 1)[1].split("\n#", 1)[0]
    return {m.group(1) for line in section.splitlines() if line.startswith("|")
            for m in [re.match(r"\|\s*\d+\s*\|\s*`([^`]+)`", line)] if m}


def _shipped(filename: str) -> str | None:
    """``trainer/loop.py`` for a file of the package, ``plugins/crbc.py`` / ``envs/sokoban/env.py`` for the mapped
    folders; None for anything else (the standard library, torch, generated code)."""
    path = Path(filename)
    for root in SOURCE_ROOTS:
        base = REPO / root
        if path.is_relative_to(base):
            rel = path.relative_to(base).as_posix()
            return rel if root == "agentbench_crbc" else f"{root}/{rel}"
    return None


class _Window:
    """A ``sys.settrace`` function recording the shipped files whose code runs from the first call of
    ``training_seeds`` to the return of the first ``Optimizer.step``."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.state = "before"

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        if self.state == "before" and code.co_name == "training_seeds":
            self.state = "in"
        if self.state != "in":
            return None
        rel = _shipped(code.co_filename)
        if rel is not None:
            self.files.add(rel)
        if code.co_name == "step" and "torch/optim" in code.co_filename.replace("\\", "/"):
            return self._until_return
        return None

    def _until_return(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "return":
            self.state = "after"
        return self._until_return


def _forget_cached_plans() -> None:
    """Empty the solver's per-level cache: a test that ran earlier in this worker may have solved the same
    levels, and a cache hit runs no code of ``envs/sokoban/solver.py`` (the walk would then depend on order)."""
    for name, module in list(sys.modules.items()):
        if name.endswith("sokoban.solver") and hasattr(module, "solution_length"):
            module.solution_length.cache_clear()


def test_the_table_parser_reads_the_file_column():
    text = (f"{SECTION}\n\n| # | file | what |\n|---|---|---|\n| 1 | `trainer/loop.py` | x `a.py` |\n\n"
            "## Next\n| 2 | `b.py` |")
    assert documented_files(text) == {"trainer/loop.py"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_documented_walk_of_one_update_is_the_files_that_run(tmp_path):
    pytest.importorskip("torch")
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.loop import Trainer

    cfg = load_config(overrides=("updates=1", "rollout.groups=2", "rollout.group_size=4", "tensorboard=false",
                                 "progress=false", f"out_dir={tmp_path}", "threads=1", "eval.episodes=1",
                                 "eval.references=false", "eval.greedy=false", "eval.train_temperature=false"))
    trainer = Trainer(cfg)
    _forget_cached_plans()
    window = _Window()
    sys.settrace(window)
    try:
        trainer.run()
    finally:
        sys.settrace(None)
    assert window.state == "after", "the run took no optimizer step"
    documented = documented_files(DOC.read_text(encoding="utf-8"))
    assert documented == window.files, (f"ran but not in {DOC.name}: {sorted(window.files - documented)}; "
                                        f"listed but did not run: {sorted(documented - window.files)}")
