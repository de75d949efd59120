"""Core (``agentbench_crbc/``, outside ``plugins/`` and ``envs/``) never compares against, nor keys a table by, the
name of a registered credit method or env family: what depends on a method or a family is declared by its plugin
(the host hands it over), so a third-party method or family takes part in everything a built-in does. Docstrings
and comments may name them."""

from __future__ import annotations

import ast

from agentbench_crbc.host import get_host
from tests.shipped import shipped_files

#: core module -> the registered names it may write (None: all), with why. TODO(#53 item 2): bench/plan.py still
#: names CRBC for its closure-depth variants and quick mode's three methods (the split derived the variant list
#: from the host); a method-declared bench variant and a stated quick-mode rule would remove both.
ALLOWED: dict[str, frozenset[str] | None] = {
    "agentbench_crbc/bench/plan.py": frozenset({"crbc", "gigpo", "grpo"}),
    "agentbench_crbc/bench/report.py": frozenset({"graphgpo"}),  # "reaches GraphGPO's final reward" (the paper)
    # option values naming an outcome baseline (`traj_advantage = "grpo"`: the z-score; "rloo": leave-one-out),
    # shared by every method through the author API, not a test of the method being run
    "agentbench_crbc/credit/stats.py": frozenset({"grpo", "rloo"}),
}


def registered_names() -> frozenset[str]:
    """Every credit method and env family the host registered (the built-ins through their entry points)."""
    host = get_host()
    return frozenset(host.credit.names()) | frozenset(host.families.names())


def _strings(node: ast.AST | None) -> list[ast.Constant]:
    return [n for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)] if node else []


def named_uses(source: str, names: frozenset[str]) -> list[tuple[int, str, str]]:
    """``(line, how, name)`` for each registered ``name`` written as a string constant in a comparison (``==``,
    ``in (...)``, ``match`` cases), as a dict key, or as an element of a tuple, list or set bound to a module-level
    name (a second list of built-ins)."""
    found: list[tuple[int, str, str]] = []

    def hit(const: ast.Constant, how: str) -> None:
        if const.value in names:
            found.append((const.lineno, how, const.value))

    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                for const in _strings(side):
                    hit(const, "compared")
        elif isinstance(node, ast.MatchValue):
            for const in _strings(node.value):
                hit(const, "matched")
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    hit(key, "dict key")
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        for seq in ast.walk(value) if value is not None else ():
            if isinstance(seq, (ast.Tuple, ast.List, ast.Set)):
                for elt in seq.elts:
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        hit(elt, "listed at module level")
    return sorted(set(found))


def test_the_scan_catches_each_kind_of_naming():
    names = frozenset({"gigpo", "sokoban"})
    src = ('"""Docstrings may say gigpo and sokoban."""\n'
           'BUILTIN = ("grpo", "gigpo")\n'
           'def f(cfg):\n'
           '    if cfg.env.name == "sokoban":\n'
           '        return {"gigpo": 1}\n'
           '    match cfg.credit.name:\n'
           '        case "gigpo":\n'
           '            return cfg.credit.name in ("a", "sokoban")\n'
           '    local = ("gigpo",)  # inside a function: not a module-level list\n'
           '    return print("sokoban")  # a message, not a comparison\n')
    assert named_uses(src, names) == [(2, "listed at module level", "gigpo"), (4, "compared", "sokoban"),
                                      (5, "dict key", "gigpo"), (7, "matched", "gigpo"), (8, "compared", "sokoban")]


def test_the_names_come_from_the_host():
    names = registered_names()
    assert {"crbc", "grpo", "sokoban", "alfworld"} <= names  # the built-ins, registered through entry points


def test_core_never_names_a_registered_method_or_family():
    names = registered_names()
    found = [f"{rel}:{line}: {how} {name!r}" for rel, path in shipped_files() if rel.startswith("agentbench_crbc/")
             for line, how, name in named_uses(path.read_text(encoding="utf-8"), names)
             if rel not in ALLOWED or (ALLOWED[rel] is not None and name not in ALLOWED[rel])]
    assert not found, ("core names registered plugins (declare it in the plugin, read it through the host):\n"
                       + "\n".join(found))
