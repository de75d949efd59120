"""Safe writes: symlinks written through, devices and FIFOs written directly, modes kept, ``-`` is stdout."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.errors import RecordError
from agentbench_crbc.io import atomic_open, atomic_write_text, json_text, write_target


def test_dev_null_is_written_directly_never_renamed_over() -> None:
    # classification only: the test never writes /dev/null, so a regression cannot break the machine
    kind, target = write_target("/dev/null")
    assert (kind, str(target)) == ("direct", "/dev/null")


def test_fifo_is_written_through_and_stays_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    atomic_write_text(fifo, "through the pipe\n")
    reader.join(timeout=30)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no temp file left beside it


def test_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "data" / "real.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    atomic_write_text(link, "new\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.jsonl"]  # the temp file was made beside it


def test_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to(tmp_path / "made.txt")
    atomic_write_text(link, "x")
    assert link.is_symlink() and (tmp_path / "made.txt").read_text() == "x"


def test_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "shared.txt"
    path.write_text("a")
    os.chmod(path, 0o644)
    atomic_write_text(path, "b")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    os.chmod(path, 0o640)
    atomic_write_text(path, "c")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640 and path.read_text() == "c"


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_file_gets_the_umask_mode(tmp_path: Path, umask: int, mode: int) -> None:
    # in a child process: the umask is process-wide and the test workers share nothing else with it
    path = tmp_path / "new.txt"
    code = ("import os, sys; os.umask(int(sys.argv[2], 8)); from agentbench_crbc.io import atomic_write_text; "
            "atomic_write_text(sys.argv[1], 'x')")
    subprocess.run([sys.executable, "-c", code, str(path), oct(umask)[2:]], check=True, timeout=120)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode


def test_dash_is_stdout(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with atomic_open("-") as fh:
        fh.write("to stdout\n")
    assert capsys.readouterr().out == "to stdout\n"
    assert not (tmp_path / "-").exists()


def test_folder_is_refused_and_left_alone(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError, match="is a folder"):
        atomic_write_text(tmp_path, "x")
    assert list(tmp_path.iterdir()) == []


def test_failure_leaves_a_symlinked_target_intact(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("kept")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with pytest.raises(RuntimeError), atomic_open(link) as fh:
        fh.write("half")
        raise RuntimeError("crash mid-write")
    assert real.read_text() == "kept" and sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_leaderboard_store_through_a_symlink_is_one_store(tmp_path: Path) -> None:
    from agentbench_crbc.leaderboard.records import add_records, read_records
    from tests.leaderboard.helpers import rec

    store = tmp_path / "store" / "records.jsonl"
    store.parent.mkdir()
    link = tmp_path / "alias.jsonl"
    link.symlink_to(store)
    for seed in range(5):
        add_records(store, [rec(seed=seed)])
        add_records(link, [rec(seed=100 + seed)])
    assert link.is_symlink()
    seeds = sorted(r.seed for r in read_records(store))
    assert seeds == [0, 1, 2, 3, 4, 100, 101, 102, 103, 104]
    assert sorted(p.name for p in store.parent.iterdir()) == ["records.jsonl", "records.jsonl.lock"]


# -- #31: one reader, writes refused as open() would refuse them, the umask kept --------------------------------------

LINE_BREAKS = "\u2028\u2029\x85\x0b\x0c\x1c"  # str.splitlines splits on each; JSON holds them raw in strings


def test_text_lines_splits_on_newline_only() -> None:
    from agentbench_crbc.io import text_lines

    assert text_lines(f'{{"a": "x{LINE_BREAKS}y"}}\r\n{{"b": 1}}\n') == [f'{{"a": "x{LINE_BREAKS}y"}}', '{"b": 1}', ""]


def test_abc_credit_reads_what_abc_rollout_writes_with_unicode_line_breaks(tmp_path: Path) -> None:
    import json

    from agentbench_crbc.cli import main
    from agentbench_crbc.cli.rollout import records_text
    from agentbench_crbc.rollout.episodes.base import RolloutGroup, RolloutStep, RolloutTrajectory

    said = f"think{LINE_BREAKS}then act"
    trajs = tuple(RolloutTrajectory(steps=(RolloutStep(anchor=f"room{LINE_BREAKS}", action="go", response_text=said),
                                           RolloutStep(anchor=k, action="stop", response_text=said)), success=ok)
                  for k, ok in (("a", True), ("b", False)))
    src = tmp_path / "rollouts.jsonl"
    src.write_text(records_text([RolloutGroup(task_id="t0", trajectories=trajs, env_id="x")]), encoding="utf-8")
    assert "\u2028" in src.read_text(encoding="utf-8")  # written raw (ensure_ascii=False)
    out = tmp_path / "credit.jsonl"
    assert main(["credit", "crbc", str(src), "-o", str(out), "-q"]) == 0
    rows = [json.loads(ln) for ln in out.read_text(encoding="utf-8").split("\n") if ln]
    assert [r["steps"][0]["response"] for r in rows] == [said, said]
    assert all(len(r["advantages"]) == 2 for r in rows)


def _as_user(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``abc argv`` as an ordinary user (root: through setpriv as nobody, the folder handed to nobody)."""
    cmd = [sys.executable, "-m", "agentbench_crbc", *argv]
    if os.geteuid() == 0:
        import shutil

        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot act as an ordinary user")
        os.chown(cwd, 65534, 65534)
        for p in cwd.rglob("*"):
            if p.owner() == "root" and p.name != "root-owned.jsonl":
                os.chown(p, 65534, 65534)
        cwd.chmod(0o755)
        import agentbench_crbc

        # nobody must reach the folder, the interpreter and the package (a checkout in a 0700 folder cannot be run)
        for where in (cwd, Path(sys.prefix), Path(agentbench_crbc.__file__).parent):
            for parent in where.parents:
                if parent.stat().st_mode & 0o001 == 0:
                    pytest.skip(f"{parent} is not searchable by other users")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = {**os.environ, "HOME": str(cwd)}
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def _toy_records(path: Path) -> None:
    import json

    path.write_text("".join(json.dumps({"group": "g", "steps": [{"anchor": "s", "action": a}], "success": a == "x"})
                            + "\n" for a in "xy"))


@pytest.fixture
def user_folder():
    """A folder an ordinary user can reach (pytest's own tmp_path is 0700 under root)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="abc-user-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_file_the_user_may_not_write_is_refused_not_replaced(user_folder: Path) -> None:
    tmp_path = user_folder
    src = tmp_path / "r.jsonl"
    _toy_records(src)
    ro = tmp_path / "readonly.jsonl"
    ro.write_text("keep\n")
    ro.chmod(0o444)
    theirs = tmp_path / "root-owned.jsonl"  # another user's file in the user's folder
    theirs.write_text("keep\n")
    theirs.chmod(0o644)
    if os.geteuid() != 0:
        pytest.skip("needs root to make another user's file")
    for target in (ro, theirs):
        r = _as_user(["credit", "crbc", str(src), "-o", str(target), "-q"], tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
        assert "Permission denied" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert target.read_text() == "keep\n" and target.stat().st_uid == (0 if target is theirs else 65534)


def test_check_writable_refuses_a_read_only_file_for_an_ordinary_user(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from agentbench_crbc.io import check_writable

    ro = tmp_path / "ro.txt"
    ro.write_text("x")
    monkeypatch.setattr(os, "access", lambda p, mode: not (mode & os.W_OK and Path(p) == ro))
    with pytest.raises(PermissionError):
        check_writable(ro)
    with pytest.raises(PermissionError):
        atomic_write_text(ro, "y")
    assert ro.read_text() == "x"
    (tmp_path / "afile").write_text("")
    with pytest.raises(NotADirectoryError):
        check_writable(tmp_path / "afile" / "out.jsonl")
    check_writable(tmp_path / "new" / "deeper" / "out.jsonl")  # a missing folder is made by the write
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_umask_tree_gives_what_open_and_mkdir_would(tmp_path: Path, umask: int) -> None:
    import tempfile

    from agentbench_crbc.io import umask_tree

    root = Path(tempfile.mkdtemp(dir=tmp_path))  # 0700, as libraries leave it
    (root / "sub").mkdir(mode=0o700)
    fd, name = tempfile.mkstemp(dir=root / "sub")  # 0600
    os.close(fd)
    old = os.umask(umask)
    try:
        umask_tree(root)
    finally:
        os.umask(old)
    assert stat.S_IMODE(root.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((root / "sub").stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE(os.stat(name).st_mode) == 0o666 & ~umask


# --- strict JSON out (#54 item 1) ---------------------------------------------------------------------------

_NONFINITE = st.sampled_from([float("inf"), float("-inf"), float("nan"), json.loads("1e400"), json.loads("-1e400")])
_FINITE = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_KEYS = st.text(alphabet="abcdefgh_", min_size=1, max_size=6).filter(lambda k: k not in ("group", "steps", "success"))


def _strict_loads(text: str) -> object:
    def refuse(name: str) -> object:
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(text, parse_constant=refuse)


@settings(max_examples=150, deadline=None)
@given(extra=st.dictionaries(_KEYS, _FINITE, max_size=3), key=_KEYS, bad=_NONFINITE,
       nest=st.sampled_from(["plain", "list", "dict"]))
def test_json_text_writes_strict_json_or_names_the_field(extra: dict, key: str, bad: float, nest: str) -> None:
    record = {"group": "g", "steps": [{"anchor": "A", "action": "x"}], "success": True, **extra}
    assert _strict_loads(json_text(record)) == json.loads(json.dumps(record))  # finite: strict and the same value
    value, field = {"plain": (bad, key), "list": ([0, bad], f"{key}[1]"), "dict": ({"v": bad}, f"{key}.v")}[nest]
    with pytest.raises(RecordError) as e:
        json_text({**record, key: value}, where="f.jsonl: record 3")
    msg = str(e.value)
    assert msg.startswith(f"f.jsonl: record 3: field {field}: ") and "\n" not in msg and "finite" in msg


def test_json_text_names_a_value_without_a_json_form() -> None:
    with pytest.raises(RecordError, match=r"^x: field steps\[0\]\.anchor: a set has no JSON form"):
        json_text({"steps": [{"anchor": {1}}]}, where="x")
    assert json_text({"a": {1}}, default=sorted) == '{"a": [1]}'


def test_every_json_the_package_writes_goes_through_json_text() -> None:
    root = Path(__file__).resolve().parents[1]
    found = [f"{p.relative_to(root)}:{n}" for folder in ("agentbench_crbc", "plugins", "envs")
             for p in sorted((root / folder).rglob("*.py")) if p.name != "io.py" or p.parent.name != "agentbench_crbc"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if "json.dump(" in line or "json.dumps(" in line]
    assert found == [], "write JSON with agentbench_crbc.io.json_text (strict JSON, names a bad field): " + str(found)
