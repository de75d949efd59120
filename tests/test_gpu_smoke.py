"""``benchmarks/gpu_smoke.py --dry-run`` on a CPU: the carried wheel folder, the typed-in model configs, the plan."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_wheels import REQUIRED, check  # noqa: E402


def _fake_wheels(folder: Path, *, skip: str = "", big: bool = False) -> None:
    folder.mkdir()
    for name, version in [*REQUIRED.items(), ("agentbench_crbc", "0.1.0")]:
        if name == skip:
            continue
        with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"{name}/__init__.py", "")
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
