"""No shipped function (``agentbench_crbc/``, ``plugins/``, ``envs/``) runs over 100 lines or takes over 10
parameters (``self`` / ``cls`` not counted; a dataclass's generated constructor is not in the source): a longer one
is split, a wider one takes a frozen config record."""

from __future__ import annotations

import ast

from tests.shipped import shipped_files

MAX_LINES = 100
MAX_PARAMS = 10


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef, method: bool) -> int:
    a = fn.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    n = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    return n - 1 if method and names and "staticmethod" not in decorators else n


def oversized(source: str, module: str) -> list[str]:
    """``module:line: name (N lines)`` / ``(N parameters)`` for every function or method past the limits."""
    out = []

    def visit(node: ast.AST, in_class: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines, n = child.end_lineno - child.lineno + 1, _params(child, in_class)
                what = [f"{lines} lines"] * (lines > MAX_LINES) + [f"{n} parameters"] * (n > MAX_PARAMS)
                if what:
                    out.append(f"{module}:{child.lineno}: {child.name} ({', '.join(what)})")
                visit(child, False)
            else:
                visit(child, isinstance(child, ast.ClassDef))

    visit(ast.parse(source), False)
    return out


def test_the_scan_counts_lines_and_parameters_but_not_self() -> None:
    wide = ", ".join(f"a{i}" for i in range(11))
    body = "\n".join(f"    x{i} = {i}" for i in range(99))
    src = (f"def wide({wide}): pass\n"
           f"class C:\n    def ok(self, {', '.join(f'a{i}' for i in range(10))}): pass\n"
           f"    @staticmethod\n    def st({wide}): pass\n"
           f"def long():\n{body}\n    return 1\n"
           f"def fits():\n{body}\n"
           "def star(*args, **kwargs): pass\n")
    assert oversized(src, "m") == ["m:1: wide (11 parameters)", "m:5: st (11 parameters)", "m:6: long (101 lines)"]


def test_the_scan_looks_inside_nested_functions() -> None:
    inner = ", ".join(f"a{i}" for i in range(11))
    assert oversized(f"def outer():\n    def inner({inner}): pass\n", "m") == ["m:2: inner (11 parameters)"]


def test_no_shipped_function_is_too_long_or_too_wide() -> None:
    found = [hit for rel, path in shipped_files() for hit in oversized(path.read_text(encoding="utf-8"), rel)]
    assert not found, (f"functions over {MAX_LINES} lines or {MAX_PARAMS} parameters (split the body into named "
                       "steps; pass a frozen config record instead of many parameters):\n" + "\n".join(found))
