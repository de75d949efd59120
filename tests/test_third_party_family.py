"""A third-party environment family (examples/abc-env-frozenlake) installed into a temporary location: found by
``abc plugins``, passes ``check_env_family``, rolls out its expert and trains, with no core file touched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._examples import install_example

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "abc-env-frozenlake"
ENV_ID = "abc-frozenlake/FrozenLakeText-v0"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_example("abc-env-frozenlake", tmp_path_factory.mktemp("site"))


def _env(site: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **extra}


def _abc(site: Path, *args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agentbench_crbc", *args], capture_output=True, text=True,
                          env=_env(site), cwd=cwd, timeout=timeout)


def test_installed_family_is_listed_with_its_distribution(site: Path) -> None:
    res = _abc(site, "plugins")
    assert res.returncode == 0, res.stderr
    row = next(line.split() for line in res.stdout.splitlines() if line.split()[:2] == ["family", "frozenlake"])
    assert row[2:4] == ["abc-env-frozenlake", "0.1.0"]
    envs = _abc(site, "envs")
    assert any(line.startswith(ENV_ID + " ") for line in envs.stdout.splitlines()), envs.stdout


def test_installed_family_passes_the_family_kit(site: Path) -> None:
    code = ("from agentbench_crbc.testing import check_env_family; from agentbench_crbc.family import resolve_env; "
            "check_env_family('frozenlake', expert_seeds=range(6)); r = resolve_env('frozenlake'); "
            "print(r.family.name, r.env_id)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(site))
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["frozenlake", ENV_ID]


def test_example_own_tests_pass(site: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
                         capture_output=True, text=True, env=_env(site), cwd=EXAMPLE)
    assert res.returncode == 0, res.stdout + res.stderr


def _rollout(site: Path, env: str, tmp_path: Path) -> list[dict]:
    out = tmp_path / "out.jsonl"
    res = _abc(site, "rollout", "--env", env, "--policy", "expert", "--groups", "3", "--group-size", "4",
               "--workers", "0", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "success 12/12" in res.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_expert_rollout_by_id(site: Path, tmp_path: Path) -> None:
    recs = _rollout(site, ENV_ID, tmp_path)
    assert len(recs) == 12 and all(r["success"] and r["subtask"] == "4x4" for r in recs)
    assert all(s["response"].startswith("<action>") for r in recs for s in r["steps"])
    credit = _abc(site, "credit", "crbc", str(tmp_path / "out.jsonl"))
    assert credit.returncode == 0 and len(credit.stdout.splitlines()) == 12, credit.stderr


def test_expert_rollout_by_family_name(site: Path, tmp_path: Path) -> None:
    assert len(_rollout(site, "frozenlake", tmp_path)) == 12


def test_train_two_updates_from_the_installed_package(site: Path, tmp_path: Path) -> None:
    sets = ["updates=2", "rollout.groups=2", "rollout.group_size=4", "rollout.max_response_tokens=5",
            "eval.episodes=2", "eval.samples=1", "env.max_steps=6", "checkpoint_every=1", "progress=false",
            "tensorboard=false", f"out_dir={tmp_path}"]
    res = _abc(site, "train", "--credit", "grpo", "--env", "frozenlake", *[a for kv in sets for a in ("--set", kv)],
               cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    (run,) = [p for p in tmp_path.iterdir() if p.name.startswith("frozenlake__grpo__tiny__0__")]
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in rows if x["stage"] == "rl"] == [1, 2]
    records = [json.loads(x) for x in (run / "eval" / "records.jsonl").read_text().splitlines()]
    assert {x["env"] for x in records} == {"frozenlake"}
