"""benchmarks/update_ablation.py: a result line names the revision the run's trainer started on, not the checkout's
at the run's end (which a long grid outlives), and ``--at REV`` runs cells on a clean worktree of one commit."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _project_worktrees() -> set[str]:
    """The worktrees registered in this checkout's repository (its common ``.git``), by folder name."""
    got = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True, text=True)
    if got.returncode != 0:  # an sdist or a copy without .git: nothing to guard
        return set()
    folder = (ROOT / got.stdout.strip()).resolve() / "worktrees"
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


@pytest.fixture(autouse=True)
def _no_worktree_in_the_project(tmp_path):
    """Tests write only under their tmp paths: none may register a worktree in the project's own repository (one
    did, from /tmp, and left it there). Only entries pointing into this test's tmp_path count (other work may add
    worktrees of its own meanwhile)."""
    before = _project_worktrees()
    yield
    common = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--git-common-dir"], capture_output=True,
                            text=True).stdout.strip()
    ours = []
    for name in _project_worktrees() - before:
        gitdir = (ROOT / common).resolve() / "worktrees" / name / "gitdir"
        if gitdir.is_file() and str(tmp_path.resolve()) in gitdir.read_text():
            ours.append(name)
    assert not ours, f"the test registered worktrees in {ROOT}'s repository: {ours}; run git against a scratch repo"


def _script():
    spec = importlib.util.spec_from_file_location("update_ablation", ROOT / "benchmarks" / "update_ablation.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_revision_comes_from_the_runs_own_records(tmp_path):
    u = _script()
    (tmp_path / "eval").mkdir()
    rows = [{"subtask": "all", "revision": "0123456789ab+dirty"}, {"subtask": "1 move", "revision": "later"}]
    (tmp_path / "eval" / "records.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert u._run_revision(str(tmp_path)) == "0123456789ab+dirty"
    assert u._run_revision(str(tmp_path / "missing")) is None and u._run_revision(None) is None


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, str, str]:
    """A repository with two commits of a package ``agentbench_crbc`` whose ``MARK`` says which commit it is."""
    repo = tmp_path / "repo"
    (repo / "agentbench_crbc").mkdir(parents=True)
    _git(repo, "init", "-q")
    shas = []
    for mark in ("first", "second"):
        (repo / "agentbench_crbc" / "__init__.py").write_text(f"MARK = {mark!r}\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", mark)
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas[0], shas[1]


def test_at_rev_runs_on_a_clean_worktree_of_that_commit_ahead_of_the_installed_package(tmp_path):
    import sys
    u = _script()
    repo, first, _ = _repo(tmp_path)
    out = tmp_path / "out"
    code = u.frozen_code(first[:7], out, repo=repo)
    assert code == out.resolve() / f"code-{first[:12]}" and _git(code, "rev-parse", "HEAD") == first
    # what a cell imports there is that commit's package, not the installed checkout this test runs from
    got = subprocess.run([sys.executable, "-c", "import agentbench_crbc as a; print(a.MARK, a.__file__)"],
                         cwd=code, capture_output=True, text=True, check=True).stdout.split()
    assert got == ["first", str(code / "agentbench_crbc" / "__init__.py")]
    assert u.frozen_code(first, out, repo=repo) == code  # a rerun reuses it
    assert _git(repo, "rev-parse", "HEAD") != first  # the checkout itself did not move


def test_at_rev_refuses_an_unknown_commit_a_changed_worktree_and_a_folder_in_the_way(tmp_path):
    u = _script()
    repo, first, _ = _repo(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"--at nosuchrev: not a commit of"):
        u.frozen_code("nosuchrev", out, repo=repo)
    code = u.frozen_code(first, out, repo=repo)
    (code / "agentbench_crbc" / "__init__.py").write_text("MARK = 'edited'\n")
    with pytest.raises(SystemExit, match=r"is not a clean worktree of"):
        u.frozen_code(first, out, repo=repo)
    (code / "agentbench_crbc" / "__init__.py").write_text("MARK = 'first'\n")
    assert u.frozen_code(first, out, repo=repo) == code  # clean again
    (out.resolve() / f"code-{_git(repo, 'rev-parse', 'HEAD')[:12]}").mkdir()  # a plain folder in the way
    with pytest.raises(SystemExit, match=r"is not a clean worktree of"):
        u.frozen_code("HEAD", out, repo=repo)


def test_at_rev_imports_the_worktrees_plugins_and_envs_not_the_editable_installs(tmp_path, monkeypatch):
    """The package's ``plugins/`` and ``envs/`` sit beside it (pyproject's ``package-dir``): an editable install maps
    them to its own checkout, so a cell on the frozen worktree must be pointed at the worktree's."""
    import argparse
    u = _script()
    repo = tmp_path / "repo"
    for folder in ("agentbench_crbc", "plugins", "envs/sokoban"):
        (repo / folder).mkdir(parents=True)
    (repo / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = {"agentbench_crbc" = "agentbench_crbc", '
        '"agentbench_crbc.plugins" = "plugins", "agentbench_crbc.envs" = "envs"}\n')
    (repo / "agentbench_crbc" / "__init__.py").write_text("")
    (repo / "agentbench_crbc" / "__main__.py").write_text(
        "import importlib.util, sys\n"  # where each would load from (nothing of an installed copy is run)
        "print(*(importlib.util.find_spec(f'agentbench_crbc.{m}').origin for m in ('plugins', 'envs.sokoban')), "
        "*sys.argv[1:])\n")
    for init in ("plugins", "envs", "envs/sokoban"):
        (repo / init / "__init__.py").write_text("")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "frozen")
    frozen = u.frozen_code
    monkeypatch.setattr(u, "frozen_code", lambda rev, out: frozen(rev, out, repo=repo))
    cmd, code = u._runner(argparse.Namespace(at="HEAD", abc="abc"), tmp_path / "out")
    got = subprocess.run([*cmd, "train", "--credit", "crbc"], cwd=code, capture_output=True, text=True, timeout=60)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == [str(code / "plugins" / "__init__.py"),
                                  str(code / "envs" / "sokoban" / "__init__.py"), "train", "--credit", "crbc"]
