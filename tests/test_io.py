"""Safe writes: symlinks written through, devices and FIFOs written directly, modes kept, ``-`` is stdout."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentbench_crbc.io import atomic_open, atomic_write_text, write_target


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
