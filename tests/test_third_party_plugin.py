"""A third-party plugin installed into a temporary location is found by `abc plugins` and used by `abc credit`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._examples import install_example
from tests.credit.toy import toy

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "abc-credit-myalgo"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return install_example("abc-credit-myalgo", tmp_path_factory.mktemp("site"))


def _abc(site: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(site), **env}
    return subprocess.run([sys.executable, "-m", "agentbench_crbc", *args], capture_output=True, text=True,
                          env=environ)


@pytest.mark.slow
def test_installed_plugin_is_listed_and_used(site: Path, tmp_path: Path) -> None:
    res = _abc(site, "plugins")
    assert res.returncode == 0, res.stderr
    row = next(line.split() for line in res.stdout.splitlines() if line.split()[1] == "myalgo")
    assert row[2:4] == ["abc-credit-myalgo", "0.1.0"]
    records = tmp_path / "toy.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in toy()))
    res = _abc(site, "credit", "myalgo", str(records), "--option", "alpha=2")
    assert res.returncode == 0, res.stderr
    firsts = [json.loads(line)["advantages"][0] for line in res.stdout.splitlines()]
    assert firsts == [1.0, -1.0, 1.0, -1.0]  # 2 * (R - median 0.5)


@pytest.mark.slow
def test_disable_autoload_hides_third_party(site: Path) -> None:
    res = _abc(site, "plugins", ABC_DISABLE_PLUGIN_AUTOLOAD="1")
    assert res.returncode == 0 and "myalgo" not in res.stdout and "crbc" in res.stdout


@pytest.mark.slow
def test_example_own_tests_pass(site: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(site)}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
                         capture_output=True, text=True, env=env, cwd=EXAMPLE)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
def test_abc_bench_takes_an_installed_third_party_method(site: Path) -> None:
    res = _abc(site, "bench", "--method", "myalgo", "--method", "imitation", "--dry-run")
    assert res.returncode == 0, res.stderr
    rl = [line for line in res.stdout.splitlines() if " myalgo " in line]
    assert len(rl) == 1 and "abc train --env sokoban --credit myalgo --model WARM/model" in rl[0]
    assert "3 runs (1 RL, 1 warm starts, 1 controls)" in res.stdout
    res = _abc(site, "bench", "--method", "myalgo", "--dry-run", ABC_DISABLE_PLUGIN_AUTOLOAD="1")
    assert res.returncode == 2 and "unknown method(s) myalgo; choose a variant" in res.stderr
