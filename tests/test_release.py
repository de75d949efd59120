"""The release: the built wheel and sdist pass ``twine check``, and the wheel installed into a fresh venv (not
editable) runs the README's commands: bare (credit works, training names its extra), then with ``[alfworld]``
(``abc train --credit crbc`` for two updates)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TINY = ["sft.steps=4", "sft.batch_size=8", "sft.pool=64", "sft.warmup=1", "updates=2", "rollout.groups=2",
        "rollout.group_size=4", "rollout.max_response_tokens=5", "eval.episodes=4", "eval.greedy=false",
        "env.max_steps=4", "max_minutes=0", "sft.max_minutes=0", "tensorboard=false"]

pytestmark = pytest.mark.slow


def _run(cmd: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, (r.args, r.stdout[-3000:], r.stderr[-3000:])
    return r.stdout


def _torch_pin() -> str:
    """The exact torch build this test environment runs (``2.13.0+cpu``): the fresh venv gets that build, never
    whatever a bare ``torch>=2.4`` would resolve to (on Linux PyPI, a CUDA build of several GB)."""
    try:
        return f"torch=={importlib.metadata.version('torch')}"
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("the release test pins the venv's torch to this environment's; install the [cpu] extra")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _ok(_run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=out))
    return out


def test_wheel_and_sdist_pass_twine_check(dist: Path) -> None:
    files = sorted(p.name for p in dist.iterdir())
    assert len(files) == 2 and files[0].endswith("-py3-none-any.whl") and files[1].endswith(".tar.gz")
    out = _ok(_run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())], cwd=dist))
    assert out.count("PASSED") == 2


@pytest.mark.timeout(1500)  # two pip installs: about 1-3 min from a warm pip cache, longer on a cold or busy one
def test_fresh_venv_from_the_wheel(dist: Path, tmp_path: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    venv = tmp_path / "venv"
    _ok(_run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path))
    pip, abc = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"], str(venv / "bin" / "abc")
    work = tmp_path / "work"  # outside the checkout: nothing may come from the source tree
    work.mkdir()

    # bare install: numpy/scipy only
    _ok(_run([*pip, str(wheel)], cwd=work))
    from agentbench_crbc import __version__

    assert _ok(_run([abc, "--version"], cwd=work)).strip() == f"agentbench-crbc {__version__}"
    assert "credit crbc" in _ok(_run([abc, "plugins"], cwd=work))
    assert "abc/Sokoban-v0 " in _ok(_run([abc, "envs"], cwd=work))
    _ok(_run([abc, "rollout", "--env", "sokoban", "--policy", "expert", "--groups", "2", "--group-size", "4",
              "-o", "r.jsonl", "--quiet"], cwd=work))
    credit = _ok(_run([abc, "credit", "crbc", "r.jsonl"], cwd=work)).splitlines()
    assert len(credit) == 8 and all('"advantages"' in line for line in credit)
    # abc bench ships in the wheel (no checkout needed): bare, it names the training extra like abc train
    for argv, extra in ((["train", "--credit", "crbc"], "train"), (["leaderboard", "render"], "leaderboard"),
                        (["bench", "--mode", "quick"], "train")):
        r = _run([abc, *argv], cwd=work)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert f"pip install 'agentbench-crbc[{extra}]'" in r.stderr and r.stderr.count("\n") == 1
    assert "5 runs" in _ok(_run([abc, "bench", "--mode", "quick", "--dry-run"], cwd=work))
    # the paper's reported rows ship with the package: the board shows outside a checkout
    assert "gpt-4o" in _ok(_run([abc, "leaderboard", "show", "--env", "alfworld", "--reps", "200"], cwd=work))
    assert 'name = "grpo"' in _ok(_run([abc, "train", "--config", "sokoban-cpu-grpo", "--print-config"], cwd=work))

    # the README's line: an environment extra brings the trainer
    _ok(_run([*pip, f"{wheel}[alfworld]", _torch_pin()], cwd=work))
    sets = [a for kv in [*TINY, f"out_dir={work / 'runs'}"] for a in ("--set", kv)]
    out = _ok(_run([abc, "train", "--credit", "crbc", *sets], cwd=work))
    assert "held-out success" in out and not out.rstrip().endswith("}")  # the readable summary, no JSON dump
    (run,) = (work / "runs").iterdir()
    assert (run / "model" / "config.json").exists() and (run / "results.json").exists()
    results = json.loads((run / "results.json").read_text())
    assert results["curves"] == str(run / "curves.png") and (run / "curves.png").is_file()  # matplotlib came too
    assert results["precision"] == "fp32 (model.dtype=fp32)"
    _ok(_run([str(venv / "bin" / "python"), "-c", "import textworld, alfworld, torch"], cwd=work))
