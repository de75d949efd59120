"""``benchmarks/gpu_smoke.py`` on a CPU: the carried wheel folder (complete, current, small), the typed-in model
configs and the plan (``--dry-run``), and the device command itself, rehearsed (``--rehearse``)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_wheels import REQUIRED, build, check, stale_files  # noqa: E402


def _fake_wheels(folder: Path, *, skip: str = "", big: bool = False) -> None:
    folder.mkdir()
    for name, version in [*REQUIRED.items(), ("agentbench_crbc", "0.1.0")]:
        if name == skip:
            continue
        with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as z:
            init = ROOT / name / "__init__.py"  # the project's own: as the source has it
            z.writestr(f"{name}/__init__.py", init.read_text() if name == "agentbench_crbc" else "")
            if big and name == "scipy":
                import os

                z.writestr("blob", os.urandom(65 * 1024 * 1024))


def test_wheel_check_names_what_is_missing_and_the_size(tmp_path):
    _fake_wheels(tmp_path / "ok")
    assert check(tmp_path / "ok") == []
    _fake_wheels(tmp_path / "short", skip="gguf")
    assert check(tmp_path / "short") == ["gguf: 0 wheels (want exactly one)"]
    assert "does not exist" in check(tmp_path / "none")[0]


@pytest.mark.slow
def test_wheel_check_refuses_a_folder_over_64_mib(tmp_path):
    _fake_wheels(tmp_path / "big", big=True)
    assert any("over the 64 MiB" in p for p in check(tmp_path / "big"))


def test_dry_run_checks_wheels_configs_and_plan(tmp_path):
    pytest.importorskip("transformers")
    _fake_wheels(tmp_path / "whl")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_smoke.py"), "--dry-run", "--wheels",
                        str(tmp_path / "whl")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "dry run: ok" in r.stdout and "total <= 480 s" in r.stdout
    for stage in ("gpu-tests", "rl-tiny", "fsdp1", "paper-probe", "vl-generate", "hf-tokens"):
        assert stage in r.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_smoke.py"), "--dry-run", "--wheels",
                          str(tmp_path / "missing")], capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1 and "NOT ready" in bad.stdout


def test_a_project_wheel_older_than_the_source_is_refused(tmp_path):
    """A wheel built before the last edit installs old code on the GPU (the rehearsal met one: an ImportError)."""
    _fake_wheels(tmp_path / "whl")
    (own,) = (tmp_path / "whl").glob("agentbench_crbc-*.whl")
    assert stale_files(own) == []
    with zipfile.ZipFile(own, "a") as z:
        z.writestr("agentbench_crbc/trainer/policy.py", "# an older push.py\n")
        z.writestr("agentbench_crbc/plugins/crbc.py", "# an older plugin\n")  # from plugins/ (package-dir)
    assert stale_files(own) == ["agentbench_crbc/trainer/policy.py", "plugins/crbc.py"]
    (problem,) = check(tmp_path / "whl")
    assert "older than the source" in problem and "python benchmarks/gpu_wheels.py" in problem


@pytest.mark.slow
@pytest.mark.timeout(1200)  # eight stages on CPU stand-ins, each limited to 3x its GPU limit: at most 1440 s
def test_rehearsal_runs_the_device_command_on_this_cpu(tmp_path):
    """``--rehearse``: the device command, as written, from a clean copy of the tracked files, with an interpreter
    that has the GPU image's packages and nothing of the project but the wheels; CUDA stages on CPU stand-ins."""
    pytest.importorskip("transformers")
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the rehearsal copies the tracked files")
    try:
        build(tmp_path / "whl")  # the pinned wheels from the registry (pip's cache) and the project's, built now
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"could not fetch the pinned wheels: {exc}")
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_smoke.py"), "--rehearse", "--wheels",
                        str(tmp_path / "whl")], capture_output=True, text=True, timeout=1100)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "rehearse: ok" in r.stdout and "8 of 8 passed" in r.stdout
    assert "agentbench_crbc from /" in r.stdout and "/site/agentbench_crbc" in r.stdout
