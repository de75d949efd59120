"""The credit layer as a package: one import path per name, numpy/scipy only, plugins on the author API, explain via
the host."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agentbench_crbc import OptionError, PluginError, hookimpl
from agentbench_crbc.credit import explain
from agentbench_crbc.credit.explain import GroupExplanation, explain_text, explainable
from agentbench_crbc.host import Host, get_plugin_manager

from .toy import toy

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
#: package -> (module, names): a package's public names are the very objects of the module that defines them
EXPORTED = {
    "agentbench_crbc.testing": ("agentbench_crbc.credit.testing",
                                ["check_credit_assigner", "degenerate_groups", "make_group", "random_groups"]),
    "agentbench_crbc.credit": ("agentbench_crbc.credit.assign", ["assign", "assign_batch"]),
}
ALSO = [("agentbench_crbc.credit", "agentbench_crbc.credit.records", "parse_option"),
        ("agentbench_crbc.credit", "agentbench_crbc.credit.records", "read_jsonl"),
        ("agentbench_crbc.credit", "agentbench_crbc.credit.explain", "explain"),
        ("agentbench_crbc", "agentbench_crbc.credit.batch", "StepBatch"),
        ("agentbench_crbc", "agentbench_crbc.credit.types", "Group"),
        ("agentbench_crbc", "agentbench_crbc.credit.assign", "assign")]
#: what a plugin module may import from this package (the author API)
AUTHOR_API = {"agentbench_crbc", "agentbench_crbc.errors", "agentbench_crbc.host", "agentbench_crbc.hookspecs",
              "agentbench_crbc.io"}
#: the back-compat modules of a package never released: deleted, their names live in agentbench_crbc.credit
GONE_MODULES = ["agentbench_crbc.batch", "agentbench_crbc.types", "agentbench_crbc.stats"]

#: module attributes that were back-compat shims (constants computed by a module ``__getattr__``, old aliases)
GONE_NAMES = [
    ("agentbench_crbc.trainer.config", "ENV_IDS"),
    ("agentbench_crbc.tabular.families", "FAMILIES"),
    ("agentbench_crbc.leaderboard.report", "ENV_LABELS"),
    ("agentbench_crbc.leaderboard.report", "METHOD_LABELS"),
    ("agentbench_crbc.leaderboard.aggregate", "ENV_ORDER"),
    ("agentbench_crbc.leaderboard.aggregate", "SUBTASK_ORDER"),
    ("agentbench_crbc.extras", "ENV_EXTRAS"),
    ("agentbench_crbc.rollout", "resolve_env_id"),  # agentbench_crbc.family.resolve_env
    ("agentbench_crbc.rollout.episodes.runner", "resolve_env_id"),
    ("agentbench_crbc.cli.rollout", "build_policy"),  # policy_engine (trainer.policy.build_policy is another thing)
    ("agentbench_crbc.trainer.rollouts", "collect"),  # Rollouts(cfg).collect
    ("agentbench_crbc.trainer.rollouts", "close_runners"),  # a no-op
    ("agentbench_crbc.trainer.loop", "collect"),
    ("agentbench_crbc.trainer.loop", "close_runners"),
    ("agentbench_crbc.trainer.sft", "task_key"),  # the family's task_key
]


@pytest.mark.parametrize("package", sorted(EXPORTED))
def test_package_exports_are_the_defining_modules_objects(package: str) -> None:
    module, names = EXPORTED[package]
    outer, inner = importlib.import_module(package), importlib.import_module(module)
    for name in names:
        assert getattr(outer, name) is getattr(inner, name), f"{package}.{name}"


@pytest.mark.parametrize("name", GONE_MODULES)
def test_old_module_paths_are_gone(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


def _top_level_names(module: str) -> tuple[set[str], list[str]]:
    """(names a module binds at its top level, its ``__all__``), read from the source (no import: the trainer's
    modules need torch, which the core test environment lacks)."""
    rel = Path(*module.split(".")[1:])
    root = Path(__file__).resolve().parents[2] / "agentbench_crbc"
    path = root / rel / "__init__.py" if (root / rel).is_dir() else (root / rel).with_suffix(".py")
    bound: set[str] = set()
    exported: list[str] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            bound |= names
            if "__all__" in names:
                exported = list(ast.literal_eval(node.value))
    return bound, exported


@pytest.mark.parametrize(("module", "name"), GONE_NAMES, ids=lambda x: x)
def test_old_names_are_gone(module: str, name: str) -> None:
    bound, exported = _top_level_names(module)
    assert name not in bound and name not in exported, f"{module}.{name}"
    assert "__getattr__" not in bound, f"{module} computes attributes on access"


@pytest.mark.parametrize("path", sorted(PLUGINS.glob("*.py")), ids=lambda p: p.name)
def test_plugins_export_only_their_own_names(path: Path) -> None:
    """A plugin module's ``__all__`` names what it defines; the credit helpers it uses are imported from
    agentbench_crbc.credit, never through a plugin (the re-exports kept for back-compat are gone)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    imported = {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    exported = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)]
    assert not set(exported[0] if exported else ()) & imported, f"{path.name} re-exports what it imports"


@pytest.mark.parametrize(("old", "new", "name"), ALSO)
def test_re_exports_are_the_same_objects(old: str, new: str, name: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)


def test_credit_imports_numpy_and_scipy_only() -> None:
    mods = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "agentbench_crbc" / "credit").glob("*.py"))
    code = ("import importlib, sys\n"
            f"for m in {mods!r}:\n"
            "    importlib.import_module('agentbench_crbc.credit' + ('' if m == '__init__' else '.' + m))\n"
            "heavy = ('torch', 'pandas', 'matplotlib', 'transformers', 'gymnasium')\n"
            "mine = ('agentbench_crbc.plugins', 'agentbench_crbc.envs', 'agentbench_crbc.trainer',"
            " 'agentbench_crbc.rollout', 'agentbench_crbc.family')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(mine)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(level, module) of every import statement in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            out.append((node.level, node.module or ""))
        elif isinstance(node, ast.Import):
            out += [(0, a.name) for a in node.names]
    return out


@pytest.mark.parametrize("path", sorted(PLUGINS.glob("*.py")), ids=lambda p: p.name)
def test_plugins_import_only_the_author_api(path: Path) -> None:
    for level, module in _imports(path):
        assert level == 0, f"{path.name}: relative import of {module!r}; import the author API instead"
        if module.split(".")[0] != "agentbench_crbc":
            continue
        ok = module in AUTHOR_API or module == "agentbench_crbc.credit" or module.startswith("agentbench_crbc.credit.")
        assert ok, f"{path.name} imports {module}: plugins import only the author API (agentbench_crbc.credit...)"


class _Explained:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        def flat(batch, *, k: float = 1.0):
            return np.full(batch.n_steps, k)

        def why(batch, *, k: float = 1.0):
            return [GroupExplanation(g, 0, (), (), {"k": float(k)}) for g in batch.group_ids]

        register.add_batched("flat", flat, explain=why)
        register.add_batched("plain", flat)


def test_explain_reaches_a_method_through_the_host() -> None:
    pm = get_plugin_manager()
    pm.register(_Explained(), name="explained")
    host = Host(pm)
    assert explainable(host) == ["crbc", "flat"]
    (g,) = explain(toy(), method="flat", host=host, k=3)
    assert g.group == "toy" and g.coverage == {"k": 3.0}
    assert explain_text(g).splitlines()[0] == "group toy: 0 rollouts, 0 anchors, 0 (anchor, action) pairs"
    with pytest.raises(OptionError, match="unknown option 'beta'"):
        explain(toy(), method="flat", host=host, beta=0.5)
    with pytest.raises(OptionError, match=r"'plain' has no --explain report; methods with one: crbc, flat"):
        explain(toy(), method="plain", host=host)


def test_crbc_explain_is_registered_with_the_method() -> None:
    crbc = importlib.import_module("agentbench_crbc.plugins.crbc")
    assert Host().credit_method("crbc").explain is crbc.explain


class _BadExplain:
    @hookimpl
    def abc_register_credit_assigners(self, register):
        register.add_batched("bad", lambda batch: np.zeros(batch.n_steps), explain="not a function")


def test_an_explainer_that_is_not_a_function_breaks_only_its_plugin() -> None:
    pm = get_plugin_manager()
    pm.register(_BadExplain(), name="bad-explain")
    host = Host(pm)
    assert "bad" not in host.credit and "crbc" in host.credit
    (broken,) = [b for b in host.broken if b.entry_point == "bad-explain"]
    assert PluginError.__name__ in broken.error and "explain of credit method 'bad' must be a function" in broken.error
