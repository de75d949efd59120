"""`abc rollout` on the test-double env: every env failing at reset, --step-timeout, SIGTERM shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: registers the corridor test double as ``test/Corridor-v0`` and runs ``abc`` with the given arguments
LAUNCH = ("import sys, gymnasium; gymnasium.register('test/Corridor-v0', entry_point='tests.rollout.toyenv:Corridor'); "
          "from agentbench_crbc.cli import main; sys.exit(main(sys.argv[1:]))")


def abc_rollout(*args: str, **popen: object) -> subprocess.Popen:
    cmd = [sys.executable, "-c", LAUNCH, "rollout", "--env", "test/Corridor-v0", "--policy", "expert", *args]
    return subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def test_every_env_failing_at_reset_exits_nonzero_and_writes_nothing(tmp_path):
    out = tmp_path / "out.jsonl"
    proc = abc_rollout("--groups", "2", "--group-size", "2", "--workers", "0", "--set", "raise_at=0", "-o", str(out))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "every episode of test/Corridor-v0 failed before its first step" in err
    assert "Traceback" not in err and not out.exists()


def test_an_env_option_that_cannot_build_the_env_exits_2_before_any_episode(tmp_path):
    out = tmp_path / "out.jsonl"  # #31 item 8: checked before the work, not after every episode failed
    proc = abc_rollout("--groups", "2", "--group-size", "2", "--workers", "0", "--set", "no_such_kwarg=1",
                       "-o", str(out))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    (line,) = err.strip().splitlines()
    assert line.startswith("abc rollout: error: --set:") and "no_such_kwarg" in line and not out.exists()


def test_an_output_that_cannot_be_written_exits_2_before_any_episode(tmp_path):
    (tmp_path / "afile").write_text("")
    t0 = time.monotonic()
    proc = abc_rollout("--groups", "1500", "--group-size", "8", "--workers", "0", "-o",
                       str(tmp_path / "afile" / "out.jsonl"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "Not a directory" in err and "Traceback" not in err, err
    assert time.monotonic() - t0 < 30


def test_step_timeout_ends_hung_episodes(tmp_path):
    t0 = time.monotonic()
    proc = abc_rollout("--groups", "1", "--group-size", "2", "--workers", "1", "--set", "delay=30",
                       "--step-timeout", "1", "-o", str(tmp_path / "out.jsonl"))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "no answer within 1 s" in err, err
    assert time.monotonic() - t0 < 25


def _children(pid: int) -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                out.add(int(d.name))
    return out


def test_sigterm_stops_env_workers_like_ctrl_c(tmp_path):
    proc = abc_rollout("--groups", "2", "--group-size", "2", "--workers", "2", "--max-steps", "1000",
                       "--set", "length=1000", "--set", "delay=0.05", "-o", str(tmp_path / "out.jsonl"))
    deadline = time.monotonic() + 60
    while len(workers := _children(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(workers) == 2
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "interrupted" in err, err
    time.sleep(0.5)
    alive = [w for w in workers if Path(f"/proc/{w}").exists() and "Z" not in Path(f"/proc/{w}/stat").read_text()
             .rpartition(")")[2].split()[0]]
    assert alive == [], f"orphaned env workers {alive}"
    assert not (tmp_path / "out.jsonl").exists()


def test_sigterm_to_the_whole_process_group_prints_no_worker_traceback(tmp_path):
    # #31 item 13: `timeout`/a job scheduler signals the group; forked workers raised KeyboardInterrupt tracebacks
    import os

    proc = abc_rollout("--groups", "2", "--group-size", "2", "--workers", "2", "--max-steps", "1000",
                       "--set", "length=1000", "--set", "delay=0.05", "-o", str(tmp_path / "out.jsonl"),
                       start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_children(proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == "abc rollout: interrupted", err
