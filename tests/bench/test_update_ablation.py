"""benchmarks/update_ablation.py: a result line names the revision the run's trainer started on, not the checkout's
at the run's end (which a long grid outlives), and ``--at REV`` runs cells on a clean worktree of one commit."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    import subprocess
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
    import subprocess
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
    import pytest
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
