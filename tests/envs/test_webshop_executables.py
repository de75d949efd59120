"""No input runs a program (#31 item 1): WebShop's Chromium and chromedriver come from ``$ABC_CHROMIUM`` /
``$ABC_CHROMEDRIVER`` (what the user typed), never from env options, so a config file, ``--set`` or a shared run
folder's ``config.toml`` cannot name an executable."""

from __future__ import annotations

import contextlib
import io

import pytest

pytest.importorskip("flask")
pytest.importorskip("bm25s")

import gymnasium as gym

import agentbench_crbc.envs  # noqa: F401
from agentbench_crbc.cli import main
from agentbench_crbc.errors import ConfigError


@pytest.fixture
def evil(tmp_path):
    """A program that leaves a mark when it runs."""
    script = tmp_path / "evil.sh"
    script.write_text(f"#!/bin/sh\ntouch {tmp_path / 'RAN'}\nexit 1\n")
    script.chmod(0o755)
    return script


def _abc(argv):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    return rc, err.getvalue()


@pytest.mark.parametrize("key", ["chromium", "chromedriver"])
def test_env_options_naming_an_executable_are_refused(evil, key):
    with pytest.raises(ConfigError, match=f"{key}=.*ABC_CHROM"):
        env = gym.make("abc/WebShop-v0", mode="browser", **{key: str(evil)}, n_products=50)
        with contextlib.suppress(Exception):
            env.reset(seed=0)
    assert not (evil.parent / "RAN").exists()


def test_abc_rollout_set_of_an_executable_exits_2_before_any_work(evil, tmp_path):
    out = tmp_path / "out.jsonl"
    rc, err = _abc(["rollout", "--env", "webshop", "--policy", "random", "--groups", "1", "--group-size", "1",
                    "--workers", "0", "--set", "mode=browser", "--set", f"chromium={evil}", "--set",
                    f"chromedriver={evil}", "--set", "n_products=50", "-o", str(out)])
    assert rc == 2 and "ABC_CHROM" in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists() and not (tmp_path / "RAN").exists()


def test_a_config_file_naming_an_executable_is_refused(evil, tmp_path):
    toml = tmp_path / "c.toml"
    toml.write_text(f'[env]\nid = "abc/WebShop-v0"\nkwargs = {{mode = "browser", chromedriver = "{evil}", '
                    f'chromium = "{evil}", n_products = 50}}\n')
    rc, err = _abc(["train", "--config", str(toml), "--set", f"out_dir={tmp_path / 'runs'}"])
    assert rc == 2 and "ABC_CHROM" in err, err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "RAN").exists()


def test_the_executables_come_from_the_environment(monkeypatch, tmp_path):
    from agentbench_crbc.envs.webshop.browser import browser_available, browser_paths

    monkeypatch.delenv("ABC_CHROMIUM", raising=False)
    monkeypatch.delenv("ABC_CHROMEDRIVER", raising=False)
    assert browser_paths() == ("/usr/bin/chromium", "/usr/bin/chromedriver")
    monkeypatch.setenv("ABC_CHROMIUM", str(tmp_path / "my-chromium"))
    monkeypatch.setenv("ABC_CHROMEDRIVER", str(tmp_path / "my-driver"))
    assert browser_paths() == (str(tmp_path / "my-chromium"), str(tmp_path / "my-driver"))
    pytest.importorskip("selenium")
    assert str(tmp_path / "my-chromium") in (browser_available() or "")
