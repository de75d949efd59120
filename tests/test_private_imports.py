"""No shipped module (``agentbench_crbc/``, ``plugins/``, ``envs/``) imports another module's private (underscore)
name: what is shared is public."""

from __future__ import annotations

import ast

from tests.shipped import SOURCE_ROOTS, shipped_files


def private_imports(source: str, module: str) -> list[str]:
    """``module: from X import _name`` for every import of an underscore name from a module of this package
    (``import datetime as _dt`` is an alias, not a private name, and passes)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        own = node.level > 0 or (node.module or "").split(".")[0] == "agentbench_crbc"
        for alias in node.names:
            if own and alias.name.startswith("_") and not alias.name.startswith("__"):
                out.append(f"{module}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
    return out


def test_the_scan_catches_a_private_import_and_passes_aliases() -> None:
    src = "from .serve import _models\nfrom ..host import get_host\nimport datetime as _dt\nfrom os import _exit\n"
    assert private_imports(src, "m") == ["m:1: from .serve import _models"]


def test_the_scan_reads_every_shipped_folder() -> None:
    assert set(SOURCE_ROOTS) == {"agentbench_crbc", "plugins", "envs"}
    folders = {rel.split("/")[0] for rel, _ in shipped_files()}
    assert folders == set(SOURCE_ROOTS)


def test_no_module_imports_a_private_name_of_another() -> None:
    found = [hit for rel, path in shipped_files() for hit in private_imports(path.read_text(encoding="utf-8"), rel)]
    assert not found, "private names imported across modules (make them public, in __all__):\n" + "\n".join(found)
